//! JSON schema, the subset that OpenAI's structured outputs and pydantic's
//! `model_json_schema()` use, compiled into a [`Grammar`].
//!
//! A schema is untrusted input (it comes in a request body), so every keyword this
//! compiler does not implement is refused, naming the keyword and where it stands, rather
//! than ignored: a constraint dropped in silence is an answer that does not validate.
//! Words that only describe (`title`, `description`, `default`, `examples`, …) are read
//! past. The sizes a schema can ask for are bounded ([`Limits`]).

use std::collections::HashMap;

use crate::grammar::{Grammar, GrammarError, Node, NodeId, Prop, UNBOUNDED};
use crate::json::Json;

/// Why a schema was refused: where (a JSON pointer into the schema), and what.
#[derive(Clone, Debug, PartialEq)]
pub struct SchemaError {
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for SchemaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

impl std::error::Error for SchemaError {}

/// How much a schema may ask for.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Grammar nodes in all.
    pub nodes: usize,
    /// Schemas inside schemas, counted along one path (a `$ref` is followed once).
    pub depth: usize,
    /// Members of one `enum`, or alternatives of one `anyOf`.
    pub alternatives: usize,
    /// Properties of one object.
    pub properties: usize,
    /// Bytes of all `enum` and `const` texts together.
    pub literal_bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            nodes: 4096,
            depth: 32,
            alternatives: 256,
            properties: 256,
            literal_bytes: 64 * 1024,
        }
    }
}

/// The keywords that describe and do not constrain: read past.
const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "default",
    "examples",
    "$schema",
    "$id",
    "$comment",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$defs",
    "definitions",
];

/// Compiles `schema` (a whole document: `$ref`s resolve against it) into a grammar.
pub fn compile(schema: &Json, limits: Limits) -> Result<Grammar, SchemaError> {
    let mut c = Compiler {
        root: schema,
        limits,
        nodes: Vec::new(),
        refs: HashMap::new(),
        literal_bytes: 0,
    };
    let root = c.schema(schema, "#", 0)?;
    Grammar::new(c.nodes, root).map_err(|e| match e {
        GrammarError::Endless(_) => SchemaError {
            path: "#".into(),
            message: format!("no document matches it in under 64 KiB ({e})"),
        },
        GrammarError::Loop(_) => SchemaError {
            path: "#".into(),
            message: "an `anyOf` (through `$ref`s) lists itself as an alternative".into(),
        },
        GrammarError::Dangling(_) => unreachable!("the compiler only links nodes it made"),
    })
}

/// Parses and compiles a schema given as text.
pub fn compile_text(text: &str, limits: Limits) -> Result<Grammar, SchemaError> {
    let json = Json::parse(text).map_err(|e| SchemaError {
        path: "#".into(),
        message: format!("not JSON: {e}"),
    })?;
    compile(&json, limits)
}

struct Compiler<'s> {
    root: &'s Json,
    limits: Limits,
    nodes: Vec<Node>,
    /// `$ref` targets already compiled (or being compiled: a cycle), by pointer.
    refs: HashMap<String, NodeId>,
    literal_bytes: usize,
}

fn err(path: &str, message: impl Into<String>) -> SchemaError {
    SchemaError {
        path: path.to_owned(),
        message: message.into(),
    }
}

impl<'s> Compiler<'s> {
    fn add(&mut self, node: Node, path: &str) -> Result<NodeId, SchemaError> {
        if self.nodes.len() >= self.limits.nodes {
            return Err(err(
                path,
                format!(
                    "the schema needs more than {} grammar nodes",
                    self.limits.nodes
                ),
            ));
        }
        self.nodes.push(node);
        Ok(self.nodes.len() - 1)
    }

    fn literal(&mut self, value: &Json, path: &str) -> Result<NodeId, SchemaError> {
        let text = value.to_text().into_bytes();
        self.literal_bytes += text.len();
        if self.literal_bytes > self.limits.literal_bytes {
            return Err(err(
                path,
                format!(
                    "enum and const texts add up to over {} bytes",
                    self.limits.literal_bytes
                ),
            ));
        }
        self.add(Node::Literal(text), path)
    }

