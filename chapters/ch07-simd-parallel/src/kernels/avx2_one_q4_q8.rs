//! Chapter 6's one-token products on x86: 32 bytes per register, one block of 32 quants per
//! byte dot (`x86_helpers::dot_u8_i8`), each written once and compiled for both levels:
//! AVX2 (`vpmaddubsw` + `vpmaddwd`) and AVX-512 VNNI (`vpdpbusd`). For Q8_0 × Q8_0, both
//! signed, the weight's sign moves onto the activation (`|w| · (a·sign(w)) = w · a`), which
//! `vpsignb` does in one instruction. The block's integer is exactly chapter 6's, so the float
//! arithmetic after it, done in chapter 6's order, gives the same bits. The activations'
//! quantization is in [`super::avx2_quantize`].
//!
//! Every public function here enables its level's features: calling it on a CPU without them
//! is undefined behaviour, which is why the only caller is [`super::X86`], which exists only
//! after the CPU said yes.

#![cfg(target_arch = "x86_64")]
// Every public function here has one safety condition, the module's: the CPU must have the
// features its `#[target_feature]` names. It is stated once, above, not per function.
#![allow(clippy::missing_safety_doc)]

use std::arch::x86_64::*;

use ch06_quantization::blocks::{BlockQ4_0, BlockQ4_1, BlockQ8_0, BlockQ8_1, QK};

use super::x86_helpers::{
    dot_i8, dot_u8_i8, halves, load32, q8_0_scale, q8_1_scales, qs_bytes, sub, unpack_nibbles,
};

// ANCHOR: dot_q4_1
/// Chapter 6's `dot_q4_1_q8_1`, 32 quants at a time: unpack the nibbles (they are the
/// unsigned operand, no sign trick needed), one [`dot_u8_i8`]; then chapter 6's float
/// arithmetic, in chapter 6's order. Compiled once per level, in the wrappers below.
#[inline(always)]
unsafe fn dot_q4_1<const VNNI: bool>(w: &[u8], a: &[BlockQ8_1]) -> f32 {
    let (blocks, rest) = w.as_chunks::<{ BlockQ4_1::BYTES }>();
    assert!(
        rest.is_empty() && blocks.len() == a.len(),
        "row lengths differ"
    );
    let mut sum = 0.0f32;
    for (wb, ab) in blocks.iter().zip(a) {
        // SAFETY: the wrapper that inlines this body enables AVX2, F16C (and VNNI's features).
        let (sumi, [d, m, da, s]) = unsafe {
            let q = unpack_nibbles(sub(wb, 4));
            let sumi = dot_u8_i8::<VNNI>(q, load32(qs_bytes(&ab.qs)));
            (sumi, halves(*sub(wb, 0), q8_1_scales(ab)))
        };
        sum += (d * da) * sumi as f32 + m * s;
    }
    sum
}
// ANCHOR_END: dot_q4_1

/// Chapter 6's `dot_q4_0_q8_0`: nibbles re-centred by −8 (now signed), then the sign trick.
#[inline(always)]
unsafe fn dot_q4_0<const VNNI: bool>(w: &[u8], a: &[BlockQ8_0]) -> f32 {
    let (blocks, rest) = w.as_chunks::<{ BlockQ4_0::BYTES }>();
    assert!(
        rest.is_empty() && blocks.len() == a.len(),
        "row lengths differ"
    );
    let mut sum = 0.0f32;
    for (wb, ab) in blocks.iter().zip(a) {
        // SAFETY: as in dot_q4_1.
        let (sumi, [d, _, da, _]) = unsafe {
            let q = _mm256_sub_epi8(unpack_nibbles(sub(wb, 2)), _mm256_set1_epi8(8));
            let sumi = dot_i8::<VNNI>(q, load32(qs_bytes(&ab.qs)));
            (sumi, halves([wb[0], wb[1], 0, 0], q8_0_scale(ab)))
        };
        sum += sumi as f32 * (d * da);
    }
    sum
}

/// Chapter 6's `dot_q8_0_q8_0`.
#[inline(always)]
unsafe fn dot_q8_0<const VNNI: bool>(w: &[u8], a: &[BlockQ8_0]) -> f32 {
    let (blocks, rest) = w.as_chunks::<{ BlockQ8_0::BYTES }>();
    assert!(
        rest.is_empty() && blocks.len() == a.len(),
        "row lengths differ"
    );
    let mut sum = 0.0f32;
    for (wb, ab) in blocks.iter().zip(a) {
        // SAFETY: as in dot_q4_1.
        let (sumi, [d, _, da, _]) = unsafe {
            let sumi = dot_i8::<VNNI>(load32(sub(wb, 2)), load32(qs_bytes(&ab.qs)));
            (sumi, halves([wb[0], wb[1], 0, 0], q8_0_scale(ab)))
        };
        sum += sumi as f32 * (d * da);
    }
    sum
}

/// Chapter 6's `dot_int8_q8_0`: the row's i8 in blocks of 32, one scale at the end.
#[inline(always)]
unsafe fn dot_int8<const VNNI: bool>(w: &[u8], scale: f32, a: &[BlockQ8_0]) -> f32 {
    assert_eq!(w.len(), a.len() * QK, "row lengths differ");
    let mut sum = 0.0f32;
    for (wq, ab) in w.as_chunks::<QK>().0.iter().zip(a) {
        // SAFETY: as in dot_q4_1.
        let (sumi, [da, ..]) = unsafe {
            let sumi = dot_i8::<VNNI>(load32(wq), load32(qs_bytes(&ab.qs)));
            (sumi, halves(q8_0_scale(ab), [0; 4]))
        };
        sum += sumi as f32 * da;
    }
    sum * scale
}

/// One target-feature wrapper per level and format: the bodies above, compiled with AVX2
/// (and FMA and F16C), or with AVX-512 VNNI too.
macro_rules! levels {
    ($($avx2:ident, $avx512:ident = $body:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {$(
        #[target_feature(enable = "avx2,fma,f16c")]
        pub fn $avx2($($arg: $ty),*) -> $ret {
            // SAFETY: this function enables what the body's AVX2 branch needs.
            unsafe { $body::<false>($($arg),*) }
        }
        #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
        pub fn $avx512($($arg: $ty),*) -> $ret {
            // SAFETY: this function enables what the body's VNNI branch needs.
            unsafe { $body::<true>($($arg),*) }
        }
    )*};
}

levels! {
    dot_q4_1_q8_1, dot_q4_1_q8_1_vnni = dot_q4_1(w: &[u8], a: &[BlockQ8_1]) -> f32;
    dot_q4_0_q8_0, dot_q4_0_q8_0_vnni = dot_q4_0(w: &[u8], a: &[BlockQ8_0]) -> f32;
    dot_q8_0_q8_0, dot_q8_0_q8_0_vnni = dot_q8_0(w: &[u8], a: &[BlockQ8_0]) -> f32;
    dot_int8_q8_0, dot_int8_q8_0_vnni = dot_int8(w: &[u8], scale: f32, a: &[BlockQ8_0]) -> f32;
}
