//! SmolLM2 end to end on the GPU (lavapipe where there is no GPU) against chapter 8's CPU
//! engine on the same file, with the products' sums added two ways.
//!
//! The adapter's own reduction (a tree across 32 lanes): not the CPU's bits, since each
//! product adds its blocks' f32 sums in another order, a few units in the last place, and a
//! quantized activation that lands near a rounding boundary then goes the other way.
//! SmolLM2's few very large activations make such a flip worth a visible change in the
//! logits by the last layer, so the two runs differ as chapter 8's and llama.cpp's do: by
//! near-ties, not by mistakes. Teacher-forced on the text chapter 9's perplexity scores,
//! every top-1 token that is not the CPU's is a near-tie (and ≥ 85% agree), the perplexity
//! within 5% of the CPU's.
//!
//! In the CPU's order ([`Reduction::InOrder`]): the rest of the step is the CPU's
//! arithmetic, so greedy tokens from a chat prompt, and teacher-forced logits over a short
//! slice of the text, are the CPU engine's bit for bit.
//!
//! `cargo test --release -p ch13-gpu --test model -- --nocapture` prints the numbers.
//! A missing model fails with the command that fetches it; no adapter fails saying what to
//! install. The sizes (tokens generated, the slice of text) keep the file under two minutes
//! on lavapipe on two loaded cores.

use std::sync::OnceLock;

use ch01_tensors::models;
use ch08_gguf::Loaded;
use ch09_generate::sampling::first_max;
use ch13_gpu::Gpu;
use ch13_gpu::matvec::Reduction;
use ch13_gpu::model::GpuModel;
use ch13_gpu::step::{Decoder, Shaders};

/// Tokens generated in the greedy test.
const GREEDY: usize = 12;
/// Tokens of chapter 9's perplexity text scored teacher-forced; `LLM_BOOK_GPU_SLICE=N` scores
/// more (at most the text's), for a run by hand: lavapipe takes about a second a token.
const SLICE: usize = 48;

/// Where in the text the slice starts: `LLM_BOOK_GPU_FROM=N` (token N; 0 by default).
fn from() -> usize {
    match std::env::var("LLM_BOOK_GPU_FROM") {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("LLM_BOOK_GPU_FROM={v:?}: a token index")),
        Err(_) => 0,
    }
}

/// The tokens a teacher-forced test scores: `LLM_BOOK_GPU_SLICE`, else `default`.
fn slice(default: usize) -> usize {
    match std::env::var("LLM_BOOK_GPU_SLICE") {
        Ok(v) => {
            v.parse().ok().filter(|&n| n >= 2).unwrap_or_else(|| {
                panic!("LLM_BOOK_GPU_SLICE={v:?}: a number of tokens, 2 or more")
            })
        }
        Err(_) => default,
    }
}
/// Tokens of the text scored teacher-forced with the products in the CPU's order: a short
/// slice, since every position must give the CPU's bits (a difference in any op shows from
/// the second position on), and the greedy test runs the same step over more.
/// `LLM_BOOK_GPU_SLICE=N` scores more here too.
const EXACT_SLICE: usize = 16;
/// How far apart the two runs' perplexities over the slice may be (relative).
const PPL_BOUND: f64 = 0.05;
/// Chapter 8's rule for a near-tie (its tests against llama.cpp): where two runs pick
/// different tokens, the first run's logits for the two are less than this apart.
const NEAR_TIE: f32 = 0.5;

fn loaded() -> &'static Loaded {
    static M: OnceLock<Loaded> = OnceLock::new();
    M.get_or_init(|| {
        let path = models::require(&models::smollm2_gguf()).unwrap_or_else(|e| panic!("{e}"));
        ch08_gguf::load(&path).unwrap_or_else(|e| panic!("loading {}: {e}", path.display()))
    })
}

fn gpu() -> Gpu {
    Gpu::open().unwrap_or_else(|e| {
        panic!("{e}\nthe GPU tests need a Vulkan adapter; run: bash scripts/test-deps.sh")
    })
}

