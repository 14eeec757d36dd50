//! libFuzzer feeds the matcher any bytes, one at a time, under one of three grammars (the
//! first byte picks it): any JSON value, any object, and a recursive schema of the kind
//! pydantic writes. Each byte is accepted or refused without a panic; a refused byte leaves
//! the state as it was; and from every state reached, the shortest completion is read whole
//! and ends in a complete document: the rule that lets chapter 12 close every answer.

#![no_main]

use ch12_structured::grammar::Grammar;
use ch12_structured::matcher::Matcher;
use ch12_structured::schema::{Limits, compile_text};
use libfuzzer_sys::fuzz_target;

const TREE: &str = r##"{"$defs": {"node": {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 8},
    "kind": {"enum": ["leaf", "branch", 3, null]},
    "weight": {"anyOf": [{"type": "number"}, {"type": "null"}]},
    "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 3}},
    "required": ["name", "children"]}}, "$ref": "#/$defs/node"}"##;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, bytes)) = data.split_first() else {
        return;
    };
    let grammar = match pick % 3 {
        0 => Grammar::any_value(),
        1 => Grammar::any_object(),
        _ => compile_text(TREE, Limits::default()).expect("the tree schema compiles"),
    };
    let mut m = Matcher::new(&grammar);
    for (i, &b) in bytes.iter().enumerate() {
        let before = m.stacks().to_vec();
        if !m.accept(&[b]) {
            assert_eq!(m.stacks(), &before[..], "a refused byte changed the state");
            break;
        }
        if i % 16 == 15 || i + 1 == bytes.len() {
            let mut done = m.clone();
            let way_out = m.completion();
            assert!(
                done.accept(&way_out) && done.is_complete(),
                "after {:?}, the completion {:?} does not finish the document",
                String::from_utf8_lossy(&bytes[..=i]),
                String::from_utf8_lossy(&way_out)
            );
        }
    }
});
