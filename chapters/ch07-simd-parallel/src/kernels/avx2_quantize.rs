//! The activations' quantization on x86, 8 lanes at a time: chapter 6's `quantize_q8_0`
//! and `quantize_q8_1`, bit for bit, compiled for AVX2 (and run on both x86 levels).
//!
//! Every public function here enables its level's features: calling it on a CPU without them
//! is undefined behaviour, which is why the only caller is [`super::X86`], which exists only
//! after the CPU said yes.

#![cfg(target_arch = "x86_64")]
// Every public function here has one safety condition, the module's: the CPU must have the
// features its `#[target_feature]` names. It is stated once, above, not per function.
#![allow(clippy::missing_safety_doc)]

use std::arch::x86_64::*;

use ch06_quantization::blocks::{BlockQ8_0, BlockQ8_1, QK};

use super::x86_helpers::hsum;

// ANCHOR: quantize
/// `x · id` rounded half away from zero (Rust's `round`, C's `roundf`), 8 lanes at a time.
/// AVX's own rounding instruction rounds halves to even, so: truncate, and step one away
/// from zero where the dropped fraction is at least one half (the subtraction is exact).
#[target_feature(enable = "avx2,fma,f16c")]
fn round_away(v: __m256) -> __m256i {
    let t = _mm256_round_ps::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(v);
    let frac = _mm256_sub_ps(v, t);
    let abs = _mm256_andnot_ps(_mm256_set1_ps(-0.0), frac);
    let step = _mm256_and_ps(
        _mm256_cmp_ps::<_CMP_GE_OQ>(abs, _mm256_set1_ps(0.5)),
        _mm256_set1_ps(1.0),
    );
    let signed_step = _mm256_or_ps(step, _mm256_and_ps(v, _mm256_set1_ps(-0.0))); // ±1 or ±0
    _mm256_cvttps_epi32(_mm256_add_ps(t, signed_step))
}

/// One block of activations quantized as chapter 6's `quantize_q8_0` does, bit for bit:
/// the largest magnitude by a vector max, then `round(x · (1/d))` 8 lanes at a time.
/// Returns `(d, quants, Σ quants)`.
#[target_feature(enable = "avx2,fma,f16c")]
fn quantize_block(x: &[f32; QK]) -> (f32, [i8; QK], i32) {
    // SAFETY: `x` is 32 readable f32; loadu has no alignment requirement.
    let v: [__m256; 4] = std::array::from_fn(|i| unsafe { _mm256_loadu_ps(x.as_ptr().add(8 * i)) });
    let sign = _mm256_set1_ps(-0.0);
    let m = v.iter().fold(_mm256_setzero_ps(), |m, &vi| {
        _mm256_max_ps(m, _mm256_andnot_ps(sign, vi))
    });
    let mut lanes = [0.0f32; 8];
    // SAFETY: `lanes` is 8 writable f32.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), m) };
    let amax = lanes.iter().fold(0.0f32, |a, &b| a.max(b)); // max is exact in any order
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let q = v.map(|vi| round_away(_mm256_mul_ps(vi, _mm256_set1_ps(id))));
    // |q| ≤ 127, so the saturating packs to 16 and then 8 bits are exact; they work within
    // each 128-bit half, and one permute of 32-bit lanes puts the 32 bytes back in order
    let packed = _mm256_packs_epi16(
        _mm256_packs_epi32(q[0], q[1]),
        _mm256_packs_epi32(q[2], q[3]),
    );
    let bytes = _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    let mut qs = [0i8; QK];
    // SAFETY: `qs` is 32 writable bytes.
    unsafe { _mm256_storeu_si256(qs.as_mut_ptr().cast(), bytes) };
    let sum = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    (d, qs, hsum(sum))
}
// ANCHOR_END: quantize

/// Activations to Q8_0 blocks.
#[target_feature(enable = "avx2,fma,f16c")]
pub fn quantize_q8_0(x: &[f32], out: &mut Vec<BlockQ8_0>) {
    out.clear();
    for b in x.as_chunks::<QK>().0 {
        let (d, qs, _) = quantize_block(b);
        out.push(BlockQ8_0 { d: to_f16(d), qs });
    }
}

/// Activations to Q8_1 blocks (with `s = d · Σq`).
#[target_feature(enable = "avx2,fma,f16c")]
pub fn quantize_q8_1(x: &[f32], out: &mut Vec<BlockQ8_1>) {
    out.clear();
    for b in x.as_chunks::<QK>().0 {
        let (d, qs, sum) = quantize_block(b);
        out.push(BlockQ8_1 {
            d: to_f16(d),
            s: to_f16(sum as f32 * d),
            qs,
        });
    }
}

/// Chapter 6's `f32_to_f16` in one instruction: F16C's conversion rounds to the nearest f16,
/// ties to even, and keeps a NaN's top payload bits, quiet, as the plain Rust does.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn to_f16(x: f32) -> u16 {
    _mm_extract_epi16::<0>(_mm_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm_set_ss(x))) as u16
}
