//! The eight-token kernel of [`crate::eights`] in AVX2: one register of activations is one
//! step of eight tokens, and the weight row's four quants of that step are broadcast to every
//! lane, so each lane collects its own token's products and no lane is ever summed across.

#![cfg(target_arch = "x86_64")]
#![allow(clippy::missing_safety_doc)] // the module's one condition: the CPU has AVX2 and F16C

use std::arch::x86_64::*;

use ch06_quantization::blocks::BlockQ4_1;

use super::helpers::{halves, sub, unpack_nibbles};
use crate::eights::{Eights, TOKENS};

// ANCHOR: avx2_eights
/// [`crate::eights::dot8_q4_1`], bit for bit: per block, eight steps of a broadcast, a
/// `vpmaddubsw` and an add in 16 bits, one `vpmaddwd` to 32 bits, then chapter 6's float
/// arithmetic on eight tokens at once.
#[target_feature(enable = "avx2,f16c")]
pub fn dot8_q4_1(w: &[u8], a: &Eights) -> [f32; TOKENS] {
    let (blocks, rest) = w.as_chunks::<{ BlockQ4_1::BYTES }>();
    assert!(
        rest.is_empty() && blocks.len() == a.blocks(),
        "row lengths differ"
    );
    let mut sum = _mm256_setzero_ps();
    for (b, wb) in blocks.iter().enumerate() {
        let q = unpack_nibbles(sub(wb, 4)); // 32 quants, 0..=15, in element order
        // Each step adds two products of at most 15 · 127 into an i16 per pair: eight steps
        // stay below 32 767, so the block's sums are widened once, at its end.
        let mut pairs = _mm256_setzero_si256();
        for (k, step) in a.qs[b].iter().enumerate() {
            let quads = _mm256_permutevar8x32_epi32(q, _mm256_set1_epi32(k as i32));
            // SAFETY: `step` is 8 × 4 = 32 readable bytes.
            let acts = unsafe { _mm256_loadu_si256(step.as_ptr().cast()) };
            pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(quads, acts));
        }
        let lanes = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)); // token t's dot in lane t
        let [d, m, _, _] = halves(*sub(wb, 0), [0; 4]);
        // SAFETY: each is 8 readable f32.
        let (da, s) = unsafe {
            (
                _mm256_loadu_ps(a.d[b].as_ptr()),
                _mm256_loadu_ps(a.s[b].as_ptr()),
            )
        };
        // chapter 6's (d · d_a) · Σ + m · s, multiplies and adds rounded one at a time
        let scaled = _mm256_mul_ps(
            _mm256_mul_ps(_mm256_set1_ps(d), da),
            _mm256_cvtepi32_ps(lanes),
        );
        let term = _mm256_add_ps(scaled, _mm256_mul_ps(_mm256_set1_ps(m), s));
        sum = _mm256_add_ps(sum, term);
    }
    let mut out = [0.0f32; TOKENS];
    // SAFETY: `out` is 8 writable f32.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), sum) };
    out
}
// ANCHOR_END: avx2_eights
