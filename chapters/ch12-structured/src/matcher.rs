//! The matcher: reads a JSON text one byte at a time and says, after each byte, whether
//! the text so far can still become a document the grammar accepts.
//!
//! Its state is a stack of frames, one per thing begun and not finished (an object, the
//! key inside it, the string that is its value, …), the way a hand-written JSON parser
//! keeps its place. A byte can mean more than one thing (`"` may start any of several
//! optional keys; `anyOf` offers several kinds of value), so the state is a *set* of such
//! stacks, and a byte moves every stack in the set to all the stacks it can lead to. The
//! text is rejected when the set becomes empty.

use crate::grammar::{Grammar, Node, NodeId};

/// The most whitespace bytes in a row between two parts of a document: enough for pretty
/// printing a few levels deep, too few for a model to wander off in newlines.
pub const MAX_SPACE: u8 = 20;
/// The most digits in each part of a number (integer, fraction, exponent).
pub const MAX_DIGITS: u8 = 16;
/// The deepest nesting of arrays and objects.
pub const MAX_DEPTH: usize = 32;

// ANCHOR: frame
/// One thing begun and not yet finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frame {
    /// Optional whitespace; `n` bytes of it so far.
    Space(u8),
    /// A value of this node starts at the next byte.
    Value(NodeId),
    /// Inside a fixed text; `at` of its bytes matched.
    Text { text: TextRef, at: u32 },
    /// Inside a string, after its opening quote.
    Str(Str),
    /// Inside a number.
    Num(Num),
    /// Inside an object: `next` is the first listed property not yet passed.
    Obj { node: NodeId, next: u32, at: ObjAt },
    /// Inside an array, `count` items begun.
    Arr { node: NodeId, count: u32, at: ArrAt },
}

/// Where an object is between its members.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjAt {
    /// Just after `{`: a key or `}`.
    Open,
    /// Just after `,`: a key.
    Key,
    /// Just after a key: `:`. The key is listed property `Some(i)`, or an extra one.
    Colon(Option<u32>),
    /// Just after a member's value: `,` or `}`.
    Member,
}

/// Where an array is between its items.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArrAt {
    /// Just after `[`: an item or `]`.
    Open,
    /// Just after `,`: an item.
    Item,
    /// Just after an item: `,` or `]`.
    Member,
}
// ANCHOR_END: frame

/// A fixed text a frame is inside.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextRef {
    /// A [`Node::Literal`].
    Literal(NodeId),
    /// The key of listed property `prop` of object `node`.
    Key {
        node: NodeId,
        prop: u32,
    },
    True,
    False,
    Null,
}

/// Where a string is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Str {
    /// Characters begun so far.
    pub chars: u32,
    pub min: u32,
    pub max: u32,
    pub pending: Pending,
}

/// The rest of a character a string is in the middle of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pending {
    /// Between characters.
    None,
    /// After a backslash.
    Escape,
    /// After `\u`, this many hex digits to go.
    Hex(u8),
    /// In a multi-byte UTF-8 character: `left` bytes to go, the next one in `lo..=hi`.
    Utf8 { left: u8, lo: u8, hi: u8 },
}

/// Where a number is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Num {
    pub part: NumPart,
    /// Digits in the current part.
    pub digits: u8,
    /// No fraction, no exponent.
    pub integer: bool,
}

/// The parts of a JSON number, as its grammar names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NumPart {
    /// After `-`: a digit must follow.
    Minus,
    /// A lone leading `0`.
    Zero,
    /// Integer digits.
    Int,
    /// After `.`: a digit must follow.
    Dot,
    /// Fraction digits.
    Frac,
    /// After `e`: a sign or a digit.
    E,
    /// After the exponent's sign: a digit.
    ESign,
    /// Exponent digits.
    Exp,
}

/// One reading of the text so far: the frames, outermost first.
pub type Stack = Vec<Frame>;

/// The matcher's state: every reading of the text so far still alive.
#[derive(Clone, Debug)]
pub struct Matcher {
    grammar: Grammar,
    stacks: Vec<Stack>,
}

impl Matcher {
    /// Before the first byte of a document: optional whitespace, then the root value.
    pub fn new(grammar: &Grammar) -> Matcher {
        Matcher {
            grammar: grammar.clone(),
            stacks: vec![vec![Frame::Value(grammar.root), Frame::Space(0)]],
        }
    }

