//! The products' layout, chosen by timing. On a GPU the fastest way to lay out the decode
//! product (`matvec.rs`'s [`Layout`]: how lanes read their blocks, how many rows a lane
//! takes) depends on the GPU and on the model's shapes: a 7B's rows of 4 096 values and
//! SmolLM2's of 576 keep a GPU busy in different ways. So opening a model on a GPU times its
//! own decode step with each of [`CANDIDATES`] and keeps the fastest, then its prefill with
//! each [`Tiling`] of the tiled product. Every layout and tiling gives the same bits
//! (`tests/matvec.rs`, `tests/matmul.rs`), so the choice changes the speed and nothing else.

use std::time::{Duration, Instant};

use crate::bind::Shaders;
use crate::gpu::{Gpu, Result};
use crate::matmul::{MatMul, Tiling};
use crate::matvec::{CANDIDATES, Layout, MatVec, Reduction};
use crate::model::GpuModel;
use crate::step::{CHUNK, Decoder};

/// A layout's steps are timed for about this long (after [`WARM`] steps untimed), at least
/// [`LEAST_STEPS`] and at most [`MOST_STEPS`] of them.
const BUDGET: Duration = Duration::from_millis(60);
const WARM: usize = 2;
const LEAST_STEPS: usize = 2;
const MOST_STEPS: usize = 32;

/// What [`fastest`] tries: the products' layouts, the tiled products' tilings, and the
/// tokens of the prefill it times them with.
pub struct Trials<'a> {
    pub layouts: &'a [Layout],
    pub tilings: &'a [Tiling],
    pub prompt: usize,
}

/// What a model opened on a GPU tries: every candidate layout, both tilings, and a prompt
/// of one whole prefill submission ([`CHUNK`] tokens), so that the tilings are timed on the
/// grid a long prompt's prefill runs (a short one leaves most of a large GPU idle, and
/// times the dispatches' floor rather than the tiles).
pub const ON_A_GPU: Trials<'static> = Trials {
    layouts: &CANDIDATES,
    tilings: &Tiling::ALL,
    prompt: CHUNK,
};

/// A step's shaders for a model, and what choosing their layout and tiling found.
pub struct Tuned {
    pub shaders: Shaders,
    /// Each layout tried and its decode steps a second, in the order tried; empty where
    /// nothing was tried ([`Layout::tuning`]).
    pub tried: Vec<(Layout, f64)>,
    /// Each tiling tried and its prefill's tokens a second.
    pub tilings: Vec<(Tiling, f64)>,
}

/// The shaders for `model` on `gpu`, with the adapter's own reduction and, where
/// [`Layout::tuning`] says so, the layout of [`CANDIDATES`] under which the model's decode
/// step ran fastest; `progress` hears when the timing begins (a CPU driver keeps its own
/// layout, untimed).
pub fn shaders_for(gpu: &Gpu, model: &GpuModel, progress: &mut dyn FnMut(&str)) -> Result<Tuned> {
    let reduction = Reduction::for_gpu(gpu)?;
    if Layout::tuning(gpu, reduction)? {
        progress("the products' layout and tiling");
        return fastest(gpu, model, reduction, &ON_A_GPU);
    }
    Ok(Tuned {
        shaders: Shaders::with(gpu, reduction)?,
        tried: Vec::new(),
        tilings: Vec::new(),
    })
}

/// The shaders for `model` with `reduction`, their products in whichever of the trials'
/// layouts ran the model's decode step fastest, then their tiled products in whichever
/// tiling ran its prefill fastest (the reduction's own where none ran, or the model's
/// positions are too few to time). One that fails to compile or to run here is left out.
pub fn fastest(
    gpu: &Gpu,
    model: &GpuModel,
    reduction: Reduction,
    trials: &Trials,
) -> Result<Tuned> {
    // the adapter's own layout, kept where no candidate runs
    let mut shaders = Shaders::for_formats(gpu, reduction, &model.formats())?;
    let (mut tried, mut tilings) = (Vec::new(), Vec::new());
    if model.max_pos >= (WARM + MOST_STEPS).max(trials.prompt) {
        tried = fastest_layout(gpu, model, reduction, trials.layouts, &mut shaders);
        tilings = fastest_tiling(gpu, model, trials, &mut shaders)?;
    }
    Ok(Tuned {
        shaders,
        tried,
        tilings,
    })
}

