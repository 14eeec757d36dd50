//! Quantizing and dequantizing blocks, with llama.cpp's rounding rules.
//!
//! Each `quantize_*` here computes exactly what llama.cpp's reference quantizer
//! (`quantize_row_*_ref` in `ggml-quants.c`) computes, operation for operation in f32, so
//! its bytes are the same: the tests check them against the `gguf` Python package's
//! quantizers, and against the blocks shipped in SmolLM2's file.
//!
//! The one rule all of them share: pick a scale from the block's extremes, divide, round.
//! `x.round()` in Rust is C's `roundf` (halves away from zero), which Q8_0 uses; the 4-bit
//! formats add 0.5 (or 8.5) and truncate, as llama.cpp's C does.

use crate::blocks::{BlockQ4_0, BlockQ4_1, BlockQ8_0, BlockQ8_1, QK};
use crate::f16::{f16_to_f32, f32_to_f16};

/// `1/d`, or 0 for an all-zero block (whose quants are then all zero).
fn inverse(d: f32) -> f32 {
    if d != 0.0 { 1.0 / d } else { 0.0 }
}

/// The largest magnitude in the block.
fn amax(x: &[f32; QK]) -> f32 {
    x.iter().fold(0.0f32, |m, v| m.max(v.abs()))
}

// ANCHOR: quantize_q8_0
/// Symmetric 8-bit: `d = max|x| / 127`, `q = round(x / d)`. The largest value lands
/// exactly on ±127; nothing is clipped.
pub fn quantize_q8_0(x: &[f32; QK]) -> BlockQ8_0 {
    let d = amax(x) / 127.0;
    let id = inverse(d);
    BlockQ8_0 {
        d: f32_to_f16(d),
        qs: std::array::from_fn(|j| (x[j] * id).round() as i8),
    }
}
// ANCHOR_END: quantize_q8_0

// ANCHOR: quantize_q8_1
/// Q8_0's rule, plus `s = d · Σq`: what a Q4_1 dot product needs (see [`crate::dot`]).
pub fn quantize_q8_1(x: &[f32; QK]) -> BlockQ8_1 {
    let d = amax(x) / 127.0;
    let id = inverse(d);
    let qs: [i8; QK] = std::array::from_fn(|j| (x[j] * id).round() as i8);
    let sum: i32 = qs.iter().map(|&q| i32::from(q)).sum();
    BlockQ8_1 {
        d: f32_to_f16(d),
        s: f32_to_f16(sum as f32 * d),
        qs,
    }
}
// ANCHOR_END: quantize_q8_1

// ANCHOR: quantize_q4_0
/// Symmetric 4-bit: sixteen levels `d · (q − 8)`, q in 0..=15. The value with the largest
/// magnitude, `max` (with its sign), maps to level −8 exactly, `d = max / −8`; the other
/// end reaches only +7, so the sign of `d` decides which side gets the extra level.
pub fn quantize_q4_0(x: &[f32; QK], out: &mut [u8; BlockQ4_0::BYTES]) {
    let mut max = 0.0f32; // the value of largest magnitude, signed
    for &v in x {
        if v.abs() > max.abs() {
            max = v;
        }
    }
    let d = max / -8.0;
    let id = inverse(d);
    out[..2].copy_from_slice(&f32_to_f16(d).to_le_bytes());
    for j in 0..QK / 2 {
        let lo = ((x[j] * id + 8.5) as i8).min(15) as u8; // truncation after +0.5: rounding
        let hi = ((x[j + QK / 2] * id + 8.5) as i8).min(15) as u8;
        out[2 + j] = lo | (hi << 4);
    }
}
// ANCHOR_END: quantize_q4_0

// ANCHOR: quantize_q4_1
/// Asymmetric 4-bit: sixteen levels from the block's minimum to its maximum,
/// `m = min`, `d = (max − min) / 15`, `q = round((x − m) / d)`. A block of only positive
/// (or only negative) values wastes no level on the side it doesn't use.
pub fn quantize_q4_1(x: &[f32; QK], out: &mut [u8; BlockQ4_1::BYTES]) {
    let min = x.iter().copied().fold(f32::MAX, f32::min);
    let max = x.iter().copied().fold(-f32::MAX, f32::max);
    let d = (max - min) / 15.0;
    let id = inverse(d);
    out[..2].copy_from_slice(&f32_to_f16(d).to_le_bytes());
    out[2..4].copy_from_slice(&f32_to_f16(min).to_le_bytes());
    for j in 0..QK / 2 {
        let lo = (((x[j] - min) * id + 0.5) as i8).min(15) as u8;
        let hi = (((x[j + QK / 2] - min) * id + 0.5) as i8).min(15) as u8;
        out[4 + j] = lo | (hi << 4);
    }
}
// ANCHOR_END: quantize_q4_1