    pub fn grammar(&self) -> &Grammar {
        &self.grammar
    }

    pub fn stacks(&self) -> &[Stack] {
        &self.stacks
    }

    /// Reads `bytes`; false (and the state unchanged) if they cannot continue a document.
    pub fn accept(&mut self, bytes: &[u8]) -> bool {
        let mut now = self.stacks.clone();
        let mut next = Vec::new();
        for &b in bytes {
            next.clear();
            step_all(&self.grammar, &now, b, &mut next);
            if next.is_empty() {
                return false;
            }
            std::mem::swap(&mut now, &mut next);
        }
        self.stacks = now;
        true
    }

    /// Whether `bytes` could be read next (the state unchanged either way).
    pub fn allows(&self, bytes: &[u8]) -> bool {
        self.clone().accept(bytes)
    }

    /// Whether the text so far is a whole document.
    pub fn is_complete(&self) -> bool {
        self.stacks.iter().any(|s| can_end(s))
    }

    /// The shortest text that finishes the document from here (empty when complete).
    pub fn completion(&self) -> Vec<u8> {
        self.stacks
            .iter()
            .map(|s| completion(&self.grammar, s))
            .min_by_key(|c| c.len())
            .unwrap_or_default()
    }
}

/// Moves every stack in `now` by byte `b`, adding the stacks it leads to to `out` (once each).
pub fn step_all(g: &Grammar, now: &[Stack], b: u8, out: &mut Vec<Stack>) {
    for stack in now {
        step(g, stack.clone(), b, out);
    }
    dedup(out);
}

fn dedup(stacks: &mut Vec<Stack>) {
    let mut i = 1;
    while i < stacks.len() {
        if stacks[..i].contains(&stacks[i]) {
            stacks.swap_remove(i);
        } else {
            i += 1;
        }
    }
}

/// How many arrays and objects `stack` is inside.
fn depth(stack: &[Frame]) -> usize {
    stack
        .iter()
        .filter(|f| matches!(f, Frame::Obj { .. } | Frame::Arr { .. }))
        .count()
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\t' | b'\r')
}

/// Whether every frame left can be finished without another byte.
fn can_end(stack: &[Frame]) -> bool {
    stack.iter().all(|f| match f {
        Frame::Space(_) => true,
        Frame::Num(n) => n.can_end(),
        _ => false,
    })
}

// ANCHOR: step
/// One stack, one byte: pushes onto `out` every stack the byte can lead to.
fn step(g: &Grammar, mut stack: Stack, b: u8, out: &mut Vec<Stack>) {
    let Some(top) = stack.pop() else { return };
    match top {
        Frame::Space(n) if is_space(b) => {
            if n < MAX_SPACE {
                stack.push(Frame::Space(n + 1));
                out.push(stack);
            }
        }
        // Whitespace is optional: any other byte belongs to the frame below.
        Frame::Space(_) => step(g, stack, b, out),
        Frame::Value(id) => begin(g, stack, id, b, out),
        Frame::Text { text, at } => {
            let bytes = text_bytes(g, text);
            if bytes[at as usize] == b {
                if at as usize + 1 < bytes.len() {
                    stack.push(Frame::Text { text, at: at + 1 });
                }
                out.push(stack);
            }
        }
        Frame::Str(s) => match s.step(b) {
            Some(Some(more)) => {
                stack.push(Frame::Str(more));
                out.push(stack);
            }
            Some(None) => out.push(stack), // the closing quote
            None => {}
        },
        Frame::Num(n) => {
            // A digit may go on with the number; anything else ends it (if it can end)
            // and belongs to the frame below. Both can be true of no byte at once, but
            // the code need not know that.
            if let Some(more) = n.step(b) {
                let mut longer = stack.clone();
                longer.push(Frame::Num(more));
                out.push(longer);
            }
            if n.can_end() {
                step(g, stack, b, out);
            }
        }
        Frame::Obj { node, next, at } => object(g, stack, node, next, at, b, out),
        Frame::Arr { node, count, at } => array(g, stack, node, count, at, b, out),
    }
}
// ANCHOR_END: step

