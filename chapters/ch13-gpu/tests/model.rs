//! SmolLM2 end to end on the GPU (lavapipe where there is no GPU) against chapter 8's CPU
//! engine on the same file (`common/e2e.rs` has the comparisons and their rules): greedy
//! tokens from a chat prompt, the same until a near-tie; and teacher-forced on the text
//! chapter 9's perplexity scores, every top-1 token the CPU's except at near-ties, the
//! perplexity within 5% of the CPU's.
//!
//! SmolLM2's few very large activations make a flipped quantized activation worth a visible
//! change in the logits by the last layer, so near-ties are where the runs part.
//!
//! `cargo test --release -p ch13-gpu --test model -- --nocapture` prints the numbers.
//! A missing model fails with the command that fetches it; no adapter fails saying what to
//! install. The sizes (tokens generated, the slice of text) keep the file under two minutes
//! on lavapipe on two loaded cores.

mod common;

use std::sync::OnceLock;

use ch01_tensors::models;
use ch08_gguf::Loaded;
use common::e2e;

/// Tokens generated in the greedy test.
const GREEDY: usize = 12;
/// Tokens of chapter 9's perplexity text scored teacher-forced; `LLM_BOOK_GPU_SLICE=N` scores
/// more (at most the text's), for a run by hand: lavapipe takes about a second a token.
/// `LLM_BOOK_GPU_FROM=N` starts the slice at token N (0 by default).
const SLICE: usize = 48;

fn loaded() -> &'static Loaded {
    static M: OnceLock<Loaded> = OnceLock::new();
    M.get_or_init(|| e2e::load(models::smollm2_gguf()))
}

#[test]
fn greedy_tokens_equal_the_cpu_engine_s_until_a_near_tie() {
    let prompt =
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n";
    e2e::greedy(loaded(), prompt, GREEDY);
}

#[test]
fn teacher_forced_on_chapter_9_s_text_agrees_with_the_cpu_engine() {
    let from = e2e::env_or("LLM_BOOK_GPU_FROM", 0, 0);
    let slice = e2e::env_or("LLM_BOOK_GPU_SLICE", SLICE, 2);
    e2e::teacher_forced(loaded(), from, slice);
}
