//! Where a decode step's (or a prefill's) time goes, part by part: each kind of product (Q, K
//! and V together, the output projection, gate and up together, down, the LM head) and the
//! attention, each timed from its caller's start to its join (chapter 7's `team::timed`,
//! which the engine's products and attention go through), and the rest of the step (norms,
//! RoPE, the residual adds, the embedding row): the step's wall time less its parts.
//!
//! Timed inside real steps, each part meets the caches as a step leaves them: `ch08-gguf
//! profile` splits a step so. Set against each other at two thread counts, the parts say
//! which of them gets slower when the threads double, where the step's total alone cannot
//! (`ch08-gguf regions`).

use ch07_simd_parallel::team::{Part, record_step, with_decode_cap};

use crate::Result;
use crate::engine::Engine;

/// The kinds of part a step has, in the order a layer runs them, the LM head last.
pub const KINDS: [&str; 6] = ["q/k/v", "attention", "o", "gate/up", "down", "LM head"];

/// One recorded decode step.
#[derive(Clone, Debug)]
pub struct StepParts {
    /// The step's wall time, from the call to `forward` to its logits.
    pub seconds: f64,
    /// Each region's tasks, in the order they finished.
    pub regions: Vec<usize>,
    /// Each timed part, in the order they finished.
    pub parts: Vec<Part>,
}

impl StepParts {
    /// Seconds the step's parts of `kind` took together.
    pub fn seconds_of(&self, kind: &str) -> f64 {
        self.parts
            .iter()
            .filter(|p| p.kind == kind)
            .map(|p| p.seconds)
            .sum()
    }

    /// Seconds all its parts took together.
    pub fn parts_seconds(&self) -> f64 {
        self.parts.iter().map(|p| p.seconds).sum()
    }

    /// The most tasks a region of `kind` had in this step (1: its parts ran on one thread;
    /// `None`: the step has no part of that kind).
    pub fn tasks_of(&self, kind: &str) -> Option<usize> {
        self.parts
            .iter()
            .filter(|p| p.kind == kind)
            .map(|p| p.tasks)
            .max()
    }
}

/// Decode steps run unrecorded before the recorded ones. The first steps after a prefill
/// run slower than the steps after them, on one thread as on two (the first took nearly
/// twice a later one's time in SmolLM2's decode on a 2-core Xeon, the next few less and
/// less): the prefill has left other bytes in the caches, and the helpers asleep.
pub const WARM: usize = 4;

/// `steps` decode steps in the current pool, on all its threads (not a count the engine
/// would choose: `engine/tune.rs`), each recorded, after `prompt`: the first at position
/// `prompt.len()`, the next after it. Before them, [`WARM`] steps unrecorded on another
/// cache, so that the team exists, its helpers are awake, and the caches hold what a
/// decode step leaves there.
pub fn record_decode(engine: &Engine, prompt: &[u32], steps: usize) -> Result<Vec<StepParts>> {
    with_decode_cap(rayon::current_num_threads(), || {
        decode_steps(engine, prompt, steps)
    })
}

fn decode_steps(engine: &Engine, prompt: &[u32], steps: usize) -> Result<Vec<StepParts>> {
    let mut warm = engine.new_cache(prompt.len() + WARM)?;
    let mut next = argmax(&engine.forward(&mut warm, prompt, 0)?);
    let mut cache = engine.new_cache(prompt.len() + steps)?;
    let first = argmax(&engine.forward(&mut cache, prompt, 0)?);
    for pos in prompt.len()..prompt.len() + WARM {
        next = argmax(&engine.forward(&mut warm, &[next], pos)?);
    }
    next = first;
    let mut out = Vec::with_capacity(steps);
    for pos in prompt.len()..prompt.len() + steps {
        let (logits, step) = record(|| engine.forward(&mut cache, &[next], pos));
        next = argmax(&logits?);
        out.push(step);
    }
    Ok(out)
}

/// `runs` prefills of `prompt` in the current pool, on all its threads, each recorded, each
/// into a new cache that already holds `context` (prefilled unrecorded); one unrecorded run
/// before them.
pub fn record_prefill(
    engine: &Engine,
    context: &[u32],
    prompt: &[u32],
    runs: usize,
) -> Result<Vec<StepParts>> {
    let threads = rayon::current_num_threads();
    with_decode_cap(threads, || prefills(engine, context, prompt, runs))
}

fn prefills(
    engine: &Engine,
    context: &[u32],
    prompt: &[u32],
    runs: usize,
) -> Result<Vec<StepParts>> {
    let mut out = Vec::with_capacity(runs);
    for run in 0..=runs {
        let mut cache = engine.new_cache(context.len() + prompt.len())?;
        if !context.is_empty() {
            engine.forward(&mut cache, context, 0)?;
        }
        let (logits, step) = record(|| engine.forward(&mut cache, prompt, context.len()));
        logits?;
        if run > 0 {
            out.push(step);
        }
    }
    Ok(out)
}

/// Runs `f` (one forward pass) recorded: its result, and its wall time, regions and parts.
fn record<T>(f: impl FnOnce() -> T) -> (T, StepParts) {
    let ((out, seconds), rec) = record_step(|| {
        let start = std::time::Instant::now();
        let out = f();
        (out, start.elapsed().as_secs_f64())
    });
    let step = StepParts {
        seconds,
        regions: rec.regions,
        parts: rec.parts,
    };
    (out, step)
}

fn argmax(logits: &[f32]) -> u32 {
    ch04_forward::model::argmax(logits) as u32
}

/// The median of `values` (0 for none).
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}