/// The largest |a − b| over two rows of logits.
fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Greedy from a chat prompt with the products adding in the CPU's order: every token the
/// CPU engine's, and every logit of every step the CPU's, bit for bit. (The fast reduction's
/// near-ties are the teacher-forced test's.)
#[test]
fn greedy_in_the_cpu_s_order_gives_the_cpu_engine_s_tokens_and_logits() {
    let m = loaded();
    let gpu = gpu();
    let shaders = Shaders::with(&gpu, Reduction::InOrder).unwrap();
    let model = GpuModel::upload(&gpu, &m.model).unwrap();
    let prompt = m.tokenizer.encode_prompt(
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
        true,
    );
    let total = prompt.len() + GREEDY;
    let engine = m.engine().unwrap();
    let cpu = engine
        .greedy(&prompt, GREEDY, false, &mut |_| {})
        .unwrap()
        .ids;
    let decoder = Decoder::new(&gpu, &shaders, &model, total).unwrap();
    eprintln!(
        "{} on {}: {} dispatches a token",
        m.model.family.name,
        gpu.info.name,
        decoder.dispatches()
    );
    let start = std::time::Instant::now();
    let mut cache = engine.new_cache(total).unwrap();
    let mut cpu_logits = engine.forward(&mut cache, &prompt, 0).unwrap();
    let mut gpu_logits = Vec::new();
    let mut next = 0;
    for (pos, &id) in prompt.iter().enumerate() {
        let last = pos + 1 == prompt.len();
        let (best, logits) = decoder.step(id, pos, last).unwrap();
        (next, gpu_logits) = (best, logits.unwrap_or_default());
    }
    let mut worst = 0.0f32;
    for (j, &want) in cpu.iter().enumerate() {
        let diff = max_diff(&cpu_logits, &gpu_logits);
        worst = worst.max(diff);
        assert!(
            next == want && diff == 0.0,
            "token {j}: the GPU picks {next}, the CPU {want}; their logits differ by up to \
             {diff} (with the products in the CPU's order they should be equal)"
        );
        if j + 1 < cpu.len() {
            let pos = prompt.len() + j;
            let (best, logits) = decoder.step(want, pos, true).unwrap();
            (next, gpu_logits) = (best, logits.unwrap());
            cpu_logits = engine.forward(&mut cache, &[want], pos).unwrap();
        }
    }
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "all {} tokens equal the CPU engine's, max |Δ logit| {worst}; {total} steps in \
         {secs:.2} s ({:.2} tok/s on this adapter, the CPU's order)",
        cpu.len(),
        total as f64 / secs
    );
}

/// Chapter 9's perplexity text from token `from()`, `n` tokens, and the CPU engine's logits
/// and perplexity over it.
struct Text {
    ids: Vec<u32>,
    bos: Option<u32>,
    cpu_logits: Vec<f32>, // (positions, vocab)
    cpu_ppl: f64,
    scored: usize,
}

