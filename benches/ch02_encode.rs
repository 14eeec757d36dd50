//! Chapter 2: encode throughput of SmolLM2's tokenizer with each merge loop: naive (O(n²) per
//! piece), heap + linked list (O(n log n)), and auto (naive below 16 bytes, heap above), the
//! one `Tokenizer::encode` uses.
//!
//! `cargo bench --bench ch02_encode`
//!
//! Two inputs, both built deterministically from committed text:
//! - "mixed": the chapter's corpus and every text of the llama.cpp fixture, repeated to
//!   about 300 KB. Mostly short pieces (words), where the naive loop is fastest and the
//!   heap's bookkeeping does not pay for itself.
//! - "long pieces": Chinese and Japanese sentences glued together without spaces. `\p{L}+`
//!   takes a whole run of CJK letters as *one* piece, so pieces are hundreds of bytes long
//!   and the naive loop's O(n²) shows.
//!
//! Needs `models/smollm2-135m-instruct/hf/tokenizer.json` (`cargo xtask fetch-models`).

use std::hint::black_box;
use std::time::Duration;

use ch01_tensors::models;
use ch02_tokenizer::{MergeLoop, Tokenizer, smollm2_tokenizer_path};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const CORPUS: &str = include_str!("../chapters/ch02-tokenizer/data/corpus.txt");
const FIXTURE: &str = include_str!("../fixtures/reference/tokenizer-smollm2.json");

/// The corpus plus every fixture text, repeated until it is at least `bytes` long.
fn mixed_text(bytes: usize) -> String {
    let fixture: serde_json::Value = serde_json::from_str(FIXTURE).expect("fixture is JSON");
    let mut unit = CORPUS.to_string();
    for case in fixture["cases"].as_array().expect("fixture cases") {
        unit.push_str(case["text"].as_str().unwrap_or(""));
        unit.push('\n');
    }
    unit.repeat(bytes.div_ceil(unit.len()))
}

/// CJK sentences without spaces or punctuation between them: very long pieces.
fn long_piece_text(bytes: usize) -> String {
    let unit = "日本語のテキストは単語の間に空白がありません中文也没有空格这是一个测试東京は日本の首都です";
    let piece = unit.repeat(8); // about 1 KB of letters in one piece
    let mut text = String::new();
    while text.len() < bytes {
        text.push_str(&piece);
        text.push('\n');
    }
    text
}

fn encode(c: &mut Criterion) {
    let path = models::require(&smollm2_tokenizer_path()).unwrap_or_else(|msg| panic!("{msg}"));
    let tok = Tokenizer::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
    for (name, text) in [
        ("mixed", mixed_text(300_000)),
        ("long pieces", long_piece_text(64_000)),
    ] {
        let reference = tok.encode_using(&text, false, MergeLoop::Naive);
        for merge_loop in [MergeLoop::Heap, MergeLoop::Auto] {
            assert_eq!(
                tok.encode_using(&text, false, merge_loop),
                reference,
                "{merge_loop:?} disagrees"
            );
        }
        let mut group = c.benchmark_group(format!("ch02_encode/{name}"));
        group.throughput(Throughput::BytesDecimal(text.len() as u64)); // MB/s, as the book quotes
        group
            .sample_size(10)
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(4));
        for (label, merge_loop) in [
            ("naive", MergeLoop::Naive),
            ("heap", MergeLoop::Heap),
            ("auto", MergeLoop::Auto),
        ] {
            group.bench_function(label, |b| {
                b.iter(|| tok.encode_using(black_box(&text), false, merge_loop))
            });
        }
        group.finish();
    }
}

criterion_group!(benches, encode);
criterion_main!(benches);
