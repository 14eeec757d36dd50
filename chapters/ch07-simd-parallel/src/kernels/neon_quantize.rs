//! The activations' quantization on 64-bit ARM, 4 lanes at a time: chapter 6's
//! `quantize_q8_0` and `quantize_q8_1`, bit for bit, compiled for NEON (and run on both ARM
//! levels).
//!
//! Every public function here enables its level's features: calling it on a CPU without them
//! is undefined behaviour, which is why the only caller is [`super::Arm`], which exists only
//! after the CPU said yes.

#![cfg(target_arch = "aarch64")]
// As in the x86 files: every public function's one safety condition is the module's.
#![allow(clippy::missing_safety_doc)]

use std::arch::aarch64::*;

use ch06_quantization::blocks::{BlockQ8_0, BlockQ8_1, QK};
use ch06_quantization::f16::f32_to_f16;

// ANCHOR: quantize
/// One block of activations quantized as chapter 6's `quantize_q8_0` does, bit for bit: the
/// largest magnitude by a vector max, then `round(x · (1/d))` 4 lanes at a time. NEON has the
/// rounding chapter 6 wants in one instruction: `fcvtas` converts to an integer rounding
/// halves away from zero (C's `roundf`); `fmaxnm` ignores a NaN as Rust's `f32::max` does.
/// Returns `(d, quants, Σ quants)`.
#[target_feature(enable = "neon")]
fn quantize_block(x: &[f32; QK]) -> (f32, [i8; QK], i32) {
    // SAFETY: `x` is 32 readable f32; NEON loads need no alignment.
    let v: [float32x4_t; 8] = std::array::from_fn(|i| unsafe { vld1q_f32(x.as_ptr().add(4 * i)) });
    let m = v
        .iter()
        .fold(vdupq_n_f32(0.0), |m, &vi| vmaxnmq_f32(m, vabsq_f32(vi)));
    let amax = vmaxnmvq_f32(m); // max is exact in any order
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut qs = [0i8; QK];
    let mut sum = vdupq_n_s32(0);
    for (i, pair) in v.chunks_exact(2).enumerate() {
        let q0 = vcvtaq_s32_f32(vmulq_n_f32(pair[0], id));
        let q1 = vcvtaq_s32_f32(vmulq_n_f32(pair[1], id));
        sum = vaddq_s32(sum, vaddq_s32(q0, q1));
        // |q| ≤ 127; the saturating narrows are `as i8`'s saturation in any case.
        let q8 = vqmovn_s16(vcombine_s16(vqmovn_s32(q0), vqmovn_s32(q1)));
        // SAFETY: 8 writable bytes at 8i of `qs`.
        unsafe { vst1_s8(qs.as_mut_ptr().add(8 * i), q8) };
    }
    (d, qs, vaddvq_s32(sum))
}
// ANCHOR_END: quantize

/// Activations to Q8_0 blocks.
#[target_feature(enable = "neon")]
pub fn quantize_q8_0(x: &[f32], out: &mut Vec<BlockQ8_0>) {
    out.clear();
    for b in x.as_chunks::<QK>().0 {
        let (d, qs, _) = quantize_block(b);
        out.push(BlockQ8_0 {
            d: f32_to_f16(d),
            qs,
        });
    }
}

/// Activations to Q8_1 blocks (with `s = d · Σq`).
#[target_feature(enable = "neon")]
pub fn quantize_q8_1(x: &[f32], out: &mut Vec<BlockQ8_1>) {
    out.clear();
    for b in x.as_chunks::<QK>().0 {
        let (d, qs, sum) = quantize_block(b);
        out.push(BlockQ8_1 {
            d: f32_to_f16(d),
            s: f32_to_f16(sum as f32 * d),
            qs,
        });
    }
}
