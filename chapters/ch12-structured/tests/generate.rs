//! The grammar steering the real SmolLM2 through chapter 10's engine: every answer is a
//! document of its schema, whole when the model ends it and whole when `max_tokens` does.

use std::sync::{Arc, OnceLock};

use ch01_tensors::models;
use ch10_batching::Request;
use ch12_structured::answer;
use ch12_structured::constrain::Constraint;
use ch12_structured::mask::TokenIndex;
use ch12_structured::schema::{Limits, compile_text};

fn smollm2() -> &'static ch08_gguf::Loaded {
    static M: OnceLock<ch08_gguf::Loaded> = OnceLock::new();
    M.get_or_init(|| {
        let p = models::require(&models::smollm2_gguf()).unwrap_or_else(|e| panic!("{e}"));
        ch08_gguf::load(&p).unwrap()
    })
}

const PERSON: &str = r#"{"type": "object", "properties": {"name": {"type": "string"},
    "age": {"type": "integer"}, "languages": {"type": "array", "items": {"type": "string"}}},
    "required": ["name", "age", "languages"], "additionalProperties": false}"#;

fn prompt(m: &ch08_gguf::Loaded) -> Vec<u32> {
    let text = "<|im_start|>user\nDescribe Ada Lovelace as JSON with her name, age and languages.<|im_end|>\n<|im_start|>assistant\n";
    m.tokenizer.encode_prompt(text, true)
}

#[test]
fn a_budget_below_the_shortest_document_is_refused() {
    let m = smollm2();
    let index = Arc::new(TokenIndex::from_tokenizer(&m.tokenizer.tokenizer, vec![]));
    let grammar = compile_text(PERSON, Limits::default()).unwrap();
    let e = Constraint::new(&grammar, index, Some(33)).unwrap_err();
    assert!(e.to_string().contains("34"), "{e}");
}

/// Runs one greedy request under the schema; its text and finish reason.
fn run(max_tokens: usize) -> (String, String) {
    let m = smollm2();
    let index = Arc::new(TokenIndex::from_tokenizer(
        &m.tokenizer.tokenizer,
        m.tokenizer.end_ids.clone(),
    ));
    let grammar = compile_text(PERSON, Limits::default()).unwrap();
    let steer = Constraint::new(&grammar, index, Some(max_tokens)).unwrap();
    let request = Request::greedy(prompt(m), max_tokens);
    let a = answer::run(
        m.engine().unwrap(),
        &m.tokenizer.tokenizer,
        request,
        Some(steer),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    (a.text, a.reason)
}

#[test]
fn answers_are_documents_of_the_schema() {
    let (text, reason) = run(96);
    let v: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
    assert!(
        v["name"].is_string() && v["age"].is_i64() && v["languages"].is_array(),
        "{text}"
    );
    // SmolLM2 lists languages until the budget runs out; the rule closes the list in time.
    assert!(reason == "length" || reason == "eos", "{reason}");
}

#[test]
fn a_short_budget_still_closes_the_document() {
    // The shortest document of this schema is 34 bytes, so 34 tokens always suffice.
    for max_tokens in [34, 35, 41, 50] {
        let (text, reason) = run(max_tokens);
        let v: serde_json::Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("max_tokens {max_tokens}: {text:?}: {e}"));
        assert!(v["languages"].is_array(), "{text}");
        assert!(reason == "length" || reason == "eos", "{reason}");
    }
}
