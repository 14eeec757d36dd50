//! The binary on a small tokenizer.json made on the spot: round trips, and clear errors with
//! exit code 1 (2 for bad flags) on bad input. No model needed.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use ch02_tokenizer::PreTokenizer;
use ch02_tokenizer::train::train;
use serde_json::json;

const CORPUS: &str = include_str!("../data/corpus.txt");

/// A directory of its own for each test (tests run in parallel).
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ch02-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A byte-level BPE tokenizer.json trained on the chapter's corpus, plus one special token.
fn small_tokenizer_json(dir: &Path) -> PathBuf {
    let trained = train(CORPUS, 200, PreTokenizer::DigitsThenGpt2).unwrap();
    let vocab: serde_json::Map<String, serde_json::Value> = trained
        .tokenizer
        .vocab()
        .iter()
        .map(|(id, text, _)| (text.to_string(), json!(id)))
        .collect();
    let n = vocab.len();
    let mut vocab = vocab;
    vocab.insert("<|im_start|>".into(), json!(n));
    let merges: Vec<String> = trained
        .merges
        .iter()
        .map(|(l, r, _)| format!("{l} {r}"))
        .collect();
    let file = json!({
        "added_tokens": [{"id": n, "content": "<|im_start|>", "special": true}],
        "normalizer": null,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": true},
            {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}]},
        "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "vocab": vocab, "merges": merges}
    });
    let path = dir.join("tokenizer.json");
    std::fs::write(&path, file.to_string()).unwrap();
    path
}

fn run(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ch02-tokenizer"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The binary may exit (on a bad tokenizer file) before reading stdin: ignore a broken pipe.
    let _ = child.stdin.take().unwrap().write_all(stdin);
    child.wait_with_output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn encode_then_decode_gives_the_text_back() {
    let dir = temp_dir("roundtrip");
    let tok = small_tokenizer_json(&dir);
    let tok = tok.to_str().unwrap();
    let text = "Tokenizers merge bytes: 42 of them, twice! <|im_start|>é🦀\n";
    let enc = run(&["encode", "--tokenizer", tok], text.as_bytes());
    assert!(enc.status.success(), "encode failed: {}", stderr(&enc));
    let ids: Vec<u32> = serde_json::from_slice(&enc.stdout).expect("encode prints a JSON array");
    assert!(
        ids.len() < text.len(),
        "the trained merges should shorten the text"
    );
    let dec = run(&["decode", "--tokenizer", tok], &enc.stdout);
    assert!(dec.status.success(), "decode failed: {}", stderr(&dec));
    assert_eq!(String::from_utf8(dec.stdout).unwrap(), text);

    let special = run(
        &["encode", "--tokenizer", tok, "--special"],
        b"<|im_start|>",
    );
    let ids: Vec<u32> = serde_json::from_slice(&special.stdout).unwrap();
    assert_eq!(ids.len(), 1, "--special turns <|im_start|> into one token");
}

#[test]
fn invalid_utf8_on_stdin_is_an_error() {
    let dir = temp_dir("utf8");
    let tok = small_tokenizer_json(&dir);
    let out = run(
        &["encode", "--tokenizer", tok.to_str().unwrap()],
        b"ok \xFF\xFE bad",
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("not valid UTF-8 (bad byte at offset 3)"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn ids_out_of_range_and_garbage_are_errors() {
    let dir = temp_dir("ids");
    let tok = small_tokenizer_json(&dir);
    let tok = tok.to_str().unwrap();
    let out = run(&["decode", "--tokenizer", tok], b"[1, 2, 99999]");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("token id 99999 is out of range"),
        "{}",
        stderr(&out)
    );
    for garbage in [&b"[1, -2]"[..], b"hello", b"[1.5]", b""] {
        let out = run(&["decode", "--tokenizer", tok], garbage);
        assert_eq!(
            out.status.code(),
            Some(1),
            "input {:?}",
            String::from_utf8_lossy(garbage)
        );
        assert!(
            stderr(&out).contains("expected a JSON array of token ids"),
            "{}",
            stderr(&out)
        );
    }
}

const BYTE_LEVEL: &str = r#""pre_tokenizer": {"type": "ByteLevel"}"#;

#[test]
fn bad_tokenizer_files_are_errors() {
    let dir = temp_dir("badfile");
    let good = std::fs::read_to_string(small_tokenizer_json(&dir)).unwrap();
    let cases = [
        (
            "truncated.json",
            good[..good.len() / 2].to_string(),
            "is not a valid tokenizer.json",
        ),
        ("empty.json", String::new(), "is not a valid tokenizer.json"),
        (
            "wordpiece.json",
            r#"{"model": {"type": "WordPiece", "vocab": {}}}"#.into(),
            "model type \"WordPiece\"",
        ),
        (
            "pre.json",
            good.replace(
                r#""individual_digits":true"#,
                r#""individual_digits":false"#,
            ),
            "unsupported tokenizer: pre_tokenizer",
        ),
        (
            "gap.json",
            format!(r#"{{{BYTE_LEVEL}, "model": {{"type": "BPE", "vocab": {{"a": 0, "b": 5}}}}}}"#),
            "ids have gaps",
        ),
        (
            "huge.json",
            format!(
                r#"{{{BYTE_LEVEL}, "model": {{"type": "BPE", "vocab": {{"a": 4000000000}}}}}}"#
            ),
            "ids have gaps",
        ),
        (
            "merge.json",
            format!(
                r#"{{{BYTE_LEVEL}, "model": {{"type": "BPE", "vocab": {{"a": 0}}, "merges": ["a b"]}}}}"#
            ),
            "merge 0 uses \"b\"",
        ),
    ];
    for (name, text, expected) in cases {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        let out = run(&["encode", "--tokenizer", path.to_str().unwrap()], b"hi");
        assert_eq!(out.status.code(), Some(1), "{name}");
        assert!(stderr(&out).contains(expected), "{name}: {}", stderr(&out));
    }
    let out = run(
        &[
            "encode",
            "--tokenizer",
            dir.join("missing.json").to_str().unwrap(),
        ],
        b"hi",
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("cannot read"), "{}", stderr(&out));
}

#[test]
fn bad_flags_are_usage_errors() {
    for args in [
        &["--nope"][..],
        &["frobnicate"],
        &["train"],
        &["train", "--merges", "x", "f"],
    ] {
        let out = run(args, b"");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("usage:"), "{args:?}");
    }
}

#[test]
fn train_shows_its_merges() {
    let dir = temp_dir("train");
    let corpus = dir.join("corpus.txt");
    std::fs::write(&corpus, CORPUS).unwrap();
    let out = run(
        &["train", "--merges", "5", "--json", corpus.to_str().unwrap()],
        b"",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["merges"].as_array().unwrap().len(), 5);
}