// ANCHOR: begin
/// The first byte of a value of node `id`. `Any` begins whatever its first byte says.
fn begin(g: &Grammar, mut stack: Stack, id: NodeId, b: u8, out: &mut Vec<Stack>) {
    let node = g.node(id);
    let nested = depth(&stack) < MAX_DEPTH;
    let frames: &[Frame] = match (node, b) {
        (Node::AnyOf(alts), _) => {
            for &alt in alts {
                begin(g, stack.clone(), alt, b, out);
            }
            return;
        }
        (Node::Any | Node::Object { .. }, b'{') if nested => &[
            Frame::Obj {
                node: id,
                next: 0,
                at: ObjAt::Open,
            },
            Frame::Space(0),
        ],
        (Node::Any | Node::Array { .. }, b'[') if nested => &[
            Frame::Arr {
                node: id,
                count: 0,
                at: ArrAt::Open,
            },
            Frame::Space(0),
        ],
        (Node::Any, b'"') => &[Frame::Str(Str::new(0, u32::MAX))],
        (Node::String { min, max }, b'"') => &[Frame::Str(Str::new(*min, *max))],
        (Node::Any | Node::Boolean, b't') => &[Frame::Text {
            text: TextRef::True,
            at: 1,
        }],
        (Node::Any | Node::Boolean, b'f') => &[Frame::Text {
            text: TextRef::False,
            at: 1,
        }],
        (Node::Any | Node::Null, b'n') => &[Frame::Text {
            text: TextRef::Null,
            at: 1,
        }],
        (Node::Any | Node::Number, _) => return number(stack, false, b, out),
        (Node::Integer, _) => return number(stack, true, b, out),
        (Node::Literal(text), _) if text.len() == 1 && text[0] == b => &[],
        (Node::Literal(text), _) if text[0] == b => &[Frame::Text {
            text: TextRef::Literal(id),
            at: 1,
        }],
        _ => return,
    };
    stack.extend_from_slice(frames);
    out.push(stack);
}
// ANCHOR_END: begin

fn number(mut stack: Stack, integer: bool, b: u8, out: &mut Vec<Stack>) {
    let part = match b {
        b'-' => NumPart::Minus,
        b'0' => NumPart::Zero,
        b'1'..=b'9' => NumPart::Int,
        _ => return,
    };
    let digits = u8::from(part == NumPart::Int);
    stack.push(Frame::Num(Num {
        part,
        digits,
        integer,
    }));
    out.push(stack);
}

/// The value node, listed properties and extra-member node of object node `node`
/// (`Any` as an object: no listed properties, any extra member).
fn object_parts(g: &Grammar, node: NodeId) -> (&[crate::grammar::Prop], Option<NodeId>) {
    match g.node(node) {
        Node::Object { props, rest } => (props, *rest),
        _ => (&[], Some(node)),
    }
}

/// Whether no required property is left from listed property `next` on.
fn none_required(props: &[crate::grammar::Prop], next: u32) -> bool {
    props[next as usize..].iter().all(|p| !p.required)
}

// ANCHOR: object
fn object(
    g: &Grammar,
    mut stack: Stack,
    node: NodeId,
    next: u32,
    at: ObjAt,
    b: u8,
    out: &mut Vec<Stack>,
) {
    let (props, rest) = object_parts(g, node);
    match (at, b) {
        (ObjAt::Open | ObjAt::Member, b'}') if none_required(props, next) => out.push(stack),
        (ObjAt::Open | ObjAt::Key, b'"') => {
            // Which key is this? Any listed one from `next` up to the first required one
            // (the optional ones before it may be skipped), or an extra one when the
            // object takes extras and nothing required is left.
            for (i, p) in props.iter().enumerate().skip(next as usize) {
                let mut s = stack.clone();
                s.push(Frame::Obj {
                    node,
                    next: i as u32 + 1,
                    at: ObjAt::Colon(Some(i as u32)),
                });
                s.push(Frame::Space(0));
                if p.key.len() > 1 {
                    s.push(Frame::Text {
                        text: TextRef::Key {
                            node,
                            prop: i as u32,
                        },
                        at: 1,
                    });
                }
                out.push(s);
                if p.required {
                    break;
                }
            }
            if rest.is_some() && none_required(props, next) {
                stack.push(Frame::Obj {
                    node,
                    next: props.len() as u32,
                    at: ObjAt::Colon(None),
                });
                stack.push(Frame::Space(0));
                stack.push(Frame::Str(Str::new(0, u32::MAX)));
                out.push(stack);
            }
        }
        (ObjAt::Colon(key), b':') => {
            let value = match key {
                Some(i) => props[i as usize].value,
                None => rest.expect("an extra key only where extras are allowed"),
            };
            stack.push(Frame::Obj {
                node,
                next,
                at: ObjAt::Member,
            });
            stack.push(Frame::Space(0));
            stack.push(Frame::Value(value));
            stack.push(Frame::Space(0));
            out.push(stack);
        }
        (ObjAt::Member, b',') if (next as usize) < props.len() || rest.is_some() => {
            stack.push(Frame::Obj {
                node,
                next,
                at: ObjAt::Key,
            });
            stack.push(Frame::Space(0));
            out.push(stack);
        }
        _ => {}
    }
}
// ANCHOR_END: object

