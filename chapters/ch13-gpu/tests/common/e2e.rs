//! A whole model on the GPU against chapter 8's CPU engine on the same file, for the model
//! tests (`model.rs`: SmolLM2, `gemma.rs`: Gemma-3, `families.rs`: chapter 8's synthetic
//! files of every family): greedy tokens from a prompt, the same
//! until a near-tie; and teacher-forced on the text chapter 9's perplexity scores, the top-1
//! token the CPU's except at near-ties, the perplexity close to the CPU's.
//!
//! Each comparison runs under one of two [`Rule`]s. With the adapter's own reduction (a tree
//! across 32 lanes) the step is not the CPU's bit for bit: each product adds its blocks' f32
//! sums in another order, a few units in the last place, and a quantized activation that
//! lands near a rounding boundary then goes the other way. Such a flip can be worth a
//! visible change in the logits by the last layer, so the two runs differ as chapter 8's
//! and llama.cpp's do: by near-ties, not by mistakes. With the products adding in the CPU's
//! order ([`Reduction::InOrder`]) the rest of the step is the CPU's arithmetic, and every
//! logit must be the CPU engine's, bit for bit.

use ch01_tensors::models;
use ch08_gguf::Loaded;
use ch08_gguf::engine::Engine;
use ch09_generate::sampling::first_max;
use ch13_gpu::Gpu;
use ch13_gpu::matvec::Reduction;
use ch13_gpu::model::GpuModel;
use ch13_gpu::step::{Decoder, Shaders};

use super::{gpu, max_diff};

/// Chapter 8's rule for a near-tie (its tests against llama.cpp): where two runs pick
/// different tokens, the first run's logits for the two are less than this apart.
pub const NEAR_TIE: f32 = 0.5;
/// How far apart the two runs' perplexities over the slice may be (relative).
pub const PPL_BOUND: f64 = 0.05;
/// The least share of positions (percent) where the top-1 tokens agree.
pub const FLOOR_PERCENT: usize = 85;

/// How a run on the GPU is held to the CPU engine's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rule {
    /// The adapter's own reduction: every top-1 token that differs is a near-tie.
    NearTies,
    /// The products in the CPU's order ([`Reduction::InOrder`]): every logit the CPU's.
    Bits,
}

impl Rule {
    fn shaders(self, gpu: &Gpu) -> Shaders {
        let reduction = match self {
            Rule::NearTies => Reduction::for_gpu(gpu).unwrap(),
            Rule::Bits => Reduction::InOrder,
        };
        Shaders::with(gpu, reduction).unwrap()
    }
}

/// The most tokens a prefill submission takes in [`greedy`]: SmolLM2's chat prompt of 16
/// tokens runs in two pieces, each shorter than a tile.
pub const PIECE: usize = 12;

/// The model at `path`, loaded once per test file by the caller's `OnceLock`.
pub fn load(path: std::path::PathBuf) -> Loaded {
    let path = models::require(&path).unwrap_or_else(|e| panic!("{e}"));
    ch08_gguf::load(&path).unwrap_or_else(|e| panic!("loading {}: {e}", path.display()))
}

/// `var` from the environment as a number at least `min`, else `default`: the sizes a run
/// by hand changes (`LLM_BOOK_GPU_FROM`, `LLM_BOOK_GPU_SLICE`).
pub fn env_or(var: &str, default: usize, min: usize) -> usize {
    match std::env::var(var) {
        Ok(v) => v
            .parse()
            .ok()
            .filter(|&n| n >= min)
            .unwrap_or_else(|| panic!("{var}={v:?}: a number, {min} or more")),
        Err(_) => default,
    }
}

