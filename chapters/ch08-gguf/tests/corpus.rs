//! The GGUF parser against hostile input: the corpus that `scripts/make_gguf_corpus.py` writes
//! to `fixtures/gguf-corpus/` (one valid file, one broken file per defect, and a manifest of
//! the error each must get) and every truncation of the valid file. Random damage to it is
//! `tests/damage.rs`, and what a parse allocates `tests/allocation.rs`.
//!
//! Whatever the bytes, the parser must answer `Ok` or `Err`: never panic, never hang, never
//! try to allocate what a count in the file asks for. `cargo test --release -p ch08-gguf
//! --test corpus -- --nocapture` prints each broken file with the error it got.

use std::panic::catch_unwind;

use ch08_gguf::{Array, Error, GgmlType, Gguf, GgufFile, Value};
use serde_json::Value as Json;

mod common;
use common::{corpus_dir, panic_text, read, touch_everything, valid_bytes};

fn manifest() -> Json {
    serde_json::from_slice(&read("manifest.json")).expect("manifest.json is valid JSON")
}

/// `Gguf::parse(bytes)`, with a panic turned into a message naming `what` was parsed.
fn parse_without_panic(bytes: &[u8], what: &str) -> Result<Gguf, Error> {
    catch_unwind(|| Gguf::parse(bytes))
        .unwrap_or_else(|p| panic!("the parser panicked on {what}: {}", panic_text(&*p)))
}

// ---------------------------------------------------------------- (a) the valid file

