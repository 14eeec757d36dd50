//! The CPU's side of the product tests (`matvec.rs`, `split.rs`): each row's product by
//! chapters 6 and 7's scalar dots on the same blocks, and how far from it the GPU's may be.
//! Each test file uses some of it.
//!
//! The tolerance, derived. The GPU multiplies the very blocks the CPU does: the input is
//! quantized by chapter 6's functions on the host (`acts::quantize`), so each block's
//! integer dot `sumi` is the same integer on both, and each block's term
//! `t_b = sumi·(d_w·d_a)` (Q4_1: `(d_w·d_a)·sumi + m·s`) is the same few float operations.
//! Two things differ:
//! 1. the order the `n` terms of a row are added in (the CPU left to right, the GPU in 32
//!    lane sums and a tree). Any order of `n − 1` additions in f32 is within
//!    `γ(n−1)·Σ|t_b|` of the exact sum (Higham, *Accuracy and Stability of Numerical
//!    Algorithms*, §4.2), `γ(k) = k·u/(1 − k·u)`, `u = 2⁻²⁴`; the CPU's and the GPU's
//!    results are each that close to it, so within twice that of each other;
//! 2. a shader compiler may fuse a multiply and an add (an FMA), which rounds once where
//!    the CPU rounds twice: at most 2 roundings per term, `2u·|parts of t_b|`.
//!
//! So `|gpu − cpu| ≤ (2·γ(n−1) + 2u)·Σ_b mag_b`, with `mag_b` the magnitudes of a term's
//! parts; [`bound`] computes it per row, rounded up by 1% for γ's denominator.
//!
//! The K-quants (Q4_K, Q6_K) adapt it. The CPU (chapter 7's `dot_q4_k_q8_k`) adds a whole
//! super-block's integers first, `Q = Σ_s scale_s·dot_s` and `Mi = Σ_s min_s·sum_s`, and
//! rounds once per super-block: `(d·d_a)·Q − (dmin·d_a)·Mi`. The GPU takes one block of 32 (a
//! sub-block) per step, with the same exact integers for that sub-block, so it adds the
//! parts `D·q_s` and `−M·m_s` (`D = d·d_a`, `M = dmin·d_a`, the same f32 products on both)
//! one sub-block at a time. Both are sums of the same exact parts `p`: the GPU's P of them
//! (two a sub-block for Q4_K, one for Q6_K), the CPU's fewer, grouped by super-block.
//! Each part costs at most two roundings (integer to f32, the multiply; an FMA only removes
//! one), and at most P − 1 additions join them, so each side is within `γ(P+1)·Σ|p|` of
//! the exact sum (Higham §3.1 and §4.2; `|D·Q| ≤ Σ_s |D·q_s|` covers the CPU's grouping):
//! `|gpu − cpu| ≤ 2·γ(P+1)·Σ|p|`. [`cpu_row`] gets every `|p|` from the CPU's own dot on a
//! copy of the activations with all but one sub-block (or its sums) zeroed.

#![allow(dead_code)] // each test file uses a part

pub mod e2e;

use ch06_quantization::Format;
use ch06_quantization::blocks::{BlockQ4_1, BlockQ8_0, BlockQ8_1, QK};
use ch06_quantization::dot::{dot_q4_0_q8_0, dot_q4_1_q8_1, dot_q8_0_q8_0};
use ch06_quantization::quantize::{quantize_q8_0, quantize_q8_1};
use ch07_simd_parallel::layout::kquant::{
    BlockQ8K, Q8_0Wide, QK_K, dot_q4_k_q8_k, dot_q5_0_q8_0, dot_q6_k_q8_k, quantize_q8_k,
};
use ch13_gpu::{Gpu, GpuMatrix, MatVec, matvec};

pub fn gpu() -> Gpu {
    Gpu::open().unwrap_or_else(|e| {
        panic!("{e}\nthe GPU tests need a Vulkan adapter; run: bash scripts/test-deps.sh")
    })
}