// ANCHOR: greedy
/// `prompt` (control tokens parsed) as a prefill in pieces of up to [`PIECE`] tokens, then
/// `n` greedy tokens, on the GPU and on the CPU. Under [`Rule::NearTies`], the same tokens
/// until the first where they differ, and there a near-tie in the CPU's logits; under
/// [`Rule::Bits`], every token and the logits after the prompt and after each token the same.
pub fn greedy(m: &Loaded, prompt: &str, n: usize, rule: Rule) {
    let gpu = gpu();
    let shaders = rule.shaders(&gpu);
    let model = GpuModel::upload(&gpu, &m.model).unwrap();
    let prompt = m.tokenizer.encode_prompt(prompt, true);
    let total = prompt.len() + n;
    let engine = m.engine().unwrap();
    let cpu = engine.greedy(&prompt, n, false, &mut |_| {}).unwrap().ids;
    let piece = PIECE.min(total);
    let decoder = Decoder::with_chunk(&gpu, &shaders, &model, total, piece).unwrap();
    eprintln!(
        "{} on {}: {} dispatches a token; a prompt of {} tokens in pieces of {piece}",
        m.model.family.name,
        gpu.info.name,
        decoder.dispatches(),
        prompt.len()
    );
    let start = std::time::Instant::now();
    let (mut next, logits) = decoder.prefill(&prompt, 0, true).unwrap();
    let mut gpu_logits = logits.expect("asked for");
    let mut cache = engine.new_cache(total).unwrap();
    let mut cpu_logits = engine.forward(&mut cache, &prompt, 0).unwrap();
    let mut worst = 0.0f32;
    for (j, &want) in cpu.iter().enumerate() {
        let diff = max_diff(&cpu_logits, &gpu_logits);
        worst = worst.max(diff);
        if rule == Rule::Bits {
            assert!(
                next == want && diff == 0.0,
                "token {j}: the GPU picks {next}, the CPU {want}; their logits differ by up to \
                 {diff} (with the products in the CPU's order they should be equal; \
                 `cargo test --release -p ch13-gpu --test parity -- --ignored --nocapture` \
                 finds the op)"
            );
        } else if next != want {
            let margin = cpu_logits[want as usize] - cpu_logits[next as usize];
            eprintln!(
                "token {j}: the GPU picks {next}, the CPU {want}, {margin:.4} apart in the CPU's \
                 logits: a near-tie, compared no further"
            );
            assert!(
                margin < NEAR_TIE,
                "token {j}: the GPU picks {next} where the CPU picks {want}, whose logit is \
                 {margin:.3} higher in the CPU's run: not a near-tie (< {NEAR_TIE})"
            );
            break;
        }
        if j + 1 == cpu.len() {
            eprintln!("all {} tokens equal the CPU engine's ({rule:?})", cpu.len());
            break;
        }
        let pos = prompt.len() + j;
        let (best, logits) = decoder.step(want, pos, true).unwrap();
        (next, gpu_logits) = (best, logits.unwrap());
        cpu_logits = engine.forward(&mut cache, &[want], pos).unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "the prefill and {} steps in {secs:.2} s on this adapter; max |Δ logit| vs the CPU {worst:.4}",
        n.saturating_sub(1)
    );
    if rule == Rule::Bits && n > 1 {
        // again with two steps in flight: each argmax handed to the next step on the GPU
        let first = decoder.prefill(&prompt, 0, false).unwrap().0;
        let mut ids = vec![first];
        let heard = decoder
            .greedy(first, prompt.len(), n - 1, &mut |t| {
                ids.push(t);
                true
            })
            .unwrap();
        assert_eq!(
            heard,
            n - 1,
            "Decoder::greedy ran {heard} steps of {}",
            n - 1
        );
        assert_eq!(
            ids, cpu,
            "with two steps in flight (Decoder::greedy) the tokens are not the CPU's, though a \
             step at a time they were: the next step read its token or its position before \
             the step before had written them?"
        );
    }
}
// ANCHOR_END: greedy

/// Two runs' logits over the same positions, compared row by row.
pub struct Compared {
    pub positions: usize,
    /// Positions where the two top-1 tokens are the same.
    pub agree: usize,
    /// The largest |Δ logit| over every row.
    pub worst: f32,
    /// `(position, margin)` where the top-1 tokens differ by [`NEAR_TIE`] or more in the
    /// CPU's logits: not near-ties.
    pub misses: Vec<(usize, f32)>,
}

/// The CPU's and the GPU's logits (`(positions, vocab)` each) row by row: the top-1 tokens,
/// each difference printed with how far apart the two tokens are in the CPU's logits.
pub fn compare(cpu: &[f32], gpu: &[f32], vocab: usize) -> Compared {
    assert_eq!(
        cpu.len(),
        gpu.len(),
        "the two runs scored different positions"
    );
    let mut c = Compared {
        positions: cpu.len() / vocab,
        agree: 0,
        worst: 0.0,
        misses: Vec::new(),
    };
    for (pos, (c_row, g_row)) in cpu
        .chunks_exact(vocab)
        .zip(gpu.chunks_exact(vocab))
        .enumerate()
    {
        let (ours, theirs) = (first_max(c_row), first_max(g_row));
        if ours == theirs {
            c.agree += 1;
        } else {
            let margin = c_row[ours] - c_row[theirs];
            eprintln!(
                "position {pos}: the CPU's top token {ours}, the GPU's {theirs}, {margin:.4} \
                 apart in the CPU's logits"
            );
            if margin >= NEAR_TIE {
                c.misses.push((pos, margin));
            }
        }
        c.worst = c.worst.max(max_diff(c_row, g_row));
    }
    c
}

/// `ids` teacher-forced from position 0 through `decoder` (a cache of `ids.len()` positions
/// or more) and through chapter 8's engine on the same model, compared.
pub fn forced_ids(decoder: &Decoder, engine: &Engine, ids: &[u32]) -> Compared {
    let cpu = engine.window_logits(ids).unwrap();
    let mut gpu = Vec::with_capacity(cpu.len());
    for (pos, &id) in ids.iter().enumerate() {
        let (_, logits) = decoder.step(id, pos, true).unwrap();
        gpu.extend(logits.expect("asked for"));
    }
    compare(&cpu, &gpu, engine.model.config.vocab_size)
}