fn array(
    g: &Grammar,
    mut stack: Stack,
    node: NodeId,
    count: u32,
    at: ArrAt,
    b: u8,
    out: &mut Vec<Stack>,
) {
    let (items, min, max) = match g.node(node) {
        Node::Array { items, min, max } => (*items, *min, *max),
        _ => (node, 0, u32::MAX), // `Any` as an array
    };
    match (at, b) {
        (ArrAt::Open, b']') if min == 0 => out.push(stack),
        (ArrAt::Member, b']') if count >= min => out.push(stack),
        (ArrAt::Member, b',') if count < max => {
            stack.push(Frame::Arr {
                node,
                count,
                at: ArrAt::Item,
            });
            stack.push(Frame::Space(0));
            out.push(stack);
        }
        (ArrAt::Open, _) if max > 0 => item(g, stack, node, items, count, b, out),
        (ArrAt::Item, _) => item(g, stack, node, items, count, b, out),
        _ => {}
    }
}

/// Byte `b` begins the array's next item.
fn item(
    g: &Grammar,
    mut stack: Stack,
    node: NodeId,
    items: NodeId,
    count: u32,
    b: u8,
    out: &mut Vec<Stack>,
) {
    stack.push(Frame::Arr {
        node,
        count: count + 1,
        at: ArrAt::Member,
    });
    stack.push(Frame::Space(0));
    begin(g, stack, items, b, out);
}

fn text_bytes(g: &Grammar, text: TextRef) -> &[u8] {
    match text {
        TextRef::Literal(id) => match g.node(id) {
            Node::Literal(bytes) => bytes,
            _ => unreachable!("a literal frame points at a literal node"),
        },
        TextRef::Key { node, prop } => &object_parts(g, node).0[prop as usize].key,
        TextRef::True => b"true",
        TextRef::False => b"false",
        TextRef::Null => b"null",
    }
}

/// A multi-byte character with `left` bytes to go, the next one in `lo..=hi`.
const fn utf8(left: u8, lo: u8, hi: u8) -> Pending {
    Pending::Utf8 { left, lo, hi }
}

impl Str {
    pub fn new(min: u32, max: u32) -> Str {
        Str {
            chars: 0,
            min,
            max,
            pending: Pending::None,
        }
    }

    // ANCHOR: string
    /// The string after byte `b`: `Some(Some(s))` still inside, `Some(None)` closed by
    /// this quote, `None` not allowed.
    pub fn step(self, b: u8) -> Option<Option<Str>> {
        let mut s = self;
        match s.pending {
            Pending::None => match b {
                b'"' => return (s.chars >= s.min).then_some(None),
                0x00..=0x1f => return None, // control characters must be escaped
                _ if s.chars >= s.max => return None,
                b'\\' => s.pending = Pending::Escape,
                0x20..=0x7f => {}
                // A UTF-8 lead byte, with the range its next byte must fall in (no
                // overlong forms, no surrogates, nothing past U+10FFFF).
                0xc2..=0xdf => s.pending = utf8(1, 0x80, 0xbf),
                0xe0 => s.pending = utf8(2, 0xa0, 0xbf),
                0xed => s.pending = utf8(2, 0x80, 0x9f),
                0xe1..=0xef => s.pending = utf8(2, 0x80, 0xbf),
                0xf0 => s.pending = utf8(3, 0x90, 0xbf),
                0xf4 => s.pending = utf8(3, 0x80, 0x8f),
                0xf1..=0xf3 => s.pending = utf8(3, 0x80, 0xbf),
                _ => return None,
            },
            Pending::Escape => match b {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => s.pending = Pending::None,
                b'u' => s.pending = Pending::Hex(4),
                _ => return None,
            },
            Pending::Hex(left) => {
                if !b.is_ascii_hexdigit() {
                    return None;
                }
                s.pending = if left > 1 {
                    Pending::Hex(left - 1)
                } else {
                    Pending::None
                };
                return Some(Some(s));
            }
            Pending::Utf8 { left, lo, hi } => {
                if !(lo..=hi).contains(&b) {
                    return None;
                }
                s.pending = if left > 1 {
                    Pending::Utf8 {
                        left: left - 1,
                        lo: 0x80,
                        hi: 0xbf,
                    }
                } else {
                    Pending::None
                };
                return Some(Some(s));
            }
        }
        if matches!(self.pending, Pending::None) {
            s.chars += 1; // a character begins with this byte
        }
        Some(Some(s))
    }
    // ANCHOR_END: string

