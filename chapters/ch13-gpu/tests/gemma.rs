//! Gemma-3-270M end to end on the GPU (lavapipe where there is no GPU) against chapter 8's
//! CPU engine on the same file, by the rules `model.rs` holds SmolLM2 to (`common/e2e.rs`):
//! with the products in the CPU's order, greedy tokens and their logits the CPU's bit for
//! bit; with the adapter's own order, teacher-forced top-1 tokens equal except at
//! near-ties, perplexity within 5%. Gemma-3 exercises what SmolLM2 does not: the scaled
//! embedding read from a table split over bindings (and the same table as the LM head), the
//! norms on every head of Q and K and after each block, the GELU gate, two RoPE bases.
//!
//! Its sliding window (512 positions on five layers of six) needs a run past 512 positions,
//! which lavapipe cannot do in a test's time (a prefill of 520 tokens took 15 minutes on two
//! loaded cores, every top-1 the CPU's): the greedy test shrinks the window to 4 positions on
//! both sides instead, and `gemma_ops.rs` holds the window to chapter 8's on a small attention.
//!
//! A step reads Gemma's 170 MiB table for the LM head, a few times SmolLM2's bytes, so the
//! sizes here are small: the file stays near a minute on lavapipe on two cores.
//! `cargo test --release -p ch13-gpu --test gemma -- --nocapture` prints the numbers.

mod common;

use std::sync::OnceLock;

use ch01_tensors::models;
use ch08_gguf::Loaded;
use common::e2e::{self, Rule};

/// Tokens generated in the greedy test.
const GREEDY: usize = 3;
/// Positions a sliding layer sees in the greedy test: fewer than the prompt's 6 tokens, so
/// the prefill's last tokens and every decoded one see only part of what came before.
const WINDOW: usize = 4;
/// Tokens of chapter 9's perplexity text scored teacher-forced (`LLM_BOOK_GPU_SLICE`,
/// `LLM_BOOK_GPU_FROM` change it, as in `model.rs`).
const SLICE: usize = 8;

fn loaded() -> &'static Loaded {
    static M: OnceLock<Loaded> = OnceLock::new();
    M.get_or_init(|| e2e::load(models::gemma3_gguf()))
}

// ANCHOR: window
/// Gemma-3's weights with its sliding windows shrunk from 512 positions to [`WINDOW`], on
/// the CPU engine's side and the GPU's alike, so that a short run crosses them: the prompt as
/// a prefill, then greedy tokens, with the products in the CPU's order, every token and
/// every logit the CPU engine's.
#[test]
fn gemma3_with_a_short_window_prefills_and_decodes_the_cpu_engine_s_bits() {
    let mut m = e2e::load(models::gemma3_gguf());
    let mut sliding = 0;
    for layer in &mut m.model.layers {
        if layer.window.is_some() {
            layer.window = Some(WINDOW);
            sliding += 1;
        }
    }
    assert_eq!(
        sliding, 15,
        "Gemma-3-270M slides a window on 15 of its 18 layers"
    );
    e2e::greedy(&m, "The capital of France is", GREEDY, Rule::Bits);
}
// ANCHOR_END: window

#[test]
fn gemma3_teacher_forced_on_chapter_9_s_text_agrees_with_the_cpu_engine() {
    let from = e2e::env_or("LLM_BOOK_GPU_FROM", 0, 0);
    let slice = e2e::env_or("LLM_BOOK_GPU_SLICE", SLICE, 2);
    e2e::teacher_forced(loaded(), from, slice, Rule::NearTies);
}