// ANCHOR: prefilled
/// `ids` run as a prefill through `decoder` (a submission for each piece of up to its chunk
/// of tokens) and through chapter 8's engine, then `after` more tokens decoded one at a time
/// (the CPU's greedy choices, fed to both): the logits after the prompt and after each
/// token, compared. What the prefill wrote into the KV cache is read by every step after it.
pub fn prefilled(decoder: &Decoder, engine: &Engine, ids: &[u32], after: usize) -> Compared {
    let total = ids.len() + after;
    let mut cache = engine.new_cache(total).unwrap();
    let mut cpu = engine.forward(&mut cache, ids, 0).unwrap();
    let (_, logits) = decoder.prefill(ids, 0, true).unwrap();
    let mut gpu = logits.expect("asked for");
    let vocab = engine.model.config.vocab_size;
    for pos in ids.len()..total {
        let next = first_max(&cpu[cpu.len() - vocab..]) as u32;
        cpu.extend(engine.forward(&mut cache, &[next], pos).unwrap());
        gpu.extend(decoder.step(next, pos, true).unwrap().1.expect("asked for"));
    }
    compare(&cpu, &gpu, vocab)
}
// ANCHOR_END: prefilled

/// Teacher-forced on `slice` tokens of chapter 9's perplexity text from token `from`, run
/// from an empty cache at position 0 (BOS first, as chapter 9 scores a window): every
/// position where the two top-1 tokens differ is a near-tie in the CPU's logits, they agree
/// at [`FLOOR_PERCENT`] of positions or more, and the perplexities are within [`PPL_BOUND`]
/// ([`Rule::NearTies`]); or every logit and the perplexity are the CPU's ([`Rule::Bits`]).
pub fn teacher_forced(m: &Loaded, from: usize, slice: usize, rule: Rule) {
    let gpu = gpu();
    let shaders = rule.shaders(&gpu);
    let model = GpuModel::upload(&gpu, &m.model).unwrap();
    let path = models::workspace_root().join("fixtures/reference/perplexity-text.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    // chapter 9's way: the text without BOS or special tokens, BOS in front of the window
    let ids = m.tokenizer.tokenizer.encode(&text, false);
    assert!(
        ids.len() >= from.saturating_add(slice),
        "the text has {} tokens, fewer than {from} + {slice}",
        ids.len()
    );
    let ids = &ids[from..from + slice];
    let bos = m.tokenizer.bos.filter(|_| m.tokenizer.add_bos);
    let vocab = m.model.config.vocab_size;
    let engine = m.engine().unwrap();
    let mut cpu_logits = Vec::new();
    let (cpu_ppl, scored) = ch09_generate::perplexity::perplexity_with(vocab, ids, bos, &mut |w| {
        let l = engine.window_logits(w).map_err(|e| e.to_string())?;
        cpu_logits.extend_from_slice(&l);
        Ok(l)
    })
    .unwrap();
    let decoder = Decoder::new(&gpu, &shaders, &model, slice + 1).unwrap();
    let mut gpu_logits = Vec::new();
    let start = std::time::Instant::now();
    let (gpu_ppl, _) = ch09_generate::perplexity::perplexity_with(vocab, ids, bos, &mut |w| {
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
    let Compared {
        positions,
        agree,
        worst,
        misses,
    } = compare(&cpu_logits, &gpu_logits, vocab);
    let rel = (gpu_ppl - cpu_ppl).abs() / cpu_ppl;
    eprintln!(
        "{}: teacher-forced over {positions} positions from token {from} ({scored} scored): \
         top-1 {agree}/{positions}, perplexity GPU {gpu_ppl:.4} vs CPU {cpu_ppl:.4} ({:.3}% \
         apart), max |Δ logit| {worst:.4}; {secs:.1} s on {} ({rule:?})",
        m.model.family.name,
        rel * 100.0,
        gpu.info.name
    );
    if rule == Rule::Bits {
        assert!(
            worst == 0.0,
            "with the products in the CPU's order a logit differs from the CPU's by {worst}; \
             top-1 agrees at {agree} of {positions} positions. \
             `cargo test --release -p ch13-gpu --test parity -- --ignored --nocapture` finds the op"
        );
        assert_eq!(agree, positions, "equal logits, equal top-1");
        assert_eq!(gpu_ppl, cpu_ppl, "equal logits, equal perplexity");
        return;
    }
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
        agree * 100 >= positions * FLOOR_PERCENT,
        "the GPU's top token equals the CPU's at only {agree} of {positions} positions"
    );
    // Over a few dozen scored tokens the perplexity is the mean of few log-likelihoods, and
    // a near-tie's flip moves it visibly: chapter 6's 1% (Q4_1 against llama.cpp) is over 698
    // tokens, which lavapipe cannot run in the tests' time. This bound catches a wrong step
    // (a race in the attention shader once gave 96% apart), not float order.
    assert!(
        rel < PPL_BOUND,
        "perplexity on the GPU {gpu_ppl:.4}, on the CPU {cpu_ppl:.4}: {:.3}% apart (the bound: \
         {:.0}%)",
        rel * 100.0,
        PPL_BOUND * 100.0
    );
}