fn text(n: usize) -> Text {
    let m = loaded();
    let path = models::workspace_root().join("fixtures/reference/perplexity-text.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    // chapter 9's way: the text without BOS or special tokens, BOS in front of the window
    let ids = m.tokenizer.tokenizer.encode(&text, false);
    let (from, slice) = (from(), n);
    assert!(
        ids.len() >= from.saturating_add(slice),
        "the text has {} tokens, fewer than {from} + {slice}",
        ids.len()
    );
    let ids = ids[from..from + slice].to_vec();
    let bos = m.tokenizer.bos.filter(|_| m.tokenizer.add_bos);
    let engine = m.engine().unwrap();
    let mut cpu_logits = Vec::new();
    let vocab = m.model.config.vocab_size;
    let (cpu_ppl, scored) =
        ch09_generate::perplexity::perplexity_with(vocab, &ids, bos, &mut |w| {
            let l = engine.window_logits(w).map_err(|e| e.to_string())?;
            cpu_logits.extend_from_slice(&l);
            Ok(l)
        })
        .unwrap();
    Text {
        ids,
        bos,
        cpu_logits,
        cpu_ppl,
        scored,
    }
}

/// The text teacher-forced on the GPU with the products' sums added `reduction`'s way:
/// the top-1 agreement with the CPU, the positions where they differ by more than a
/// near-tie, the largest |Δ logit| and the two perplexities' relative distance.
struct Forced {
    agree: usize,
    positions: usize,
    misses: Vec<(usize, f32)>,
    worst: f32,
    rel: f64,
}

fn teacher_forced(reduction: Reduction, n: usize) -> Forced {
    let m = loaded();
    let t = &text(n);
    let gpu = gpu();
    let shaders = Shaders::with(&gpu, reduction).unwrap();
    let model = GpuModel::upload(&gpu, &m.model).unwrap();
    let vocab = m.model.config.vocab_size;
    let decoder = Decoder::new(&gpu, &shaders, &model, t.ids.len() + 1).unwrap();
    let mut gpu_logits = Vec::new();
    let start = std::time::Instant::now();
    let (gpu_ppl, _) = ch09_generate::perplexity::perplexity_with(vocab, &t.ids, t.bos, &mut |w| {
        let mut all = Vec::with_capacity(w.len() * vocab);
        for (pos, &id) in w.iter().enumerate() {
            let (_, logits) = decoder.step(id, pos, true).map_err(|e| e.to_string())?;
            all.extend(logits.expect("asked for"));
        }
        gpu_logits.extend_from_slice(&all);
        Ok(all)
    })
    .unwrap();
    let secs = start.elapsed().as_secs_f64();
    let positions = t.cpu_logits.len() / vocab;
    let (mut agree, mut worst, mut misses) = (0, 0.0f32, Vec::new());
    let rows = t
        .cpu_logits
        .chunks_exact(vocab)
        .zip(gpu_logits.chunks_exact(vocab));
    for (pos, (c, g)) in rows.enumerate() {
        let (ours, theirs) = (first_max(c), first_max(g));
        if ours == theirs {
            agree += 1;
        } else {
            let margin = c[ours] - c[theirs];
            eprintln!(
                "{}: position {pos}: the CPU's top token {ours}, the GPU's {theirs}, {margin:.4} \
                 apart in the CPU's logits",
                reduction.name()
            );
            if margin >= NEAR_TIE {
                misses.push((pos, margin));
            }
        }
        worst = worst.max(max_diff(c, g));
    }
    let rel = (gpu_ppl - t.cpu_ppl).abs() / t.cpu_ppl;
    eprintln!(
        "{} reduction, teacher-forced over {positions} positions ({} scored): top-1 \
         {agree}/{positions}, perplexity GPU {gpu_ppl:.4} vs CPU {:.4} ({:.3}% apart), max \
         |Δ logit| {worst:.4}; {secs:.1} s on {}",
        reduction.name(),
        t.scored,
        t.cpu_ppl,
        rel * 100.0,
        gpu.info.name
    );
    Forced {
        agree,
        positions,
        misses,
        worst,
        rel,
    }
}

#[test]
fn teacher_forced_on_chapter_9_s_text_agrees_with_the_cpu_engine() {
    let Forced {
        agree,
        positions,
        misses,
        rel,
        ..
    } = teacher_forced(Reduction::for_gpu(&gpu()), slice(SLICE));
    assert!(
        misses.is_empty(),
        "the GPU's top token is not the CPU's at positions where the CPU's logits prefer theirs \
         by {NEAR_TIE} or more (not near-ties): {misses:?}"
    );
    // Every miss above is a near-tie; this floor only catches a step that is wrong everywhere.
    // It is below chapter 8's 95% (against llama.cpp) because SmolLM2 has many near-ties: on
    // lavapipe, four stretches of 48 to 256 tokens of this text agreed at 89.6% to 96.1%, every
    // miss a near-tie, and another adapter sums in yet another order.
    assert!(
        agree * 100 >= positions * 85,
        "the GPU's top token equals the CPU's at only {agree} of {positions} positions"
    );
    // Over 47 scored tokens the perplexity is the mean of few log-likelihoods, and a
    // near-tie's flip moves it visibly: chapter 6's 1% (Q4_1 against llama.cpp) is over 698
    // tokens, which lavapipe cannot run in the tests' time. This bound catches a wrong step
    // (a race in the attention shader once gave 96% apart), not float order.
    assert!(
        rel < PPL_BOUND,
        "perplexity on the GPU and the CPU {:.3}% apart (the bound: {:.0}%)",
        rel * 100.0,
        PPL_BOUND * 100.0
    );
}

/// With the products adding in the CPU's order, the rest of the step is the CPU's
/// arithmetic too, op for op: every logit of every position is the CPU engine's, bit for bit.
#[test]
fn in_the_cpu_s_order_the_logits_are_the_cpu_engine_s_bit_for_bit() {
    let Forced {
        agree,
        positions,
        worst,
        rel,
        ..
    } = teacher_forced(Reduction::InOrder, slice(EXACT_SLICE));
    assert!(
        worst == 0.0,
        "with the products in the CPU's order a logit differs from the CPU's by {worst}; \
         top-1 agrees at {agree} of {positions} positions. \
         `cargo test --release -p ch13-gpu --test parity -- --ignored --nocapture` finds the op"
    );
    assert_eq!(agree, positions, "equal logits, equal top-1");
    assert_eq!(rel, 0.0, "equal logits, equal perplexity");
}