// ANCHOR: tune
/// Times `model`'s decode step with each of `layouts` in `shaders` and leaves the fastest
/// there: each layout and its steps a second.
fn fastest_layout(
    gpu: &Gpu,
    model: &GpuModel,
    reduction: Reduction,
    layouts: &[Layout],
    shaders: &mut Shaders,
) -> Vec<(Layout, f64)> {
    let mut timed = Vec::new();
    let formats = model.formats();
    for &layout in layouts {
        // a layout this adapter cannot compile or run is passed over, not fatal
        let Ok(candidate) = MatVec::for_formats(gpu, reduction, layout, &formats) else {
            continue;
        };
        let own = std::mem::replace(&mut shaders.matvec, candidate);
        let rate = steps_a_second(gpu, shaders, model);
        let candidate = std::mem::replace(&mut shaders.matvec, own);
        if let Ok(rate) = rate {
            timed.push((layout, rate, candidate));
        }
    }
    let tried = timed.iter().map(|(l, rate, _)| (*l, *rate)).collect();
    if let Some(best) = (0..timed.len()).max_by(|&a, &b| timed[a].1.total_cmp(&timed[b].1)) {
        shaders.matvec = timed.swap_remove(best).2;
    }
    tried
}

/// Greedy decode steps a second of `model` with `shaders`, from an empty cache, two in
/// flight as the generator runs them; the GPU idle again before and after.
fn steps_a_second(gpu: &Gpu, shaders: &Shaders, model: &GpuModel) -> Result<f64> {
    let decoder = Decoder::with_chunk(gpu, shaders, model, WARM + MOST_STEPS, 1)?;
    decoder.greedy(0, 0, WARM, &mut |_| true)?;
    gpu.wait()?;
    let start = Instant::now();
    let (mut heard, mut last) = (0, start);
    decoder.greedy(0, WARM, MOST_STEPS, &mut |_| {
        heard += 1;
        last = Instant::now();
        heard < LEAST_STEPS || start.elapsed() < BUDGET
    })?;
    gpu.wait()?; // the step left queued
    Ok(heard as f64 / (last - start).as_secs_f64().max(1e-9))
}
// ANCHOR_END: tune

/// Times `model`'s prefill of `trials.prompt` tokens with each tiling in `shaders` and
/// leaves the fastest there: each tiling and its tokens a second.
fn fastest_tiling(
    gpu: &Gpu,
    model: &GpuModel,
    trials: &Trials,
    shaders: &mut Shaders,
) -> Result<Vec<(Tiling, f64)>> {
    let mut timed = Vec::new();
    for &tiling in trials.tilings {
        let own = std::mem::replace(&mut shaders.matmul, MatMul::with(gpu, tiling)?);
        let rate = prefill_tokens_a_second(gpu, shaders, model, trials.prompt);
        let candidate = std::mem::replace(&mut shaders.matmul, own);
        if let Ok(rate) = rate {
            timed.push((tiling, rate, candidate));
        }
    }
    let tilings = timed.iter().map(|(t, rate, _)| (*t, *rate)).collect();
    // the one timed, its pipelines compiled as its prefill used them
    if let Some(best) = (0..timed.len()).max_by(|&a, &b| timed[a].1.total_cmp(&timed[b].1)) {
        shaders.matmul = timed.swap_remove(best).2;
    }
    Ok(tilings)
}

/// Prompt tokens a second of `model`'s prefill with `shaders`: `prompt` tokens as one
/// piece, once untimed, then again for about [`BUDGET`].
fn prefill_tokens_a_second(
    gpu: &Gpu,
    shaders: &Shaders,
    model: &GpuModel,
    prompt: usize,
) -> Result<f64> {
    let decoder = Decoder::with_chunk(gpu, shaders, model, prompt, prompt)?;
    let ids = vec![0; prompt];
    decoder.prefill(&ids, 0, false)?;
    let start = Instant::now();
    let mut runs = 0;
    while runs < LEAST_STEPS || (start.elapsed() < BUDGET && runs < MOST_STEPS) {
        decoder.prefill(&ids, 0, false)?;
        runs += 1;
    }
    Ok((runs * prompt) as f64 / start.elapsed().as_secs_f64().max(1e-9))
}