    /// Whether the string is between characters with no upper bound: then any token
    /// without a quote, a backslash, a control byte or a broken character continues it.
    pub fn is_free(&self) -> bool {
        self.pending == Pending::None && self.max == u32::MAX
    }
}

impl Num {
    pub fn can_end(&self) -> bool {
        matches!(
            self.part,
            NumPart::Zero | NumPart::Int | NumPart::Frac | NumPart::Exp
        )
    }

    /// The number after byte `b`, or `None` if `b` cannot continue it.
    pub fn step(self, b: u8) -> Option<Num> {
        use NumPart::*;
        let digit = b.is_ascii_digit();
        let (part, digits) = match (self.part, b) {
            (Minus, b'0') => (Zero, 0),
            (Minus, _) if digit => (Int, 1),
            (Int | Frac | Exp, _) if digit && self.digits < MAX_DIGITS => {
                (self.part, self.digits + 1)
            }
            (Zero | Int, b'.') if !self.integer => (Dot, 0),
            (Dot, _) if digit => (Frac, 1),
            (Zero | Int | Frac, b'e' | b'E') if !self.integer => (E, 0),
            (E, b'+' | b'-') => (ESign, 0),
            (E | ESign, _) if digit => (Exp, 1),
            _ => return None,
        };
        Some(Num {
            part,
            digits,
            integer: self.integer,
        })
    }
}

// ANCHOR: completion
// ANCHOR: completion_stack
/// The shortest text that finishes `stack`: each frame's own ending, innermost first.
fn completion(g: &Grammar, stack: &[Frame]) -> Vec<u8> {
    let mut out = Vec::new();
    for frame in stack.iter().rev() {
        match *frame {
            Frame::Space(_) => {}
            Frame::Value(id) => out.extend_from_slice(g.shortest(id)),
            Frame::Text { text, at } => out.extend_from_slice(&text_bytes(g, text)[at as usize..]),
            Frame::Str(s) => {
                match s.pending {
                    Pending::None => {}
                    Pending::Escape => out.push(b'n'),
                    Pending::Hex(left) => out.extend(std::iter::repeat_n(b'0', left as usize)),
                    Pending::Utf8 { left, lo, .. } => {
                        out.push(lo);
                        out.extend(std::iter::repeat_n(0x80, left as usize - 1));
                    }
                }
                out.extend(std::iter::repeat_n(
                    b'a',
                    s.min.saturating_sub(s.chars) as usize,
                ));
                out.push(b'"');
            }
            Frame::Num(n) => {
                if !n.can_end() {
                    out.push(b'0');
                }
            }
            Frame::Obj { node, next, at } => object_completion(g, node, next, at, &mut out),
            Frame::Arr { node, count, at } => {
                let (items, min) = match g.node(node) {
                    Node::Array { items, min, .. } => (*items, *min),
                    _ => (node, 0),
                };
                // After `,` (or after `[` when items are required) an item must come
                // first; then enough more for `min`.
                let mut have = count;
                if at == ArrAt::Item || (at == ArrAt::Open && min > 0) {
                    out.extend_from_slice(g.shortest(items));
                    have += 1;
                }
                for _ in have..min {
                    out.push(b',');
                    out.extend_from_slice(g.shortest(items));
                }
                out.push(b']');
            }
        }
    }
    out
}

