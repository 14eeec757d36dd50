//! The GGUF parser against hostile input: the corpus that `scripts/make_gguf_corpus.py` writes
//! to `fixtures/gguf-corpus/` (one valid file, one broken file per defect, and a manifest of
//! the error each must get), every truncation of the valid file, and random damage to it.
//!
//! Whatever the bytes, the parser must answer `Ok` or `Err`: never panic, never hang, never
//! try to allocate what a count in the file asks for. `cargo test --release -p ch08-gguf
//! --test corpus -- --nocapture` prints each broken file with the error it got.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use ch08_gguf::{Array, Error, GgmlType, Gguf, GgufFile, Value};
use proptest::prelude::*;
use serde_json::Value as Json;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/gguf-corpus")
}

fn read(name: &str) -> Vec<u8> {
    let path = corpus_dir().join(name);
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; regenerate the corpus with `python3 scripts/make_gguf_corpus.py`",
            path.display()
        )
    })
}

fn manifest() -> Json {
    serde_json::from_slice(&read("manifest.json")).expect("manifest.json is valid JSON")
}

fn valid_bytes() -> Vec<u8> {
    read("valid.gguf")
}

/// The text of a caught panic.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(a panic without a message)".into())
}

/// Everything a program might read from a parsed file: every metadata key through every
/// typed accessor, every tensor's description and bytes, and the model configuration and
/// tokenizer built from the metadata. Errors are fine; a panic or a tensor outside the file
/// is not.
fn touch_everything(g: &Gguf, file: &[u8]) {
    for (key, value) in &g.metadata {
        // By address, not by value: a damaged f32 may be NaN, which equals nothing.
        assert!(
            g.get(key).is_some_and(|v| std::ptr::eq(v, value)),
            "metadata key {key:?} cannot be found by name"
        );
        let _ = (value.type_name(), value.as_i128());
        if let Value::Array(a) = value {
            let _ = (a.len(), a.is_empty(), a.type_name());
        }
        let _ = g.opt_u64(key);
        let _ = g.opt_f64(key);
        let _ = g.opt_str(key);
        let _ = g.opt_bool(key);
        let _ = g.opt_array(key);
        let _ = g.strings(key);
        let _ = g.opt_ints(key);
        let _ = g.opt_f32s(key);
    }
    for t in &g.tensors {
        assert!(
            g.tensor(&t.name).is_some_and(|u| std::ptr::eq(u, t)),
            "tensor {:?} cannot be found by name",
            t.name
        );
        let _ = (
            t.elements(),
            t.ty.name(),
            t.ty.block_values(),
            t.ty.block_bytes(),
        );
        let start = g.absolute_offset(t);
        let end = start.checked_add(t.size);
        assert!(
            end.is_some_and(|end| end <= file.len() as u64),
            "the parser accepted tensor {:?} at bytes {start}..{end:?} of a {}-byte file",
            t.name,
            file.len()
        );
        let _ = &file[start as usize..end.unwrap() as usize];
    }
    let _ = ch08_gguf::config::config(g);
    let _ = ch08_gguf::tokenizer(g);
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

// ---------------------------------------------------------------- counts and memory

/// The system allocator, noting the largest single allocation each thread makes, so a test
/// can see what a parse reserves.
struct Measured;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    // `try_with`: an allocation while the thread is being torn down is not noted.
    let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
}

// SAFETY: every call is passed unchanged to the system allocator; noting a size allocates
// nothing (the thread-local is a const-initialised Cell with no destructor).
unsafe impl GlobalAlloc for Measured {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's contract is System's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Measured = Measured;

/// The largest single allocation `Gguf::parse(bytes)` makes, and its result.
fn largest_allocation(bytes: &[u8]) -> (usize, Result<Gguf, Error>) {
    LARGEST.set(0);
    let result = Gguf::parse(bytes);
    (LARGEST.get(), result)
}

#[test]
fn a_count_that_a_large_file_could_hold_reserves_no_memory_before_its_items_are_read() {
    // 64 MiB of zeros behind a header whose count is as large as the check against the
    // file's size allows: one metadata entry per 13 bytes, or one tensor per 32. The zeros
    // then read as an entry with an empty key (twice, an error), or a tensor with no
    // dimensions (an error). Only the header's few bytes should be read before that, and
    // nothing allocated in proportion to the count.
    let len: usize = 64 << 20;
    for (what, count_at, count) in [
        ("metadata entries", 16, (len as u64 - 24) / 13),
        ("tensors", 8, (len as u64 - 24) / 32),
    ] {
        let mut bytes = vec![0u8; len];
        bytes[..8].copy_from_slice(b"GGUF\x03\0\0\0");
        bytes[count_at..count_at + 8].copy_from_slice(&count.to_le_bytes());
        let (largest, result) = largest_allocation(&bytes);
        assert!(
            result.is_err(),
            "a 64 MiB file of zeros claiming {count} {what} was accepted"
        );
        assert!(
            largest <= 1 << 20,
            "a header claiming {count} {what} (in a 64 MiB file) made the parser allocate {largest} bytes \
             at once, before reading more than the first of them"
        );
    }
}

// ---------------------------------------------------------------- (d) random damage

/// One change to the valid file.
#[derive(Clone, Debug)]
enum Damage {
    /// XOR one byte with a mask.
    Flip { at: prop::sample::Index, mask: u8 },
    /// Write a little-endian u64 (a count, a length, a dimension, an offset).
    U64 { at: prop::sample::Index, value: u64 },
    /// Write a little-endian u32 (a version, a value type, n_dims, a ggml type).
    U32 { at: prop::sample::Index, value: u32 },
}

fn damage() -> impl Strategy<Value = Damage> {
    let big = prop_oneof![
        Just(0u64),
        Just(1),
        Just(u64::MAX),
        Just(1 << 62),
        Just(1 << 32),
        Just(i64::MAX as u64 + 1),
        0..4096u64,
        any::<u64>(),
    ];
    prop_oneof![
        (any::<prop::sample::Index>(), 1..=255u8).prop_map(|(at, mask)| Damage::Flip { at, mask }),
        (any::<prop::sample::Index>(), big).prop_map(|(at, value)| Damage::U64 { at, value }),
        (
            any::<prop::sample::Index>(),
            prop_oneof![0..16u32, 0..64u32, any::<u32>()]
        )
            .prop_map(|(at, value)| Damage::U32 { at, value }),
    ]
}

fn apply(bytes: &mut [u8], d: &Damage) {
    let mut put = |at: &prop::sample::Index, le: &[u8]| {
        let start = at.index(bytes.len() - le.len() + 1);
        bytes[start..start + le.len()].copy_from_slice(le);
    };
    match d {
        Damage::Flip { at, mask } => {
            let i = at.index(bytes.len());
            bytes[i] ^= mask;
        }
        Damage::U64 { at, value } => put(at, &value.to_le_bytes()),
        Damage::U32 { at, value } => put(at, &value.to_le_bytes()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn damaging_the_valid_file_never_panics(damages in prop::collection::vec(damage(), 1..6)) {
        let mut bytes = valid_bytes();
        for d in &damages {
            apply(&mut bytes, d);
        }
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            if let Ok(g) = Gguf::parse(&bytes) {
                touch_everything(&g, &bytes);
            }
        }));
        if let Err(p) = outcome {
            prop_assert!(
                false,
                "valid.gguf with {damages:?} made the parser (or a reader of its result) panic: {}",
                panic_text(&*p)
            );
        }
    }
}
