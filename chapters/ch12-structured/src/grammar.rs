//! The grammar: what a JSON value may look like, as a small graph of nodes.
//!
//! A schema compiles into this graph ([`crate::schema`]); `{"type":"json_object"}` is the
//! graph [`Grammar::any_object`]. Nodes refer to each other by index, so a schema that
//! refers to itself (`$ref` to an enclosing definition) is a cycle in the graph, not an
//! infinite tree.

use std::sync::Arc;

/// A node's index in [`Parts::nodes`].
pub type NodeId = usize;

/// No upper bound on a length or a count.
pub const UNBOUNDED: u32 = u32::MAX;

// ANCHOR: node
/// One kind of JSON value.
#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    /// Any JSON value at all.
    Any,
    /// `null`.
    Null,
    /// `true` or `false`.
    Boolean,
    /// A JSON number without fraction or exponent.
    Integer,
    /// Any JSON number.
    Number,
    /// A string of `min..=max` characters (an escape such as `\n` is one character).
    String { min: u32, max: u32 },
    /// Exactly this JSON text: a `const`, or one member of an `enum`.
    Literal(Vec<u8>),
    /// `[ item, item, … ]` with `min..=max` items.
    Array { items: NodeId, min: u32, max: u32 },
    /// `{ … }`: the listed properties in this order, each required one present; then, if
    /// `rest` names a node, any further `"key": value` members whose values match it.
    Object {
        props: Vec<Prop>,
        rest: Option<NodeId>,
    },
    /// Any one of these.
    AnyOf(Vec<NodeId>),
}

/// One property of an object node.
#[derive(Clone, Debug, PartialEq)]
pub struct Prop {
    /// The key as it appears in JSON text, quotes included: `"name"`.
    pub key: Vec<u8>,
    pub value: NodeId,
    pub required: bool,
}
// ANCHOR_END: node

/// A grammar: its nodes and the one a document must match. Cloning it is cheap (the
/// parts are shared), so every generation that uses it can hold its own.
#[derive(Clone, Debug)]
pub struct Grammar(Arc<Parts>);

/// What a grammar is made of.
#[derive(Debug)]
pub struct Parts {
    pub nodes: Vec<Node>,
    pub root: NodeId,
    /// For each node, the shortest JSON text it accepts ([`Grammar::shortest`]).
    shortest: Vec<Vec<u8>>,
}

impl std::ops::Deref for Grammar {
    type Target = Parts;

    fn deref(&self) -> &Parts {
        &self.0
    }
}

/// Why a graph of nodes is not a usable grammar.
#[derive(Clone, Debug, PartialEq)]
pub enum GrammarError {
    /// A node refers to an index past the end.
    Dangling(NodeId),
    /// A node accepts no text of at most [`MAX_SHORTEST`] bytes (`{"$ref": "#"}` that must
    /// contain itself, or required parts that add up past the limit).
    Endless(NodeId),
    /// An `anyOf` that is its own alternative, through `anyOf`s alone: choosing among
    /// them would never reach a byte.
    Loop(NodeId),
}

/// The longest "shortest text" a grammar may have. Nested required objects can double it
/// at every level, so a small schema could otherwise ask for gigabytes.
pub const MAX_SHORTEST: usize = 64 * 1024;

impl std::fmt::Display for GrammarError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GrammarError::Dangling(id) => {
                write!(f, "node {id} refers to a node that does not exist")
            }
            GrammarError::Loop(id) => {
                write!(
                    f,
                    "node {id} is one of its own alternatives (an anyOf that refers to itself)"
                )
            }
            GrammarError::Endless(id) => write!(
                f,
                "node {id} has no value of at most {MAX_SHORTEST} bytes (every value of it \
                 contains another, or its required parts add up past the limit)"
            ),
        }
    }
}