#[test]
fn the_valid_file_parses_with_every_value_and_tensor_as_written() {
    let path = corpus_dir().join("valid.gguf");
    let file = GgufFile::open(&path).unwrap_or_else(|e| panic!("valid.gguf was refused: {e}"));
    let g = &file.gguf;
    let m = &manifest()["valid"];

    assert_eq!(g.version, 3, "valid.gguf is a version 3 file");
    assert_eq!(g.alignment, 32, "general.alignment is 32");
    assert_eq!(g.file_len, m["bytes"].as_u64().unwrap(), "file length");
    assert_eq!(
        g.header_end,
        m["header_end"].as_u64().unwrap(),
        "the tensor descriptions end where the script put their end"
    );
    assert_eq!(
        g.data_offset,
        m["data_offset"].as_u64().unwrap(),
        "the data section starts at the header's end rounded up to 32"
    );

    // Metadata: one key of every value type, in file order.
    assert_eq!(g.metadata.len(), 29, "valid.gguf has 29 metadata keys");
    assert_eq!(g.metadata[0].0, "general.architecture", "the first key");
    let expect = [
        ("general.architecture", Value::String("llama".into())),
        ("general.alignment", Value::U32(32)),
        ("llama.rope.freq_base", Value::F32(10000.0)),
        ("tokenizer.ggml.add_bos_token", Value::Bool(true)),
        ("corpus.u8", Value::U8(200)),
        ("corpus.i8", Value::I8(-7)),
        ("corpus.u16", Value::U16(65535)),
        ("corpus.i16", Value::I16(-300)),
        ("corpus.i32", Value::I32(-70000)),
        ("corpus.u64", Value::U64(1 << 40)),
        ("corpus.i64", Value::I64(-(1 << 40))),
        ("corpus.f64", Value::F64(0.1)),
        (
            "corpus.u64s",
            Value::Array(Array::U64(vec![1, 1 << 40, u64::MAX])),
        ),
        (
            "corpus.bools",
            Value::Array(Array::Bool(vec![true, false, true])),
        ),
        (
            "corpus.nested",
            Value::Array(Array::Array(vec![
                Array::U16(vec![1, 2, 3]),
                Array::String(vec!["inner".into()]),
            ])),
        ),
    ];
    for (key, want) in expect {
        assert_eq!(g.get(key), Some(&want), "metadata key {key}");
    }
    let tokens = g.strings("tokenizer.ggml.tokens").unwrap();
    assert_eq!(
        tokens,
        ["<unk>", "<s>", "</s>", "\u{2581}a", "b"],
        "the vocabulary"
    );
    assert_eq!(
        g.opt_f32s("tokenizer.ggml.scores").unwrap(),
        Some(&[0.0, 0.0, 0.0, -1.0, -2.0][..]),
        "the token scores"
    );
    assert_eq!(
        g.opt_ints("tokenizer.ggml.token_type").unwrap(),
        Some(vec![2, 3, 3, 1, 1]),
        "the token types"
    );
    assert_eq!(
        g.u64("corpus.u16").unwrap(),
        65535,
        "a u16 read as an integer"
    );
    let negative = g.u64("corpus.i8").unwrap_err().to_string();
    assert!(
        negative.contains("negative"),
        "reading -7 as a u64 said: {negative}"
    );

    // Tensors: names, shapes, types and places as the script wrote them.
    let want = [
        ("norm.weight", vec![4], GgmlType::F32, 0, 16),
        ("q8.weight", vec![32, 2], GgmlType::Q8_0, 32, 68),
        ("q4_1.weight", vec![32, 1], GgmlType::Q4_1, 128, 20),
    ];
    assert_eq!(g.tensors.len(), want.len(), "valid.gguf has three tensors");
    for (t, (name, dims, ty, offset, size)) in g.tensors.iter().zip(want) {
        assert_eq!(
            (t.name.as_str(), &t.dims, t.ty, t.offset, t.size),
            (name, &dims, ty, offset, size),
            "tensor {name}: (name, dims, type, offset, bytes)"
        );
    }
    let norm = file.info("norm.weight").unwrap();
    assert_eq!(
        file.f32s(norm).unwrap(),
        [1.0, -2.0, 0.5, 3.25],
        "norm.weight's values"
    );
    // Q8_0 block 0 starts with its f16 scale 0.5 (0x3800), then the values -16, -15, ...
    let q8 = file.data(file.info("q8.weight").unwrap());
    assert_eq!(
        &q8[..4],
        &[0x00, 0x38, 0xf0, 0xf1],
        "the first bytes of q8.weight"
    );
    // Q4_1: f16 scale 0.125 (0x3000), f16 minimum -1 (0xbc00), then nibbles 0, 1 | 0 << 4, ...
    let q4 = file.data(file.info("q4_1.weight").unwrap());
    assert_eq!(
        &q4[..5],
        &[0x00, 0x30, 0x00, 0xbc, 0x00],
        "the first bytes of q4_1.weight"
    );

    // The metadata is complete enough for the model configuration and the tokenizer.
    let config = ch08_gguf::config::config(g).unwrap_or_else(|e| panic!("config: {e}"));
    assert_eq!(
        (
            config.hidden_size,
            config.num_layers,
            config.n_heads,
            config.n_kv_heads
        ),
        (8, 1, 2, 1),
        "(hidden size, layers, heads, KV heads)"
    );
    assert_eq!(
        config.vocab_size, 5,
        "the vocabulary size comes from the token list"
    );
    let tok = ch08_gguf::tokenizer(g).unwrap_or_else(|e| panic!("tokenizer: {e}"));
    assert_eq!(tok.tokenizer.vocab_size(), 5, "tokenizer vocabulary");
    assert_eq!((tok.bos, tok.add_bos), (Some(1), true), "(BOS id, add BOS)");
    touch_everything(g, file.bytes());
}

/// A BOS or EOS id the vocabulary does not have: the file parses (the id is just a number),
/// but the tokenizer refuses it and names the key, instead of never adding or never
/// stopping at that token.
#[test]
fn a_special_token_outside_the_vocabulary_is_refused() {
    let valid = valid_bytes();
    for key in ["tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"] {
        let at = valid
            .windows(key.len())
            .position(|w| w == key.as_bytes())
            .unwrap_or_else(|| panic!("valid.gguf has no {key}"));
        // the key, then its value type (u32, 4 bytes), then the id
        let id = at + key.len() + 4;
        let mut bytes = valid.clone();
        bytes[id..id + 4].copy_from_slice(&9u32.to_le_bytes());
        let g = parse_without_panic(&bytes, key).unwrap_or_else(|e| panic!("{key} = 9: {e}"));
        match ch08_gguf::tokenizer(&g) {
            Ok(_) => panic!("{key} = 9 in a vocabulary of 5 was accepted"),
            Err(e) => {
                let e = e.to_string();
                assert!(
                    e.contains(key) && e.contains("9 is outside the vocabulary of 5"),
                    "{key} = 9: the error should name the key and the id, got: {e}"
                );
            }
        }
    }
}

// ---------------------------------------------------------------- (b) one defect per file

