//! Parity with llama.cpp: SmolLM2's token ids for every case in
//! fixtures/reference/tokenizer-smollm2.json, produced by llama.cpp (through
//! llama-cpp-python) from the GGUF. Needs the model; fails with the fetch command if missing.

mod common;

use ch02_tokenizer::show::visible;
use ch02_tokenizer::{MergeLoop, Tokenizer};
use serde_json::Value;

struct Case {
    text: String,
    ids: Vec<u32>,
    ids_special: Vec<u32>,
}

fn cases() -> Vec<Case> {
    let path =
        ch01_tensors::models::workspace_root().join("fixtures/reference/tokenizer-smollm2.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read {}: {e}\nthe fixture is made by scripts/make_fixtures.py",
            path.display()
        )
    });
    let json: Value = serde_json::from_str(&text).expect("the fixture is JSON");
    let ids = |v: &Value| -> Vec<u32> { serde_json::from_value(v.clone()).expect("ids are u32") };
    let cases: Vec<Case> = json["cases"]
        .as_array()
        .expect("the fixture has a cases array")
        .iter()
        .map(|c| Case {
            text: c["text"].as_str().expect("case text").to_string(),
            ids: ids(&c["ids"]),
            ids_special: ids(&c["ids_special"]),
        })
        .collect();
    assert!(
        cases.len() >= 10,
        "only {} cases in the fixture",
        cases.len()
    );
    cases
}

/// "case 3 \"...\": first difference at token 5: llama.cpp [␣world 905], ours [␣wor 1234]"
fn describe(tok: &Tokenizer, text: &str, want: &[u32], got: &[u32]) -> String {
    let at = want
        .iter()
        .zip(got)
        .position(|(a, b)| a != b)
        .unwrap_or(want.len().min(got.len()));
    let show = |ids: &[u32]| {
        ids.iter()
            .skip(at)
            .take(4)
            .map(|&id| format!("[{} {id}]", visible(tok.piece(id).unwrap_or_default())))
            .collect::<String>()
    };
    let short: String = text.chars().take(60).collect();
    format!(
        "{short:?}: {} vs {} tokens, first difference at token {at}: llama.cpp {}, ours {}",
        want.len(),
        got.len(),
        show(want),
        show(got)
    )
}

fn check(special: bool) {
    let tok = common::smollm2();
    let cases = cases();
    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let want = if special {
            &case.ids_special
        } else {
            &case.ids
        };
        let got = tok.encode(&case.text, special);
        if &got != want {
            failures.push(format!(
                "case {i} {}",
                describe(&tok, &case.text, want, &got)
            ));
        }
    }
    let mode = if special {
        "with special tokens parsed"
    } else {
        "special tokens as text"
    };
    println!(
        "{}/{} cases match llama.cpp ({mode})",
        cases.len() - failures.len(),
        cases.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} cases differ ({mode}):\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn ids_match_llama_cpp_with_special_tokens_as_text() {
    check(false);
}

#[test]
fn ids_match_llama_cpp_with_special_tokens_parsed() {
    check(true);
}

#[test]
fn every_merge_loop_gives_the_same_ids() {
    let tok = common::smollm2();
    for case in cases() {
        for special in [false, true] {
            let reference = tok.encode_using(&case.text, special, MergeLoop::Naive);
            for merge_loop in [MergeLoop::Heap, MergeLoop::Auto] {
                assert_eq!(
                    tok.encode_using(&case.text, special, merge_loop),
                    reference,
                    "{merge_loop:?} on {:?}",
                    case.text
                );
            }
        }
    }
}

#[test]
fn decoding_gives_the_text_back() {
    let tok = common::smollm2();
    for case in cases() {
        let expected = common::encodable(&tok, &case.text);
        assert_eq!(
            tok.decode(&case.ids).unwrap(),
            expected,
            "decoding llama.cpp's ids"
        );
        assert_eq!(
            tok.decode(&case.ids_special).unwrap(),
            expected,
            "decoding llama.cpp's ids (special)"
        );
        assert_eq!(
            tok.decode(&tok.encode(&case.text, true)).unwrap(),
            expected,
            "our round trip"
        );
    }
}