// ANCHOR: dequantize
/// The 32 values a Q8_0 block stands for.
pub fn dequantize_q8_0(b: &BlockQ8_0, out: &mut [f32; QK]) {
    let d = f16_to_f32(b.d);
    for (o, &q) in out.iter_mut().zip(&b.qs) {
        *o = f32::from(q) * d;
    }
}

/// The 32 values a Q4_0 block stands for: `d · (q − 8)`.
pub fn dequantize_q4_0(b: BlockQ4_0<'_>, out: &mut [f32; QK]) {
    let d = b.scale();
    for (j, o) in out.iter_mut().enumerate() {
        *o = (f32::from(b.quant(j)) - 8.0) * d;
    }
}

/// The 32 values a Q4_1 block stands for: `d · q + m`.
pub fn dequantize_q4_1(b: BlockQ4_1<'_>, out: &mut [f32; QK]) {
    let (d, m) = (b.scale(), b.min());
    for (j, o) in out.iter_mut().enumerate() {
        *o = f32::from(b.quant(j)) * d + m;
    }
}
// ANCHOR_END: dequantize

/// Q8_1's values (its sum is not needed to dequantize).
pub fn dequantize_q8_1(b: &BlockQ8_1, out: &mut [f32; QK]) {
    let d = f16_to_f32(b.d);
    for (o, &q) in out.iter_mut().zip(&b.qs) {
        *o = f32::from(q) * d;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(f: impl Fn(usize) -> f32) -> [f32; QK] {
        std::array::from_fn(f)
    }

    #[test]
    fn q8_0_hits_the_extremes_exactly() {
        let x = block(|j| j as f32 - 10.0); // -10..=21
        let b = quantize_q8_0(&x);
        assert_eq!(b.qs[31], 127, "the largest magnitude maps to 127");
        assert_eq!(b.qs[10], 0);
        let mut back = [0.0; QK];
        dequantize_q8_0(&b, &mut back);
        let step = f16_to_f32(b.d);
        for (a, o) in x.iter().zip(&back) {
            assert!(
                (a - o).abs() <= step / 2.0 * 1.01,
                "{a} came back as {o} (step {step})"
            );
        }
    }

    #[test]
    fn zero_block_is_all_zero() {
        let x = [0.0; QK];
        assert_eq!(quantize_q8_0(&x), BlockQ8_0 { d: 0, qs: [0; QK] });
        let mut q4 = [0xffu8; 18];
        quantize_q4_0(&x, &mut q4);
        // d = 0 / -8 is -0.0 in IEEE arithmetic, and llama.cpp stores it as such: f16 0x8000.
        assert_eq!(
            q4,
            [
                0x00, 0x80, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88,
                0x88, 0x88, 0x88, 0x88
            ]
        );
        let mut q41 = [0xffu8; 20];
        quantize_q4_1(&x, &mut q41);
        assert_eq!(q41, [0; 20]);
    }

    #[test]
    fn q4_0_gives_the_extra_level_to_the_largest_magnitude() {
        let x = block(|j| if j == 3 { -4.0 } else { 0.5 });
        let mut b = [0u8; 18];
        quantize_q4_0(&x, &mut b);
        let view = BlockQ4_0(&b);
        assert_eq!(view.scale(), 0.5, "d = max / -8 = -4 / -8");
        assert_eq!(view.quant(3), 0, "-4 = 0.5 · (0 − 8)");
        assert_eq!(view.quant(0), 9, "0.5 = 0.5 · (9 − 8)");
    }

    #[test]
    fn q4_1_spans_min_to_max() {
        let x = block(|j| 1.0 + j as f32 * 0.5); // 1.0 ..= 16.5
        let mut b = [0u8; 20];
        quantize_q4_1(&x, &mut b);
        let view = BlockQ4_1(&b);
        assert_eq!(view.min(), 1.0);
        assert_eq!(view.quant(0), 0);
        assert_eq!(view.quant(31), 15);
        let mut back = [0.0; QK];
        dequantize_q4_1(view, &mut back);
        assert!(
            (back[31] - 16.5).abs() < 0.01,
            "the maximum comes back: {}",
            back[31]
        );
    }

    #[test]
    fn q8_1_sum_is_the_sum_of_the_quants_times_d() {
        let x = block(|j| (j as f32).sin());
        let b = quantize_q8_1(&x);
        let sum: i32 = b.qs.iter().map(|&q| i32::from(q)).sum();
        // llama.cpp multiplies by the f32 scale, before it is rounded to f16.
        let d = x.iter().fold(0.0f32, |m, v| m.max(v.abs())) / 127.0;
        assert_eq!(b.s, f32_to_f16(sum as f32 * d));
        assert!((b.sum() - x.iter().sum::<f32>()).abs() < 0.1);
        assert_eq!(b.qs, quantize_q8_0(&x).qs, "same quants as Q8_0");
    }
}