#[test]
fn every_broken_file_gets_the_error_that_names_its_defect() {
    let manifest = manifest();
    let entries = manifest["malformed"]
        .as_array()
        .expect("a list of malformed files");
    assert!(entries.len() >= 30, "only {} broken files", entries.len());
    let mut failures = Vec::new();
    for entry in entries {
        let name = entry["file"].as_str().unwrap();
        let defect = entry["defect"].as_str().unwrap();
        let phrase = entry["error_contains"].as_str().unwrap();
        let path = corpus_dir().join(name);
        // Both ways in: from the path (which also checks the length before mapping) and
        // from the bytes.
        let opened = catch_unwind(|| GgufFile::open(&path).map(|_| ()));
        let bytes = read(name);
        let parsed = catch_unwind(|| Gguf::parse(&bytes).map(|_| ()));
        for (how, outcome) in [("GgufFile::open", opened), ("Gguf::parse", parsed)] {
            match outcome {
                Err(p) => failures.push(format!(
                    "{name} ({defect}): {how} panicked: {}",
                    panic_text(&*p)
                )),
                Ok(Ok(())) => failures.push(format!(
                    "{name} ({defect}): {how} accepted it; it should fail with an error containing {phrase:?}"
                )),
                Ok(Err(e)) if !e.to_string().contains(phrase) => failures.push(format!(
                    "{name} ({defect}): {how} failed with \"{e}\", which does not contain {phrase:?}"
                )),
                Ok(Err(e)) => {
                    if how == "GgufFile::open" {
                        println!("{name:<28} {e}");
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} broken files were not refused as they should be:\n{}",
        failures.len(),
        entries.len(),
        failures.join("\n")
    );
}

#[test]
fn the_manifest_names_every_file_in_the_corpus() {
    let manifest = manifest();
    let mut named: Vec<&str> = manifest["malformed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["file"].as_str().unwrap())
        .collect();
    named.push("valid.gguf");
    for entry in std::fs::read_dir(corpus_dir()).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".gguf") {
            assert!(
                named.contains(&name.as_str()),
                "fixtures/gguf-corpus/{name} is not in manifest.json, so no test says what it must do"
            );
        }
    }
}

#[test]
fn every_input_the_fuzzer_ever_broke_the_parser_with_now_parses_without_panic() {
    // Minimised inputs from `cargo fuzz` (see chapters/ch08-gguf/fuzz/README.md); Ok or Err
    // are both fine, a panic is not.
    let dir = corpus_dir().join("regressions");
    let entries = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_none_or(|x| x != "md"));
    for path in entries {
        let bytes = std::fs::read(&path).unwrap();
        let what = format!(
            "fixtures/gguf-corpus/regressions/{}",
            path.file_name().unwrap().display()
        );
        let outcome = catch_unwind(|| {
            if let Ok(g) = Gguf::parse(&bytes) {
                touch_everything(&g, &bytes);
            }
        });
        if let Err(p) = outcome {
            panic!(
                "{what} made the parser (or a reader of its result) panic again: {}",
                panic_text(&*p)
            );
        }
    }
}

// ---------------------------------------------------------------- (c) every truncation

#[test]
fn the_valid_file_cut_at_any_byte_before_its_last_tensor_ends_is_refused() {
    let bytes = valid_bytes();
    let g = Gguf::parse(&bytes).expect("valid.gguf parses");
    let data_end = g
        .tensors
        .iter()
        .map(|t| g.data_offset + t.offset + t.size)
        .max()
        .unwrap();
    for n in 0..=bytes.len() {
        let what = format!("valid.gguf cut to its first {n} bytes");
        match parse_without_panic(&bytes[..n], &what) {
            Ok(_) if (n as u64) < data_end => {
                panic!("{what} was accepted, but its last tensor ends at byte {data_end}")
            }
            Ok(_) => {} // only the padding after the last tensor is missing: still whole
            Err(e) if (n as u64) < g.data_offset => assert!(
                matches!(e, Error::Truncated { .. }),
                "{what} (inside the header, which ends at {}) should be a truncation, got: {e}",
                g.data_offset
            ),
            Err(e) if (n as u64) < data_end => assert!(
                matches!(&e, Error::Tensor { message, .. } if message.contains("past the end")),
                "{what} (inside the data section) should name a tensor that runs past the end, got: {e}"
            ),
            Err(e) => panic!("{what} is a whole file (its tensors end at {data_end}), but: {e}"),
        }
    }
}
