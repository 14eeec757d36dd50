//! Where a decode step's time goes, part by part: each kind of product (Q, K and V together,
//! the output projection, gate and up together, down, the LM head) and the attention, each
//! timed from its caller's start to its join (chapter 7's `team::timed`, which the engine's
//! products and attention go through), and the rest of the step (norms, RoPE, the residual
//! adds, the embedding row): the step's wall time less its parts.
//!
//! Set against each other at two thread counts, the parts say which of them gets slower when
//! the threads double, where the step's total alone cannot (`ch08-gguf regions`).

use ch07_simd_parallel::team::{Part, record_step};

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

/// `steps` decode steps in the current pool, each recorded, after `prompt` and one step
/// unrecorded (so that the team exists and its helpers are awake).
pub fn record_decode(engine: &Engine, prompt: &[u32], steps: usize) -> Result<Vec<StepParts>> {
    let mut cache = engine.new_cache(prompt.len() + steps + 1)?;
    let logits = engine.forward(&mut cache, prompt, 0)?;
    let mut next = ch04_forward::model::argmax(&logits) as u32;
    let logits = engine.forward(&mut cache, &[next], prompt.len())?;
    next = ch04_forward::model::argmax(&logits) as u32;
    let mut out = Vec::with_capacity(steps);
    for s in 0..steps {
        let pos = prompt.len() + 1 + s;
        let ((logits, seconds), rec) = record_step(|| {
            let start = std::time::Instant::now();
            let logits = engine.forward(&mut cache, &[next], pos);
            (logits, start.elapsed().as_secs_f64())
        });
        next = ch04_forward::model::argmax(&logits?) as u32;
        out.push(StepParts {
            seconds,
            regions: rec.regions,
            parts: rec.parts,
        });
    }
    Ok(out)
}

/// The median of `values` (0 for none).
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}
