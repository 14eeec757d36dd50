//! Our mask against an independent one: llguidance (the Rust library llama.cpp can use for
//! grammars) given the same schema and SmolLM2's vocabulary must allow exactly the tokens
//! ours allows, at every step of a few greedy generations. llguidance is a test oracle only:
//! nothing in the chapter's code uses it. Built only with `--features oracle` (it is a large
//! dependency, and its `serde_json` feature would change every crate's build), so
//! `cargo test --release -p ch12-structured --features oracle --test oracle`.
//!
//! One setting is ours on purpose and is given to llguidance to match: we allow at most
//! [`MAX_SPACE`] whitespace bytes in a row (llguidance's default allows any number), so a
//! small model cannot spend its budget on newlines. Two differences are kept, both where
//! JSON's grammar allows what llguidance leaves out (see `deliberate`); the test counts
//! them and fails on any other. Our bound of `matcher::MAX_DIGITS` digits in each part of a number
//! is another deliberate choice, which these generations do not reach.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use ch01_tensors::models;
use ch02_tokenizer::TokenId;
use ch10_batching::Request;
use ch12_structured::answer;
use ch12_structured::constrain::Constraint;
use ch12_structured::mask::{TokenIndex, TokenSet};
use ch12_structured::matcher::{MAX_SPACE, Matcher};
use ch12_structured::schema::{Limits, compile_text};
use llguidance::api::TopLevelGrammar;
use llguidance::{Matcher as LlgMatcher, ParserFactory};
use toktrie::{ApproximateTokEnv, TokEnv, TokRxInfo, TokTrie};

/// Greedy steps in each generation at most (its `max_tokens`: more than the shortest
/// document of each schema below).
const STEPS: usize = 64;

fn smollm2() -> &'static ch08_gguf::Loaded {
    static M: OnceLock<ch08_gguf::Loaded> = OnceLock::new();
    M.get_or_init(|| {
        let p = models::require(&models::smollm2_gguf()).unwrap_or_else(|e| panic!("{e}"));
        ch08_gguf::load(&p).unwrap_or_else(|e| panic!("{e}"))
    })
}

/// Our index and llguidance's factory over the same vocabulary: a text token is its bytes
/// in both; a control token is empty for us and, for llguidance, `0xFF` then a name (its
/// convention for tokens no grammar text can match).
fn both() -> &'static (Arc<TokenIndex>, ParserFactory) {
    static B: OnceLock<(Arc<TokenIndex>, ParserFactory)> = OnceLock::new();
    B.get_or_init(|| {
        let m = smollm2();
        let ends = m.tokenizer.end_ids.clone();
        let ours = Arc::new(TokenIndex::from_tokenizer(
            &m.tokenizer.tokenizer,
            ends.clone(),
        ));
        let words: Vec<Vec<u8>> = (0..ours.vocab_size() as TokenId)
            .map(|id| match ours.piece(id) {
                [] => [&[0xFF][..], format!("<control {id}>").as_bytes()].concat(),
                piece => piece.to_vec(),
            })
            .collect();
        let info = TokRxInfo::new(ours.vocab_size() as u32, ends[0]);
        let trie = TokTrie::from(&info, &words);
        let env: TokEnv = Arc::new(ApproximateTokEnv::new(trie));
        let mut factory = ParserFactory::new_simple(&env).expect("llguidance's factory");
        factory.quiet();
        (ours, factory)
    })
}

fn prompt(question: &str) -> Vec<u32> {
    let text = format!("<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n");
    smollm2().tokenizer.encode_prompt(&text, true)
}