// ANCHOR_END: completion_stack

fn object_completion(g: &Grammar, node: NodeId, next: u32, at: ObjAt, out: &mut Vec<u8>) {
    let (props, rest) = object_parts(g, node);
    let member = |out: &mut Vec<u8>, key: &[u8], value: NodeId| {
        out.extend_from_slice(key);
        out.push(b':');
        out.extend_from_slice(g.shortest(value));
    };
    let mut from = next as usize;
    let mut need_comma = at != ObjAt::Open;
    match at {
        ObjAt::Colon(key) => {
            out.push(b':');
            let value = key.map_or_else(
                || rest.expect("extras allowed"),
                |i| props[i as usize].value,
            );
            out.extend_from_slice(g.shortest(value));
        }
        ObjAt::Member | ObjAt::Open => {}
        ObjAt::Key => {
            // A key must come: the first required one if any is left, else the listed
            // or extra member with the shortest value.
            if let Some(i) = props[from..].iter().position(|p| p.required) {
                let p = &props[from + i];
                member(out, &p.key, p.value);
                from += i + 1;
            } else {
                let listed = props[from..].iter().map(|p| (p.key.as_slice(), p.value));
                let extra = rest.map(|r| (&b"\"\""[..], r));
                let (key, value) = listed
                    .chain(extra)
                    .min_by_key(|(k, v)| k.len() + g.shortest(*v).len())
                    .expect("a comma is allowed only when a member can follow");
                member(out, key, value);
                from = props.len();
            }
        }
    }
    for p in props[from..].iter().filter(|p| p.required) {
        if need_comma {
            out.push(b',');
        }
        member(out, &p.key, p.value);
        need_comma = true;
    }
    out.push(b'}');
}
// ANCHOR_END: completion

#[cfg(test)]
mod tests {
    use super::*;

    fn accepts(g: &Grammar, text: &str) -> bool {
        let mut m = Matcher::new(g);
        m.accept(text.as_bytes()) && m.is_complete()
    }

    #[test]
    fn any_value_takes_json_and_refuses_the_rest() {
        let g = Grammar::any_value();
        for ok in [
            "null",
            "true",
            "false",
            "0",
            "-0.5e+3",
            "12",
            r#""a\u00e9\n""#,
            "[]",
            "{}",
            r#"{"a": [1, {"b": null}], "c": "x"}"#,
            "  [ 1 ,2 ]",
            "\"é\"",
        ] {
            assert!(accepts(&g, ok), "{ok:?} should be accepted");
        }
        for bad in [
            "nul",
            "01",
            "-",
            "1.",
            "[1,]",
            "{,}",
            r#"{"a" 1}"#,
            "\"\u{1}\"",
            "[1] 2",
            "tru e",
        ] {
            assert!(!accepts(&g, bad), "{bad:?} should be refused");
        }
    }

    #[test]
    fn invalid_utf8_inside_a_string_is_refused() {
        let g = Grammar::any_value();
        let mut m = Matcher::new(&g);
        assert!(m.accept(b"\""));
        assert!(!m.allows(&[0xed, 0xa0, 0x80])); // a surrogate
        assert!(!m.allows(&[0xc0, 0x80])); // overlong
        assert!(m.allows("€".as_bytes()));
    }

    #[test]
    fn completion_finishes_every_prefix() {
        let g = Grammar::any_object();
        let doc = r#"{"a": [1.5e3, {"b": "x\u00e9"}, true], "c": -0}"#;
        for cut in 0..doc.len() {
            let mut m = Matcher::new(&g);
            assert!(m.accept(&doc.as_bytes()[..cut]));
            let c = m.completion();
            assert!(
                m.accept(&c),
                "{:?} + {:?}",
                &doc[..cut],
                String::from_utf8_lossy(&c)
            );
            assert!(
                m.is_complete(),
                "{:?} + {:?} is not complete",
                &doc[..cut],
                String::from_utf8_lossy(&c)
            );
        }
    }

    #[test]
    fn nesting_is_bounded() {
        let g = Grammar::any_value();
        let mut m = Matcher::new(&g);
        assert!(m.accept("[".repeat(MAX_DEPTH).as_bytes()));
        assert!(!m.allows(b"["));
    }
}