impl Grammar {
    /// Checks the graph and works out every node's shortest text.
    pub fn new(nodes: Vec<Node>, root: NodeId) -> Result<Grammar, GrammarError> {
        for (id, node) in nodes.iter().enumerate() {
            for child in children(node) {
                if child >= nodes.len() {
                    return Err(GrammarError::Dangling(id));
                }
            }
        }
        if root >= nodes.len() {
            return Err(GrammarError::Dangling(root));
        }
        if let Some(id) = any_of_loop(&nodes) {
            return Err(GrammarError::Loop(id));
        }
        let shortest = shortest_texts(&nodes)?;
        Ok(Grammar(Arc::new(Parts {
            nodes,
            root,
            shortest,
        })))
    }

    /// `{"type":"json_object"}`: any JSON object.
    pub fn any_object() -> Grammar {
        let nodes = vec![
            Node::Object {
                props: Vec::new(),
                rest: Some(1),
            },
            Node::Any,
        ];
        Grammar::new(nodes, 0).expect("a fixed, finite grammar")
    }

    /// Any JSON value.
    pub fn any_value() -> Grammar {
        Grammar::new(vec![Node::Any], 0).expect("a fixed, finite grammar")
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id]
    }

    /// The shortest JSON text node `id` accepts: what "finish the document now" writes.
    pub fn shortest(&self, id: NodeId) -> &[u8] {
        &self.shortest[id]
    }
}

/// The nodes a node refers to.
fn children(node: &Node) -> Vec<NodeId> {
    match node {
        Node::Array { items, .. } => vec![*items],
        Node::Object { props, rest } => props.iter().map(|p| p.value).chain(*rest).collect(),
        Node::AnyOf(alts) => alts.clone(),
        Node::Any
        | Node::Null
        | Node::Boolean
        | Node::Integer
        | Node::Number
        | Node::String { .. }
        | Node::Literal(_) => Vec::new(),
    }
}

/// A node on a cycle of `anyOf` alternatives, if there is one (a depth-first search that
/// marks the nodes on its current path).
fn any_of_loop(nodes: &[Node]) -> Option<NodeId> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Done,
    }
    let mut mark = vec![Mark::New; nodes.len()];
    for start in 0..nodes.len() {
        if mark[start] != Mark::New {
            continue;
        }
        // (node, index of its next alternative to visit)
        let mut path = vec![(start, 0)];
        mark[start] = Mark::OnPath;
        while let Some(&mut (id, ref mut next)) = path.last_mut() {
            let alts: &[NodeId] = match &nodes[id] {
                Node::AnyOf(alts) => alts,
                _ => &[],
            };
            if let Some(&alt) = alts.get(*next) {
                *next += 1;
                match mark[alt] {
                    Mark::OnPath => return Some(alt),
                    Mark::New => {
                        mark[alt] = Mark::OnPath;
                        path.push((alt, 0));
                    }
                    Mark::Done => {}
                }
            } else {
                mark[id] = Mark::Done;
                path.pop();
            }
        }
    }
    None
}

