//! AVX-512 VNNI kernels: `vpdpbusd` does a block's multiply-adds in one instruction.
//!
//! `vpdpbusd` (`_mm256_dpbusd_epi32`) multiplies unsigned bytes by signed bytes, sums each
//! group of four products and adds the sum into a 32-bit lane: what AVX2 needs
//! `vpmaddubsw` + `vpmaddwd` for, in one instruction, and without `vpmaddubsw`'s 16-bit
//! intermediate (which can saturate). The blocks are 32 bytes, so these kernels use the
//! 256-bit form (AVX-512VL); the 512-bit registers would need two blocks' quants side by
//! side, and the activation blocks' scales sit between them in memory. Everything around
//! the multiply — unpacking, the horizontal add, the float arithmetic in chapter 6's
//! order — is the AVX2 kernel's.

#![cfg(target_arch = "x86_64")]
// Every public function here has one safety condition, the module's: the CPU must have the
// features its `#[target_feature]` names. It is stated once, above, not per function.
#![allow(clippy::missing_safety_doc)]

use std::arch::x86_64::*;

use ch06_quantization::blocks::{BlockQ4_0, BlockQ4_1, BlockQ8_0, BlockQ8_1, QK};

use super::avx2::{
    halves, hsum_i32, load32, q8_0_scale, q8_1_scales, qs_bytes, sub, unpack_nibbles,
};

/// `Σ x_j·y_j` for unsigned `x`, signed `y`: one `vpdpbusd`, one horizontal add.
#[target_feature(enable = "avx2,avx512f,avx512vl,avx512vnni")]
fn dot_u8_i8(x: __m256i, y: __m256i) -> i32 {
    hsum_i32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), x, y))
}

/// `Σ x_j·y_j` for signed `x` and `y`: the sign moved onto `y` first, as in AVX2.
#[target_feature(enable = "avx2,avx512f,avx512vl,avx512vnni")]
fn dot_i8(x: __m256i, y: __m256i) -> i32 {
    dot_u8_i8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x))
}

// ANCHOR: dot_q4_1
/// Chapter 6's `dot_q4_1_q8_1` with `vpdpbusd`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub fn dot_q4_1_q8_1(w: &[u8], a: &[BlockQ8_1]) -> f32 {
    let (blocks, rest) = w.as_chunks::<{ BlockQ4_1::BYTES }>();
    assert!(
        rest.is_empty() && blocks.len() == a.len(),
        "row lengths differ"
    );
    let mut sum = 0.0f32;
    for (wb, ab) in blocks.iter().zip(a) {
        let sumi = dot_u8_i8(unpack_nibbles(sub(wb, 4)), load32(qs_bytes(&ab.qs)));
        let [d, m, da, s] = halves(*sub(wb, 0), q8_1_scales(ab));
        sum += (d * da) * sumi as f32 + m * s;
    }
    sum
}
// ANCHOR_END: dot_q4_1

/// Chapter 6's `dot_q4_0_q8_0` with `vpdpbusd`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub fn dot_q4_0_q8_0(w: &[u8], a: &[BlockQ8_0]) -> f32 {
    let (blocks, rest) = w.as_chunks::<{ BlockQ4_0::BYTES }>();
    assert!(
        rest.is_empty() && blocks.len() == a.len(),
        "row lengths differ"
    );
    let mut sum = 0.0f32;
    for (wb, ab) in blocks.iter().zip(a) {
        let q = _mm256_sub_epi8(unpack_nibbles(sub(wb, 2)), _mm256_set1_epi8(8));
        let sumi = dot_i8(q, load32(qs_bytes(&ab.qs)));
        let [d, _, da, _] = halves([wb[0], wb[1], 0, 0], q8_0_scale(ab));
        sum += sumi as f32 * (d * da);
    }
    sum
}

/// Chapter 6's `dot_q8_0_q8_0` with `vpdpbusd`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub fn dot_q8_0_q8_0(w: &[u8], a: &[BlockQ8_0]) -> f32 {
    let (blocks, rest) = w.as_chunks::<{ BlockQ8_0::BYTES }>();
    assert!(
        rest.is_empty() && blocks.len() == a.len(),
        "row lengths differ"
    );
    let mut sum = 0.0f32;
    for (wb, ab) in blocks.iter().zip(a) {
        let sumi = dot_i8(load32(sub(wb, 2)), load32(qs_bytes(&ab.qs)));
        let [d, _, da, _] = halves([wb[0], wb[1], 0, 0], q8_0_scale(ab));
        sum += sumi as f32 * (d * da);
    }
    sum
}

/// Chapter 6's `dot_int8_q8_0` with `vpdpbusd`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub fn dot_int8_q8_0(w: &[u8], scale: f32, a: &[BlockQ8_0]) -> f32 {
    assert_eq!(w.len(), a.len() * QK, "row lengths differ");
    let mut sum = 0.0f32;
    for (wq, ab) in w.as_chunks::<QK>().0.iter().zip(a) {
        let sumi = dot_i8(load32(wq), load32(qs_bytes(&ab.qs)));
        let [da, ..] = halves(q8_0_scale(ab), [0; 4]);
        sum += sumi as f32 * da;
    }
    sum * scale
}
