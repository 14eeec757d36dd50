//! The products' layout, chosen by timing. On a GPU the fastest way to lay out the decode
//! product (`matvec.rs`'s [`Layout`]: how lanes read their blocks, how many rows a lane
//! takes) depends on the GPU and on the model's shapes: a 7B's rows of 4 096 values and
//! SmolLM2's of 576 keep a GPU busy in different ways. So opening a model on a GPU times its
//! own decode step with each of [`CANDIDATES`] and keeps the fastest. Every layout gives the
//! same bits (`tests/matvec.rs`), so the choice changes the speed and nothing else.

use std::time::{Duration, Instant};

use crate::bind::Shaders;
use crate::gpu::{Gpu, Result};
use crate::matvec::{CANDIDATES, Layout, MatVec, Reduction};
use crate::model::GpuModel;
use crate::step::Decoder;

/// A layout's steps are timed for about this long (after [`WARM`] steps untimed), at least
/// [`LEAST_STEPS`] and at most [`MOST_STEPS`] of them.
const BUDGET: Duration = Duration::from_millis(60);
const WARM: usize = 2;
const LEAST_STEPS: usize = 2;
const MOST_STEPS: usize = 32;

/// A step's shaders for a model, and what choosing their layout found.
pub struct Tuned {
    pub shaders: Shaders,
    /// Each layout tried and its decode steps a second, in [`CANDIDATES`]' order; empty
    /// where nothing was tried ([`Layout::tuning`]).
    pub tried: Vec<(Layout, f64)>,
}

/// The shaders for `model` on `gpu`, with the adapter's own reduction and, where
/// [`Layout::tuning`] says so, the layout of [`CANDIDATES`] under which the model's decode
/// step ran fastest.
pub fn shaders_for(gpu: &Gpu, model: &GpuModel) -> Result<Tuned> {
    let reduction = Reduction::for_gpu(gpu)?;
    if Layout::tuning(gpu, reduction)? {
        return fastest(gpu, model, reduction, &CANDIDATES);
    }
    Ok(Tuned {
        shaders: Shaders::with(gpu, reduction)?,
        tried: Vec::new(),
    })
}

// ANCHOR: tune
/// The shaders for `model` with `reduction`, their products in whichever of `layouts` ran
/// the model's decode step fastest (the reduction's own layout where none ran, or the
/// model's positions are too few to time). A layout that fails to compile or to run here is
/// left out of `tried`.
pub fn fastest(
    gpu: &Gpu,
    model: &GpuModel,
    reduction: Reduction,
    layouts: &[Layout],
) -> Result<Tuned> {
    let mut shaders = Shaders::with(gpu, reduction)?;
    if model.max_pos < WARM + MOST_STEPS {
        return Ok(Tuned {
            shaders,
            tried: Vec::new(),
        });
    }
    let mut timed = Vec::new();
    let formats = model.formats();
    for &layout in layouts {
        // a layout this adapter cannot compile or run is passed over, not fatal
        let Ok(candidate) = MatVec::for_formats(gpu, reduction, layout, &formats) else {
            continue;
        };
        let own = std::mem::replace(&mut shaders.matvec, candidate);
        let rate = steps_a_second(gpu, &shaders, model);
        let candidate = std::mem::replace(&mut shaders.matvec, own);
        if let Ok(rate) = rate {
            timed.push((layout, rate, candidate));
        }
    }
    let tried = timed.iter().map(|(l, rate, _)| (*l, *rate)).collect();
    if let Some(best) = (0..timed.len()).max_by(|&a, &b| timed[a].1.total_cmp(&timed[b].1)) {
        shaders.matvec = timed.swap_remove(best).2;
    }
    Ok(Tuned { shaders, tried })
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
