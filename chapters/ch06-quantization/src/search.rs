//! Choosing the scale: round-to-nearest from the block's extremes, or a small search.
//!
//! The quantizers of [`crate::quantize`] fix the scale so the block's extremes land exactly
//! on the outermost levels. That never clips, but it is not the scale with the smallest
//! error: shrinking it a little makes the levels finer for the 31 ordinary values, at the
//! price of clipping the extreme one. The search below tries a few scales around the
//! absmax one (and, for Q4_1, a few minimums) and keeps whichever block has the smallest
//! squared error after dequantization, with the scale rounded to f16 as it will be stored.
//! llama.cpp's reference quantizers do not search (its K-quants and imatrix do, more
//! cleverly); this is the simplest version of the idea, measured in the book.

use crate::blocks::{BlockQ4_0, BlockQ4_1, BlockQ8_0, QK};
use crate::f16::{f32_to_f16, round_f16};
use crate::quantize::{
    dequantize_q4_0, dequantize_q4_1, dequantize_q8_0, quantize_q4_0, quantize_q4_1, quantize_q8_0,
};

/// How a block's scale is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleRule {
    /// From the extremes, as llama.cpp's reference quantizers do.
    Absmax,
    /// The best of a few scales around that one, by squared error.
    Search,
}

/// The scales tried: the absmax scale times 0.70, 0.72, …, 1.00.
const STEPS: usize = 16;
fn factor(k: usize) -> f32 {
    0.70 + 0.02 * k as f32
}

fn sse(x: &[f32; QK], y: &[f32; QK]) -> f32 {
    x.iter().zip(y).map(|(a, b)| (a - b) * (a - b)).sum()
}

// ANCHOR: search_q4_0
/// Q4_0 with the scale that minimises the block's squared error, among the absmax scale
/// and `STEPS` smaller ones. Values beyond the outermost level are clipped to it.
pub fn search_q4_0(x: &[f32; QK], out: &mut [u8; BlockQ4_0::BYTES]) {
    quantize_q4_0(x, out); // the absmax block: the one to beat
    let mut back = [0.0; QK];
    dequantize_q4_0(BlockQ4_0(out), &mut back);
    let mut best = sse(x, &back);
    let d0 = BlockQ4_0(out).scale(); // signed: the largest magnitude maps to level 0
    let mut trial = [0u8; BlockQ4_0::BYTES];
    for k in 0..STEPS {
        let d = round_f16(d0 * factor(k)); // the scale as it will be stored
        if d == 0.0 {
            continue;
        }
        trial[..2].copy_from_slice(&f32_to_f16(d).to_le_bytes());
        for j in 0..QK / 2 {
            let level = |v: f32| ((v / d).round() + 8.0).clamp(0.0, 15.0) as u8;
            trial[2 + j] = level(x[j]) | (level(x[j + QK / 2]) << 4);
        }
        dequantize_q4_0(BlockQ4_0(&trial), &mut back);
        let e = sse(x, &back);
        if e < best {
            best = e;
            *out = trial;
        }
    }
}
// ANCHOR_END: search_q4_0

/// Q4_1, searching the range: the minimum raised and the maximum lowered by a few steps
/// of 2% of the range each, keeping the pair with the smallest squared error.
pub fn search_q4_1(x: &[f32; QK], out: &mut [u8; BlockQ4_1::BYTES]) {
    quantize_q4_1(x, out);
    let mut back = [0.0; QK];
    dequantize_q4_1(BlockQ4_1(out), &mut back);
    let mut best = sse(x, &back);
    let min = x.iter().copied().fold(f32::MAX, f32::min);
    let max = x.iter().copied().fold(-f32::MAX, f32::max);
    let range = max - min;
    let mut trial = [0u8; BlockQ4_1::BYTES];
    for lo in 0..6 {
        for hi in 0..6 {
            let m = round_f16(min + range * 0.02 * lo as f32);
            let d = round_f16((max - range * 0.02 * hi as f32 - m) / 15.0);
            if d <= 0.0 {
                continue;
            }
            trial[..2].copy_from_slice(&f32_to_f16(d).to_le_bytes());
            trial[2..4].copy_from_slice(&f32_to_f16(m).to_le_bytes());
            for j in 0..QK / 2 {
                let level = |v: f32| ((v - m) / d).round().clamp(0.0, 15.0) as u8;
                trial[4 + j] = level(x[j]) | (level(x[j + QK / 2]) << 4);
            }
            dequantize_q4_1(BlockQ4_1(&trial), &mut back);
            let e = sse(x, &back);
            if e < best {
                best = e;
                *out = trial;
            }
        }
    }
}

/// Q8_0 with a searched scale (at 8 bits the gain is small: the book measures it).
pub fn search_q8_0(x: &[f32; QK]) -> BlockQ8_0 {
    let mut best_block = quantize_q8_0(x);
    let mut back = [0.0; QK];
    dequantize_q8_0(&best_block, &mut back);
    let mut best = sse(x, &back);
    let d0 = best_block.scale();
    for k in 0..STEPS {
        let d = round_f16(d0 * factor(k));
        if d == 0.0 {
            continue;
        }
        let trial = BlockQ8_0 {
            d: f32_to_f16(d),
            qs: std::array::from_fn(|j| (x[j] / d).round().clamp(-127.0, 127.0) as i8),
        };
        dequantize_q8_0(&trial, &mut back);
        let e = sse(x, &back);
        if e < best {
            best = e;
            best_block = trial;
        }
    }
    best_block
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(x: &[f32; QK]) -> (f32, f32) {
        let (mut a, mut s) = ([0u8; 18], [0u8; 18]);
        quantize_q4_0(x, &mut a);
        search_q4_0(x, &mut s);
        let (mut ya, mut ys) = ([0.0; QK], [0.0; QK]);
        dequantize_q4_0(BlockQ4_0(&a), &mut ya);
        dequantize_q4_0(BlockQ4_0(&s), &mut ys);
        (sse(x, &ya), sse(x, &ys))
    }

    #[test]
    fn search_is_never_worse_and_helps_with_an_outlier() {
        for seed in 0..50 {
            let v = ch01_tensors::random::uniform(QK, seed);
            let x: [f32; QK] = std::array::from_fn(|j| v[j]);
            let (absmax, searched) = errors(&x);
            assert!(
                searched <= absmax,
                "seed {seed}: search made it worse ({searched} > {absmax})"
            );
        }
        // One value far out: the absmax scale spends its levels on it; a smaller scale,
        // clipping it a little, fits the other 31 better.
        let x: [f32; QK] = std::array::from_fn(|j| {
            if j == 0 {
                1.0
            } else {
                0.1 * ((j as f32) * 0.7).sin()
            }
        });
        let (absmax, searched) = errors(&x);
        assert!(searched < 0.9 * absmax, "{searched} vs {absmax}");
    }
}