/// The ids of a greedy generation of `STEPS` tokens under `schema`, by our constraint.
fn generate(schema: &str, question: &str) -> Vec<u32> {
    let (index, _) = both();
    let grammar = compile_text(schema, Limits::default()).unwrap_or_else(|e| panic!("{e}"));
    let steer = Constraint::new(&grammar, index.clone(), Some(STEPS)).unwrap();
    let m = smollm2();
    let a = answer::run(
        m.engine().unwrap(),
        &m.tokenizer.tokenizer,
        Request::greedy(prompt(question), STEPS),
        Some(steer),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    a.ids
}

/// Replays `ids` under both grammars; at every step the two masks must be equal.
/// Returns how many steps were compared, and the differences each deliberate choice explains.
fn compare(schema: &str, ids: &[u32]) -> (usize, BTreeMap<&'static str, usize>) {
    let (index, factory) = both();
    let ends = index.ends();
    let grammar = compile_text(schema, Limits::default()).unwrap();
    let mut ours = Matcher::new(&grammar);
    let mut with_space: serde_json::Value = serde_json::from_str(schema).unwrap();
    with_space["x-guidance"] = serde_json::json!({
        "whitespace_pattern": format!("[\\x20\\x0A\\x0D\\x09]{{1,{MAX_SPACE}}}")
    });
    let mut theirs =
        LlgMatcher::new(factory.create_parser(TopLevelGrammar::from_json_schema(with_space)));
    assert!(!theirs.is_error(), "llguidance: {:?}", theirs.get_error());
    let mut set = TokenSet::empty(index.vocab_size());
    let mut text = Vec::new();
    // Where we are: before the value, in it, or after it (llguidance has stopped).
    let mut at = At::Before;
    // How many (step, token) differences each deliberate choice explains.
    let mut kept: BTreeMap<&str, usize> = BTreeMap::new();
    for (step, &id) in ids.iter().enumerate() {
        index.mask(&ours, &mut set);
        // Once the value is whole llguidance stops, allowing only the end token.
        let their_set = (at != At::After).then(|| {
            theirs
                .compute_mask()
                .unwrap_or_else(|e| panic!("llguidance's mask at step {step}: {e}"))
        });
        let theirs_allow =
            |t: TokenId| their_set.as_ref().map_or(t == ends[0], |s| s.is_allowed(t));
        let mut differ = Vec::new();
        for id in (0..index.vocab_size() as TokenId).filter(|id| !ends.contains(id)) {
            let mine = set.contains(id);
            if mine == theirs_allow(id) {
                continue;
            }
            match deliberate(at, index.piece(id), mine) {
                Some(why) => *kept.entry(why).or_default() += 1,
                None => differ.push(format!(
                    "token {id} {:?} only in {}",
                    String::from_utf8_lossy(index.piece(id)),
                    if mine { "ours" } else { "llguidance's" }
                )),
            }
        }
        differ.truncate(8);
        assert!(
            differ.is_empty(),
            "after {:?} (step {step}) the masks differ ({} ours):\n  {}",
            String::from_utf8_lossy(&text),
            set.count(),
            differ.join("\n  ")
        );
        assert_eq!(
            set.contains(ends[0]),
            theirs_allow(ends[0]),
            "after {:?} (step {step}) one side would end the document and the other not",
            String::from_utf8_lossy(&text)
        );
        if ends.contains(&id) {
            return (step + 1, kept);
        }
        let piece = index.piece(id);
        assert!(ours.accept(piece), "our own token {id}");
        text.extend_from_slice(piece);
        if at == At::Before && piece.iter().all(is_space) {
            continue; // whitespace before the value: ours only
        }
        assert!(at != At::After, "token {id} after the whole value");
        at = At::In;
        theirs
            .consume_token(id)
            .unwrap_or_else(|e| panic!("llguidance refused token {id} at step {step}: {e}"));
        if theirs.is_stopped() {
            assert!(
                ours.is_complete(),
                "llguidance stopped after {:?}, which is not a whole document to us",
                String::from_utf8_lossy(&text)
            );
            at = At::After;
        }
    }
    (ids.len(), kept)
}

/// Where a replay stands in the document.
#[derive(Clone, Copy, Debug, PartialEq)]
enum At {
    Before,
    In,
    After,
}

fn is_space(b: &u8) -> bool {
    b" \t\n\r".contains(b)
}

/// The differences we keep on purpose, both on the side of JSON's own grammar (RFC 8259:
/// `JSON-text = ws value ws`, and only 0x00–0x1f must be escaped in a string); `ours`: whether the token is in our mask (and so not in
/// llguidance's).
/// - Whitespace before the value: JSON allows it, and so do we (up to [`MAX_SPACE`] bytes);
///   llguidance's JSON starts at the value. (After the value, both end the document.)
/// - DEL (0x7f) in a string: JSON allows it unescaped (only 0x00–0x1f must be escaped);
///   llguidance leaves it out.
fn deliberate(at: At, piece: &[u8], ours: bool) -> Option<&'static str> {
    let first_space = piece.first().is_some_and(is_space);
    if ours && at == At::Before && first_space {
        return Some("whitespace before the value");
    }
    if ours && piece.contains(&0x7f) {
        return Some("DEL in a string");
    }
    None
}

/// Schemas from the chapter's tests and clients.
const SCHEMAS: [(&str, &str); 5] = [
    (
        r#"{"type": "object", "properties": {"name": {"type": "string"},
            "age": {"type": "integer"}, "languages": {"type": "array", "items": {"type": "string"}}},
            "required": ["name", "age", "languages"], "additionalProperties": false}"#,
        "Describe Ada Lovelace as JSON with her name, age and languages.",
    ),
    (
        r#"{"type":"object","properties":{"colours":{"type":"array","items":{"type":"string"},
            "minItems":1,"maxItems":3}},"required":["colours"],"additionalProperties":false}"#,
        "Name three colours.",
    ),
    (
        r#"{"type":"object","properties":{"city":{"type":"string"},
            "unit":{"enum":["celsius","fahrenheit"]},"days":{"type":"integer"},
            "note":{"anyOf":[{"type":"string","maxLength":8},{"type":"null"}]}},
            "required":["city","unit","days","note"],"additionalProperties":false}"#,
        "What is the weather in Paris in celsius for the next 3 days?",
    ),
    (
        r##"{"$ref": "#/$defs/Node", "$defs": {"Node": {"type": "object", "properties": {
            "name": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
            "required": ["name", "children"], "additionalProperties": false}}}"##,
        "A family tree as JSON.",
    ),
    (
        r#"{"type":"object","properties":{"x":{"type":"number"},"ok":{"type":"boolean"},
            "tag":{"const":"v1"},"list":{"type":"array","items":{"type":"number"},"maxItems":4}},
            "required":["x","ok","tag","list"],"additionalProperties":false}"#,
        "Give a point with x = 2.5e3, ok true and the list 1, -0.5, 3.",
    ),
];

#[test]
fn our_mask_equals_llguidances_at_every_step() {
    for (schema, question) in SCHEMAS {
        let ids = generate(schema, question);
        let (steps, kept) = compare(schema, &ids);
        let text: Vec<u8> = ids
            .iter()
            .flat_map(|&id| both().0.piece(id).to_vec())
            .collect();
        println!(
            "{steps:2} steps equal: {}\n   differences kept on purpose: {kept:?}",
            String::from_utf8_lossy(&text).replace('\n', "\\n")
        );
        assert!(
            steps >= 8,
            "too short a generation to compare: {steps} steps"
        );
    }
}
