//! Chapter 2: encode throughput of SmolLM2's tokenizer with each merge loop: naive (O(n²) per
//! piece), heap + linked list (O(n log n)), and auto (naive below 16 bytes, heap above), the
//! one `Tokenizer::encode` uses.
//!
//! `cargo bench --bench ch02_encode`
//!
//! Two inputs, both built deterministically from committed text (`ch02_tokenizer::bench_inputs`,
//! which the binary's `bench` table uses too):
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
use ch02_tokenizer::bench_inputs::{long_piece_text, mixed_text};
use ch02_tokenizer::{MergeLoop, Tokenizer, smollm2_tokenizer_path};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const CORPUS: &str = include_str!("../chapters/ch02-tokenizer/data/corpus.txt");
const FIXTURE: &str = include_str!("../fixtures/reference/tokenizer-smollm2.json");

fn encode(c: &mut Criterion) {
    let path = models::require(&smollm2_tokenizer_path()).unwrap_or_else(|msg| panic!("{msg}"));
    let tok = Tokenizer::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
    for (name, text) in [
        (
            "mixed",
            mixed_text(CORPUS, FIXTURE, 300_000).unwrap_or_else(|e| panic!("{e}")),
        ),
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
