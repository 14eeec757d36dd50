//! `ch02-tokenizer bench --markdown FILE`: encode speed with each merge loop, the table the
//! book shows (`cargo xtask perf ch02` runs it; the page includes the file it writes).
//!
//! The same two inputs as the criterion bench `benches/ch02_encode.rs`, from
//! [`ch02_tokenizer::bench_inputs`]: "mixed", about 300 KB of mostly short pieces, and
//! "long pieces", about 64 KB of CJK text whose pieces are about 1 KB each.
//!
//! Each loop's ids are checked against the naive loop's before anything is timed.

use ch01_tensors::files::{MAX_TEXT_FILE, read_to_string};
use ch01_tensors::models::workspace_root;
use ch01_tensors::stopwatch::best_of;
use ch02_tokenizer::bench_inputs::{long_piece_text, mixed_text};
use ch02_tokenizer::{MergeLoop, Tokenizer};

/// Each timing: at least this many runs, and at least this long in all.
const MIN_RUNS: usize = 3;
const MIN_SECONDS: f64 = 1.0;

const LOOPS: [(&str, MergeLoop); 3] = [
    ("naive", MergeLoop::Naive),
    ("heap", MergeLoop::Heap),
    ("auto", MergeLoop::Auto),
];

fn read(relative: &str) -> Result<String, String> {
    let path = workspace_root().join(relative);
    read_to_string(&path, MAX_TEXT_FILE).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// Measures both inputs with every merge loop; returns the Markdown table.
pub fn markdown(tok: &Tokenizer) -> Result<String, String> {
    let inputs = [
        (
            "mixed: the corpus and the fixture texts",
            mixed_text(
                &read("chapters/ch02-tokenizer/data/corpus.txt")?,
                &read("fixtures/reference/tokenizer-smollm2.json")?,
                300_000,
            )?,
        ),
        (
            "long pieces: CJK text without spaces",
            long_piece_text(64_000),
        ),
    ];
    let mut s = format!(
        "MB/s of input text (10⁶ bytes a second), one thread, each the best of at least \
         {MIN_RUNS} runs and {MIN_SECONDS} s (`cargo run --release -p ch02-tokenizer -- bench \
         --markdown FILE`):\n\n\
         | input | naive | heap | auto (`encode`) | auto / naive |\n\
         |-------|------:|-----:|----------------:|------:|\n"
    );
    for (label, text) in &inputs {
        let reference = tok.encode_using(text, false, MergeLoop::Naive);
        let mut rates = Vec::new();
        for (name, merge_loop) in LOOPS {
            if tok.encode_using(text, false, merge_loop) != reference {
                return Err(format!(
                    "the {name} merge loop disagrees with the naive one"
                ));
            }
            let best = best_of(MIN_RUNS, MIN_SECONDS, || {
                std::hint::black_box(tok.encode_using(
                    std::hint::black_box(text),
                    false,
                    merge_loop,
                ));
            });
            rates.push(text.len() as f64 / best.seconds / 1e6);
        }
        let ratio = rates[2] / rates[0];
        let ratio = if ratio < 10.0 {
            format!("{ratio:.1}×")
        } else {
            format!("{ratio:.0}×")
        };
        let line = format!(
            "| {label}, {} KB | {:.2} MB/s | {:.1} MB/s | {:.1} MB/s | {ratio} |\n",
            text.len() / 1000,
            rates[0],
            rates[1],
            rates[2],
        );
        eprint!("{line}");
        s.push_str(&line);
    }
    Ok(s)
}