    // ANCHOR: schema
    /// One schema, at JSON pointer `path`, `depth` schemas deep.
    fn schema(&mut self, s: &Json, path: &str, depth: usize) -> Result<NodeId, SchemaError> {
        if depth > self.limits.depth {
            return Err(err(
                path,
                format!("schemas nest more than {} deep", self.limits.depth),
            ));
        }
        let members = match s {
            Json::Bool(true) => return self.add(Node::Any, path),
            Json::Bool(false) => return Err(err(path, "the schema `false` accepts nothing")),
            Json::Object(members) => members,
            other => {
                return Err(err(
                    path,
                    format!("a schema is an object or a boolean, not {}", other.kind()),
                ));
            }
        };
        // ANCHOR: refuse
        // Anything this compiler does not implement is refused by name.
        const KNOWN: &[&str] = &[
            "type",
            "properties",
            "required",
            "additionalProperties",
            "items",
            "enum",
            "const",
            "anyOf",
            "$ref",
            "minItems",
            "maxItems",
            "minLength",
            "maxLength",
        ];
        for (key, _) in members {
            if !KNOWN.contains(&key.as_str()) && !ANNOTATIONS.contains(&key.as_str()) {
                return Err(err(
                    &format!("{path}/{key}"),
                    format!("the keyword `{key}` is not supported"),
                ));
            }
        }
        // ANCHOR_END: refuse
        if let Some(target) = s.get("$ref") {
            if members
                .iter()
                .any(|(k, _)| k != "$ref" && !ANNOTATIONS.contains(&k.as_str()))
            {
                return Err(err(
                    path,
                    "`$ref` beside other constraints is not supported",
                ));
            }
            return self.reference(target, &format!("{path}/$ref"), depth);
        }
        if let Some(value) = s.get("const") {
            return self.literal(value, &format!("{path}/const"));
        }
        if let Some(values) = s.get("enum") {
            return self.alternatives(values, "enum", &format!("{path}/enum"), |c, v, p| {
                c.literal(v, p)
            });
        }
        if let Some(alts) = s.get("anyOf") {
            let each = |c: &mut Self, alt: &Json, p: &str| c.schema(alt, p, depth + 1);
            return self.alternatives(alts, "anyOf", &format!("{path}/anyOf"), each);
        }
        match s.get("type") {
            None if s.get("properties").is_some() => self.typed(s, "object", path, depth),
            None => self.add(Node::Any, path),
            Some(Json::String(t)) => self.typed(s, t, path, depth),
            Some(Json::Array(types)) => {
                // `"type": ["string", "null"]`: one node per type, any of them.
                let mut alts = Vec::new();
                for (i, t) in types.iter().enumerate() {
                    let Json::String(t) = t else {
                        return Err(err(&format!("{path}/type/{i}"), "a type is a string"));
                    };
                    alts.push(self.typed(s, t, path, depth)?);
                }
                self.add(Node::AnyOf(alts), path)
            }
            Some(other) => Err(err(
                &format!("{path}/type"),
                format!("`type` is a string or a list, not {}", other.kind()),
            )),
        }
    }
    // ANCHOR_END: schema

    fn typed(
        &mut self,
        s: &Json,
        t: &str,
        path: &str,
        depth: usize,
    ) -> Result<NodeId, SchemaError> {
        match t {
            "null" => self.add(Node::Null, path),
            "boolean" => self.add(Node::Boolean, path),
            "integer" => self.add(Node::Integer, path),
            "number" => self.add(Node::Number, path),
            "string" => {
                let (min, max) = bounds(s, "minLength", "maxLength", path)?;
                self.add(Node::String { min, max }, path)
            }
            "array" => {
                let (min, max) = bounds(s, "minItems", "maxItems", path)?;
                let items = match s.get("items") {
                    Some(item) => self.schema(item, &format!("{path}/items"), depth + 1)?,
                    None => self.add(Node::Any, path)?,
                };
                self.add(Node::Array { items, min, max }, path)
            }
            "object" => self.object(s, path, depth),
            other => Err(err(
                &format!("{path}/type"),
                format!("unknown type `{other}`"),
            )),
        }
    }