// ANCHOR: shortest
/// Every node's shortest text, found the way shortest paths are: start with "unknown"
/// everywhere, and keep improving any node whose text can now be built from its
/// children's, until nothing changes. A node still unknown at the end accepts only
/// infinite texts. A shortest text never holds a node inside itself, so it is at most
/// `nodes.len()` levels deep, and that many passes (plus one to see nothing change) settle it.
// ANCHOR: shortest_texts
fn shortest_texts(nodes: &[Node]) -> Result<Vec<Vec<u8>>, GrammarError> {
    let mut best: Vec<Option<Vec<u8>>> = vec![None; nodes.len()];
    for _pass in 0..=nodes.len() {
        let mut changed = false;
        for (id, node) in nodes.iter().enumerate() {
            let Some(text) = shortest_from(node, &best) else {
                continue;
            };
            if best[id].as_ref().is_none_or(|old| text.len() < old.len()) {
                best[id] = Some(text);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    best.into_iter()
        .enumerate()
        .map(|(id, text)| text.ok_or(GrammarError::Endless(id)))
        .collect()
}
// ANCHOR_END: shortest_texts

/// A node's shortest text from its children's best so far (`None`: not yet known, or
/// over [`MAX_SHORTEST`]).
fn shortest_from(node: &Node, best: &[Option<Vec<u8>>]) -> Option<Vec<u8>> {
    let text = built_from(node, best)?;
    (text.len() <= MAX_SHORTEST).then_some(text)
}

fn built_from(node: &Node, best: &[Option<Vec<u8>>]) -> Option<Vec<u8>> {
    Some(match node {
        Node::Any | Node::Null => b"null".to_vec(),
        Node::Boolean => b"true".to_vec(),
        Node::Integer | Node::Number => b"0".to_vec(),
        Node::String { min, .. } => {
            if *min as usize > MAX_SHORTEST {
                return None;
            }
            let mut s = vec![b'"'];
            s.resize(1 + *min as usize, b'a');
            s.push(b'"');
            s
        }
        Node::Literal(text) => text.clone(),
        Node::Array { items, min, .. } => {
            let mut s = vec![b'['];
            for i in 0..*min {
                if i > 0 {
                    s.push(b',');
                }
                s.extend_from_slice(best[*items].as_ref()?);
                if s.len() > MAX_SHORTEST {
                    return None;
                }
            }
            s.push(b']');
            s
        }
        Node::Object { props, .. } => {
            let mut s = vec![b'{'];
            for p in props.iter().filter(|p| p.required) {
                if s.len() > 1 {
                    s.push(b',');
                }
                s.extend_from_slice(&p.key);
                s.push(b':');
                s.extend_from_slice(best[p.value].as_ref()?);
                if s.len() > MAX_SHORTEST {
                    return None;
                }
            }
            s.push(b'}');
            s
        }
        Node::AnyOf(alts) => alts
            .iter()
            .filter_map(|a| best[*a].clone())
            .min_by_key(|t| t.len())?,
    })
}
// ANCHOR_END: shortest

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shortest_texts_follow_the_nodes() {
        let nodes = vec![
            Node::Object {
                props: vec![
                    Prop {
                        key: b"\"a\"".to_vec(),
                        value: 1,
                        required: true,
                    },
                    Prop {
                        key: b"\"b\"".to_vec(),
                        value: 2,
                        required: false,
                    },
                ],
                rest: None,
            },
            Node::Array {
                items: 2,
                min: 2,
                max: UNBOUNDED,
            },
            Node::String { min: 1, max: 3 },
        ];
        let g = Grammar::new(nodes, 0).unwrap();
        assert_eq!(g.shortest(0), br#"{"a":["a","a"]}"#);
    }

    #[test]
    fn a_node_that_must_contain_itself_is_refused() {
        // {"type":"object","properties":{"next":{"$ref":"#"}},"required":["next"]}
        let nodes = vec![Node::Object {
            props: vec![Prop {
                key: b"\"next\"".to_vec(),
                value: 0,
                required: true,
            }],
            rest: None,
        }];
        assert_eq!(
            Grammar::new(nodes, 0).unwrap_err(),
            GrammarError::Endless(0)
        );
    }

    #[test]
    fn an_any_of_that_is_its_own_alternative_is_refused() {
        let nodes = vec![Node::AnyOf(vec![1, 2]), Node::AnyOf(vec![0]), Node::Null];
        assert_eq!(Grammar::new(nodes, 0).unwrap_err(), GrammarError::Loop(0));
    }

    #[test]
    fn a_recursive_node_with_a_way_out_is_fine() {
        // A linked list: {"next": list or null}
        let nodes = vec![
            Node::Object {
                props: vec![Prop {
                    key: b"\"next\"".to_vec(),
                    value: 1,
                    required: true,
                }],
                rest: None,
            },
            Node::AnyOf(vec![0, 2]),
            Node::Null,
        ];
        let g = Grammar::new(nodes, 0).unwrap();
        assert_eq!(g.shortest(0), br#"{"next":null}"#);
    }
}
