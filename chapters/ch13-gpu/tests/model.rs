//! SmolLM2 end to end on the GPU (lavapipe where there is no GPU) against chapter 8's CPU
//! engine on the same file (`common/e2e.rs` has the comparisons and their rules). With the
//! products adding in the CPU's order: greedy tokens from a chat prompt, and teacher-forced
//! logits over a short slice of the text chapter 9's perplexity scores, the CPU engine's
//! bit for bit. With the adapter's own order, over a longer slice: every top-1 token the
//! CPU's except at near-ties, the perplexity within 5% of the CPU's.
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
use common::e2e::{self, Rule};

/// Tokens generated in the greedy test.
const GREEDY: usize = 12;
/// Tokens of chapter 9's perplexity text scored teacher-forced; `LLM_BOOK_GPU_SLICE=N` scores
/// more (at most the text's), for a run by hand: lavapipe takes about a second a token.
/// `LLM_BOOK_GPU_FROM=N` starts the slice at token N (0 by default).
const SLICE: usize = 48;
/// Tokens of the text scored teacher-forced with the products in the CPU's order: a short
/// slice, since every position must give the CPU's bits (a difference in any op shows from
/// the second position on), and the greedy test runs the same step over more.
/// `LLM_BOOK_GPU_SLICE=N` scores more here too.
const EXACT_SLICE: usize = 16;

fn loaded() -> &'static Loaded {
    static M: OnceLock<Loaded> = OnceLock::new();
    M.get_or_init(|| e2e::load(models::smollm2_gguf()))
}

/// Greedy from a chat prompt with the products adding in the CPU's order: every token the
/// CPU engine's, and every logit of every step the CPU's, bit for bit. (The adapter's own
/// order's near-ties are the teacher-forced test's.)
#[test]
fn greedy_in_the_cpu_s_order_gives_the_cpu_engine_s_tokens_and_logits() {
    let prompt =
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n";
    e2e::greedy(loaded(), prompt, GREEDY, Rule::Bits);
}

#[test]
fn teacher_forced_on_chapter_9_s_text_agrees_with_the_cpu_engine() {
    let from = e2e::env_or("LLM_BOOK_GPU_FROM", 0, 0);
    let slice = e2e::env_or("LLM_BOOK_GPU_SLICE", SLICE, 2);
    e2e::teacher_forced(loaded(), from, slice, Rule::NearTies);
}

/// With the products adding in the CPU's order, the rest of the step is the CPU's
/// arithmetic too, op for op: every logit of every position is the CPU engine's, bit for bit.
#[test]
fn in_the_cpu_s_order_the_logits_are_the_cpu_engine_s_bit_for_bit() {
    let from = e2e::env_or("LLM_BOOK_GPU_FROM", 0, 0);
    let slice = e2e::env_or("LLM_BOOK_GPU_SLICE", EXACT_SLICE, 2);
    e2e::teacher_forced(loaded(), from, slice, Rule::Bits);
}

/// Two steps in flight: a run told to stop leaves the next step queued, which runs and is
/// dropped. Stopping after two tokens and going on from the second gives the tokens of a run
/// never stopped, and the stopped run heard exactly the two.
#[test]
fn greedy_stopped_and_resumed_gives_the_tokens_of_a_run_never_stopped() {
    use ch13_gpu::model::GpuModel;
    use ch13_gpu::step::{Decoder, Shaders};
    let m = loaded();
    let gpu = common::gpu();
    let shaders = Shaders::new(&gpu).unwrap();
    let model = GpuModel::upload(&gpu, &m.model).unwrap();
    let prompt = m.tokenizer.encode_prompt("The capital of France is", true);
    let at = prompt.len();
    let decoder = Decoder::new(&gpu, &shaders, &model, at + 8).unwrap();
    let first = decoder.prefill(&prompt, 0, false).unwrap().0;
    let mut whole = Vec::new();
    decoder
        .greedy(first, at, 6, &mut |t| {
            whole.push(t);
            true
        })
        .unwrap();
    let mut part = Vec::new();
    let heard = decoder
        .greedy(first, at, 6, &mut |t| {
            part.push(t);
            part.len() < 2
        })
        .unwrap();
    assert_eq!(
        (heard, part.len()),
        (2, 2),
        "told to stop at the second token, Decoder::greedy ran {heard} and handed over {}",
        part.len()
    );
    decoder
        .greedy(part[1], at + 2, 4, &mut |t| {
            part.push(t);
            true
        })
        .unwrap();
    assert_eq!(
        part, whole,
        "stopped after two tokens and resumed from the second, the run's tokens are not those \
         of a run never stopped: the dropped step left something behind"
    );
}

/// On a GPU the products' layout and the tiled products' tiling are chosen by timing the
/// model's own step and prefill with each (`tune.rs`); lavapipe runs the same choice here.
/// Every candidate is timed, the ones kept are the fastest, and their greedy tokens after a
/// prefill are those of the adapter's own shaders.
#[test]
fn the_layout_chosen_by_timing_gives_the_same_tokens() {
    use ch13_gpu::matmul::Tiling;
    use ch13_gpu::matvec::{CANDIDATES, Reduction};
    use ch13_gpu::model::GpuModel;
    use ch13_gpu::step::{Decoder, Shaders};
    let m = loaded();
    let gpu = common::gpu();
    let model = GpuModel::upload(&gpu, &m.model).unwrap();
    let reduction = Reduction::for_gpu(&gpu).unwrap();
    let trials = ch13_gpu::tune::Trials {
        layouts: &CANDIDATES,
        tilings: &Tiling::ALL,
        prompt: 8, // on lavapipe a prefill of 64 takes seconds
    };
    let tuned = ch13_gpu::tune::fastest(&gpu, &model, reduction, &trials).unwrap();
    let tilings: Vec<Tiling> = tuned.tilings.iter().map(|t| t.0).collect();
    assert_eq!(
        tilings,
        Tiling::ALL,
        "both tilings timed: {:?}",
        tuned.tilings
    );
    let fastest = tuned
        .tilings
        .iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    assert_eq!(
        tuned.shaders.matmul.tiling, fastest.0,
        "the tiling kept is not the fastest of {:?}",
        tuned.tilings
    );
    let names: Vec<String> = tuned.tried.iter().map(|(l, _)| l.name()).collect();
    let want: Vec<String> = CANDIDATES.iter().map(|l| l.name()).collect();
    assert_eq!(names, want, "every candidate timed, in order");
    let (best, rate) = tuned
        .tried
        .iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    assert!(*rate > 0.0, "{:?}", tuned.tried);
    assert_eq!(
        tuned.shaders.matvec.layout, *best,
        "the layout kept is not the fastest of {:?}",
        tuned.tried
    );
    let prompt = m.tokenizer.encode_prompt("The capital of France is", true);
    let tokens = |shaders: &Shaders| {
        let decoder = Decoder::new(&gpu, shaders, &model, prompt.len() + 4).unwrap();
        let first = decoder.prefill(&prompt, 0, false).unwrap().0;
        let mut ids = vec![first];
        decoder
            .greedy(first, prompt.len(), 3, &mut |t| {
                ids.push(t);
                true
            })
            .unwrap();
        ids
    };
    let own = Shaders::with(&gpu, reduction).unwrap();
    assert_eq!(
        tokens(&tuned.shaders),
        tokens(&own),
        "the layout chosen ({}) gives other tokens than the adapter's own ({}): the layouts \
         should give the same bits",
        tuned.shaders.matvec.layout.name(),
        own.matvec.layout.name()
    );
}