    // ANCHOR: object
    fn object(&mut self, s: &Json, path: &str, depth: usize) -> Result<NodeId, SchemaError> {
        let required: Vec<&str> = match s.get("required") {
            None => Vec::new(),
            Some(Json::Array(names)) => names
                .iter()
                .map(|n| match n {
                    Json::String(n) => Ok(n.as_str()),
                    _ => Err(err(&format!("{path}/required"), "`required` lists strings")),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(err(&format!("{path}/required"), "`required` is a list")),
        };
        let listed = match s.get("properties") {
            None => &[][..],
            Some(Json::Object(members)) => members.as_slice(),
            Some(_) => {
                return Err(err(
                    &format!("{path}/properties"),
                    "`properties` is an object",
                ));
            }
        };
        if listed.len() > self.limits.properties {
            return Err(err(
                &format!("{path}/properties"),
                format!("more than {} properties", self.limits.properties),
            ));
        }
        for name in &required {
            if !listed.iter().any(|(k, _)| k == name) {
                return Err(err(
                    &format!("{path}/required"),
                    format!("`{name}` is required but not a property"),
                ));
            }
        }
        let mut props = Vec::new();
        for (name, schema) in listed {
            let value = self.schema(schema, &format!("{path}/properties/{name}"), depth + 1)?;
            let key = Json::String(name.clone()).to_text().into_bytes();
            props.push(Prop {
                key,
                value,
                required: required.contains(&name.as_str()),
            });
        }
        // Extra members: what `additionalProperties` says. Left out, an object with listed
        // properties takes no others (llama.cpp's choice too: it keeps the model on the
        // schema), and one without takes any.
        let rest = match s.get("additionalProperties") {
            Some(Json::Bool(false)) => None,
            Some(Json::Bool(true)) => Some(self.add(Node::Any, path)?),
            Some(extra) => {
                Some(self.schema(extra, &format!("{path}/additionalProperties"), depth + 1)?)
            }
            None if listed.is_empty() => Some(self.add(Node::Any, path)?),
            None => None,
        };
        self.add(Node::Object { props, rest }, path)
    }
    // ANCHOR_END: object

    /// `enum` (each value a literal) or `anyOf` (each a schema): any one of a bounded list.
    fn alternatives(
        &mut self,
        list: &Json,
        keyword: &str,
        path: &str,
        mut each: impl FnMut(&mut Self, &Json, &str) -> Result<NodeId, SchemaError>,
    ) -> Result<NodeId, SchemaError> {
        let limit = self.limits.alternatives;
        match list {
            Json::Array(items) if !items.is_empty() && items.len() <= limit => {
                let mut alts = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    alts.push(each(self, item, &format!("{path}/{i}"))?);
                }
                self.add(Node::AnyOf(alts), path)
            }
            _ => Err(err(
                path,
                format!("`{keyword}` is a list of 1 to {limit} entries"),
            )),
        }
    }

    // ANCHOR: reference
    /// `"$ref": "#/$defs/Name"`: compiled once; a reference back into a schema being
    /// compiled (recursion) gets the node reserved for it, so the grammar has a cycle.
    fn reference(
        &mut self,
        target: &Json,
        path: &str,
        depth: usize,
    ) -> Result<NodeId, SchemaError> {
        let Json::String(pointer) = target else {
            return Err(err(path, "`$ref` is a string"));
        };
        if let Some(&id) = self.refs.get(pointer) {
            return Ok(id);
        }
        let schema = resolve(self.root, pointer).ok_or_else(|| {
            err(
                path,
                format!(
                    "`{pointer}` does not point into this schema (only `#…` pointers are supported)"
                ),
            )
        })?;
        // Reserve the node first: a reference to itself, met while compiling it, finds it.
        let id = self.add(Node::AnyOf(Vec::new()), path)?;
        self.refs.insert(pointer.clone(), id);
        let body = self.schema(schema, pointer, depth + 1)?;
        self.nodes[id] = Node::AnyOf(vec![body]);
        Ok(id)
    }
    // ANCHOR_END: reference
}

/// A JSON pointer (`#`, `#/$defs/Item`) into the schema document.
fn resolve<'j>(root: &'j Json, pointer: &str) -> Option<&'j Json> {
    let rest = pointer.strip_prefix('#')?;
    let mut at = root;
    for part in rest.split('/').skip(1) {
        let part = part.replace("~1", "/").replace("~0", "~");
        at = match at {
            Json::Object(_) => at.get(&part)?,
            Json::Array(items) => items.get(part.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(at)
}

/// A pair of count keywords (`minItems`, `maxItems`), the lower not above the upper.
fn bounds(s: &Json, low: &str, high: &str, path: &str) -> Result<(u32, u32), SchemaError> {
    let (min, max) = (count(s, low, 0, path)?, count(s, high, UNBOUNDED, path)?);
    if min > max {
        return Err(err(
            &format!("{path}/{low}"),
            format!("`{low}` is above `{high}`"),
        ));
    }
    Ok((min, max))
}

/// A count keyword (`minItems`…): a whole number that fits in 32 bits, or `default`.
fn count(s: &Json, key: &str, default: u32, path: &str) -> Result<u32, SchemaError> {
    match s.get(key) {
        None => Ok(default),
        Some(Json::Number(n)) => n
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|&n| n != UNBOUNDED)
            .ok_or_else(|| {
                err(
                    &format!("{path}/{key}"),
                    format!("`{key}` is a whole number below 2^32 - 1"),
                )
            }),
        Some(_) => Err(err(
            &format!("{path}/{key}"),
            format!("`{key}` is a number"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matcher::Matcher;

    fn grammar(schema: &str) -> Grammar {
        compile_text(schema, Limits::default()).unwrap_or_else(|e| panic!("{schema}: {e}"))
    }

    fn accepts(g: &Grammar, doc: &str) -> bool {
        let mut m = Matcher::new(g);
        m.accept(doc.as_bytes()) && m.is_complete()
    }

    #[test]
    fn a_pydantic_model() {
        // What pydantic 2 emits for:
        //   class Pet(BaseModel): name: str; kind: Literal["cat", "dog"]
        //   class Person(BaseModel): name: str; age: int; pets: list[Pet] = []; email: str | None = None
        let g = grammar(
            r##"{"$defs": {"Pet": {"properties": {"name": {"title": "Name", "type": "string"},
                "kind": {"enum": ["cat", "dog"], "title": "Kind", "type": "string"}},
                "required": ["name", "kind"], "title": "Pet", "type": "object"}},
              "properties": {"name": {"title": "Name", "type": "string"},
                "age": {"title": "Age", "type": "integer"},
                "pets": {"default": [], "items": {"$ref": "#/$defs/Pet"}, "title": "Pets", "type": "array"},
                "email": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "title": "Email"}},
              "required": ["name", "age"], "title": "Person", "type": "object"}"##,
        );
        assert!(accepts(&g, r#"{"name": "Ann", "age": 30}"#));
        assert!(accepts(
            &g,
            r#"{"name":"Ann","age":30,"pets":[{"name":"Rex","kind":"dog"}],"email":null}"#
        ));
        assert!(accepts(
            &g,
            r#"{"name": "Ann", "age": 30, "email": "a@b.c"}"#
        ));
        assert!(
            !accepts(&g, r#"{"age": 30, "name": "Ann"}"#),
            "properties come in the schema's order"
        );
        assert!(!accepts(&g, r#"{"name": "Ann"}"#), "age is required");
        assert!(!accepts(&g, r#"{"name": "Ann", "age": 30.5}"#));
        assert!(!accepts(
            &g,
            r#"{"name": "Ann", "age": 3, "pets": [{"name": "R", "kind": "cow"}]}"#
        ));
        assert!(
            !accepts(&g, r#"{"name": "Ann", "age": 3, "x": 1}"#),
            "no extra properties"
        );
    }

    #[test]
    fn a_recursive_schema_compiles_to_a_cycle() {
        let g = grammar(
            r##"{"$defs": {"Node": {"type": "object", "properties": {"value": {"type": "integer"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
                "required": ["value", "children"]}}, "$ref": "#/$defs/Node"}"##,
        );
        assert!(accepts(
            &g,
            r#"{"value": 1, "children": [{"value": 2, "children": []}]}"#
        ));
        assert!(g.nodes.len() < 10);
    }

    #[test]
    fn lengths_and_counts() {
        let g = grammar(
            r#"{"type": "array", "items": {"type": "string", "minLength": 2, "maxLength": 3}, "minItems": 1, "maxItems": 2}"#,
        );
        assert!(accepts(&g, r#"["ab", "abc"]"#));
        assert!(accepts(&g, r#"["\u00e9\n"]"#), "an escape is one character");
        assert!(!accepts(&g, r#"[]"#));
        assert!(!accepts(&g, r#"["a"]"#));
        assert!(!accepts(&g, r#"["abcd"]"#));
        assert!(!accepts(&g, r#"["ab", "ab", "ab"]"#));
    }

    #[test]
    fn unsupported_keywords_are_named_with_their_place() {
        let e = compile_text(
            r#"{"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}}"#,
            Limits::default(),
        )
        .unwrap_err();
        assert_eq!(e.path, "#/properties/n/minimum");
        assert!(e.message.contains("`minimum`"), "{e}");
    }

    #[test]
    fn limits_hold() {
        let many: Vec<String> = (0..300).map(|i| format!("\"v{i}\"")).collect();
        let e = compile_text(
            &format!(r#"{{"enum": [{}]}}"#, many.join(",")),
            Limits::default(),
        )
        .unwrap_err();
        assert!(e.message.contains("256"), "{e}");
        let endless =
            r##"{"type": "object", "properties": {"next": {"$ref": "#"}}, "required": ["next"]}"##;
        let e = compile_text(endless, Limits::default()).unwrap_err();
        assert!(e.message.contains("no document"), "{e}");
        let mut deep = String::from(r#"{"type": "integer"}"#);
        for _ in 0..40 {
            deep = format!(r#"{{"type": "array", "items": {deep}}}"#);
        }
        let e = compile_text(&deep, Limits::default()).unwrap_err();
        assert!(e.message.contains("deep"), "{e}");
    }
}