/// The largest |a − b| over two rows of values (logits, attention outputs).
pub fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// One row's CPU product (chapter 6's dot, left to right) and `Σ mag_b`.
pub fn cpu_row(format: Format, row: &[u8], x: &[f32]) -> (f32, f64) {
    let nb = row.len() / format.block_bytes();
    let bb = format.block_bytes();
    let xs = x.as_chunks::<QK>().0;
    let mut mag = 0.0f64;
    let value = match format {
        Format::Q4_0 | Format::Q8_0 => {
            let a: Vec<BlockQ8_0> = xs.iter().map(quantize_q8_0).collect();
            let dot = if format == Format::Q4_0 {
                dot_q4_0_q8_0
            } else {
                dot_q8_0_q8_0
            };
            for b in 0..nb {
                mag += f64::from(dot(&row[b * bb..(b + 1) * bb], &a[b..b + 1]).abs());
            }
            dot(row, &a)
        }
        Format::Q4_1 => {
            let a: Vec<BlockQ8_1> = xs.iter().map(quantize_q8_1).collect();
            for b in 0..nb {
                let block = &row[b * bb..(b + 1) * bb];
                let t = dot_q4_1_q8_1(block, &a[b..b + 1]);
                let ms = BlockQ4_1(block.try_into().unwrap()).min() * a[b].sum();
                mag += f64::from((t - ms).abs()) + f64::from(ms.abs());
            }
            dot_q4_1_q8_1(row, &a)
        }
        Format::Q5_0 => {
            // chapter 7's scalar Q5_0 block dot, added left to right as chapter 6's dots add
            let mut sum = 0.0f32;
            for (b, x) in xs.iter().enumerate().take(nb) {
                let t = dot_q5_0_q8_0(
                    &row[b * bb..(b + 1) * bb],
                    &Q8_0Wide::from(&quantize_q8_0(x)),
                );
                mag += f64::from(t.abs());
                sum += t;
            }
            sum
        }
        Format::Q4_K | Format::Q6_K => {
            let dot = if format == Format::Q4_K {
                dot_q4_k_q8_k
            } else {
                dot_q6_k_q8_k
            };
            let a: Vec<BlockQ8K> = x.as_chunks::<QK_K>().0.iter().map(quantize_q8_k).collect();
            // the super-blocks' terms added left to right, as chapter 7's scalar row dot does
            let mut sum = 0.0f32;
            for (b, a) in a.iter().enumerate() {
                let block = &row[b * bb..(b + 1) * bb];
                sum += dot(block, a);
                mag += k_parts(dot, block, a, format == Format::Q4_K);
            }
            sum
        }
        Format::F32 | Format::Int8 => unreachable!("no shader for {format:?}"),
    };
    (value, mag)
}

/// `Σ|p|` over one K-quant super-block's parts as the GPU adds them (the module's comment):
/// per sub-block of 32, `|D·q_s|` (the CPU's dot with every other sub-block's quants and
/// every sum zeroed) and, for Q4_K, `|M·m_s|` (with every quant and every other sum zeroed).
fn k_parts(dot: fn(&[u8], &BlockQ8K) -> f32, block: &[u8], a: &BlockQ8K, mins: bool) -> f64 {
    let mut mag = 0.0f64;
    for s in 0..8 {
        let mut only = a.clone();
        only.bsums = [0; 16];
        for (l, q) in only.qs.iter_mut().enumerate() {
            if l / 32 != s {
                *q = 0;
            }
        }
        mag += f64::from(dot(block, &only).abs());
        if mins {
            let mut sums = a.clone();
            sums.qs = [0; QK_K];
            for (g, v) in sums.bsums.iter_mut().enumerate() {
                if g / 2 != s {
                    *v = 0;
                }
            }
            mag += f64::from(dot(block, &sums).abs());
        }
    }
    mag
}

/// The largest `|gpu − cpu|` the two orders of summation allow (the module's comment), for
/// a row of `cols` values of `format`.
pub fn bound(format: Format, cols: usize, mag: f64) -> f64 {
    let u = f64::from(f32::EPSILON) / 2.0;
    let gamma = |k: usize| k as f64 * u; // γ's denominator: the 1% below
    let blocks = cols / QK;
    match format {
        Format::Q4_0 | Format::Q8_0 | Format::Q4_1 | Format::Q5_0 => {
            (2.0 * gamma(blocks.max(1) - 1) + 2.0 * u) * mag * 1.01
        }
        // P parts: two a sub-block of 32 (scale and min) for Q4_K, one for Q6_K
        Format::Q4_K => 2.0 * gamma(2 * blocks + 1) * mag * 1.01,
        Format::Q6_K => 2.0 * gamma(blocks + 1) * mag * 1.01,
        Format::F32 | Format::Int8 => unreachable!("no shader for {format:?}"),
    }
}

/// Runs the product on the GPU and checks every row against the CPU's, with a message
/// that names the first row out of bounds.
pub fn check(gpu: &Gpu, shaders: &MatVec, what: &str, m: &GpuMatrix, blocks: &[u8], x: &[f32]) {
    let got = matvec(gpu, shaders, m, x).unwrap_or_else(|e| panic!("{what}: {e}"));
    check_rows(what, m.format, m.rows, m.cols, blocks, x, &got);
}

/// `got`, the GPU's product of `blocks` and `x`, against the CPU's, row by row.
pub fn check_rows(
    what: &str,
    format: Format,
    rows: usize,
    cols: usize,
    blocks: &[u8],
    x: &[f32],
    got: &[f32],
) {
    assert_eq!(got.len(), rows, "{what}: one value per row");
    let row_bytes = format.row_bytes(cols);
    let mut worst = 0.0f64;
    for (r, &g) in got.iter().enumerate() {
        let (want, mag) = cpu_row(format, &blocks[r * row_bytes..(r + 1) * row_bytes], x);
        let diff = (f64::from(g) - f64::from(want)).abs();
        let allowed = bound(format, cols, mag);
        assert!(
            diff <= allowed,
            "{what}: row {r} of {}: the GPU gives {g}, the CPU {want}; they differ by {diff:e}, \
             more than the {allowed:e} a different order of f32 additions can explain",
            rows
        );
        if allowed > 0.0 {
            worst = worst.max(diff / allowed);
        }
    }
    eprintln!("{what}: {rows} rows agree, worst at {worst:.3} of the bound");
}
