//! Chapter 6's one-token products on 64-bit ARM: a block of 32 quants is two 128-bit
//! registers and one byte dot ([`super::arm_helpers::dot32`]), each kernel written once and
//! compiled for both ARM levels: plain NEON (`smull` + `sadalp`) and the dot-product
//! extension (`sdot`). NEON multiplies signed bytes by signed bytes, so unlike AVX2 no sign
//! trick is needed: Q8_0's weights go in as they are, Q4_0's re-centred to −8..8, Q4_1's
//! nibbles (0..16) as they are. The block's integer is exactly chapter 6's, so the float
//! arithmetic after it, done in chapter 6's order, gives the same bits. The activations'
//! quantization is in [`super::neon_quantize`].
//!
//! Every public function here enables its level's features: calling it on a CPU without them
//! is undefined behaviour, which is why the only caller is [`super::Arm`], which exists only
//! after the CPU said yes.

#![cfg(target_arch = "aarch64")]
// As in the x86 files: every public function's one safety condition is the module's.
#![allow(clippy::missing_safety_doc)]

use std::arch::aarch64::*;

use ch06_quantization::blocks::{BlockQ4_0, BlockQ4_1, BlockQ8_0, BlockQ8_1, QK};
use ch06_quantization::f16::f16_to_f32_fast as f16;

use super::arm_helpers::{dot32, levels, load_bytes32, load_i8x32, unpack_nibbles};

/// The f16 at bytes `i, i + 1` of a block.
#[inline]
fn half(b: &[u8], i: usize) -> f32 {
    f16(u16::from_le_bytes([b[i], b[i + 1]]))
}

// ANCHOR: dot_q4_0
/// Chapter 6's `dot_q4_0_q8_0`, a block a step. Block layout (18 bytes): `d` (f16), then 16
/// bytes holding element `j` in the low nibble of byte `j` and element `j + 16` in the high
/// one. The nibbles come out of one load by an AND and a shift, the 8 is taken off each
/// (now −8..8, signed), and one byte dot with the activation's 32 quants gives the block's
/// integer; then chapter 6's `sumi · (d_w · d_a)`, added in block order.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn dot_q4_0<const DOTPROD: bool>(w: &[u8], a: &[BlockQ8_0]) -> f32 {
    let (blocks, rest) = w.as_chunks::<{ BlockQ4_0::BYTES }>();
    assert!(
        rest.is_empty() && blocks.len() == a.len(),
        "row lengths differ"
    );
    let eight = vdupq_n_s8(8);
    let mut sum = 0.0f32;
    for (wb, ab) in blocks.iter().zip(a) {
        let [lo, hi] = unpack_nibbles(wb, 2);
        let q = [
            vsubq_s8(vreinterpretq_s8_u8(lo), eight),
            vsubq_s8(vreinterpretq_s8_u8(hi), eight),
        ];
        // SAFETY: the caller promises what DOTPROD needs (this function's contract).
        let sumi = unsafe { dot32::<DOTPROD>(q, load_i8x32(&ab.qs)) };
        sum += sumi as f32 * (half(wb, 0) * ab.scale());
    }
    sum
}
// ANCHOR_END: dot_q4_0

/// Chapter 6's `dot_q4_1_q8_1`. Block layout (20 bytes): `d`, `m` (f16 each), 16 bytes of
/// nibbles as in Q4_0. The nibbles (0..16) are the quants; chapter 6's
/// `(d · d_a) · sumi + m · s` after the integer.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn dot_q4_1<const DOTPROD: bool>(w: &[u8], a: &[BlockQ8_1]) -> f32 {
    let (blocks, rest) = w.as_chunks::<{ BlockQ4_1::BYTES }>();
    assert!(
        rest.is_empty() && blocks.len() == a.len(),
        "row lengths differ"
    );
    let mut sum = 0.0f32;
    for (wb, ab) in blocks.iter().zip(a) {
        let [lo, hi] = unpack_nibbles(wb, 4);
        let q = [vreinterpretq_s8_u8(lo), vreinterpretq_s8_u8(hi)];
        // SAFETY: as in dot_q4_0.
        let sumi = unsafe { dot32::<DOTPROD>(q, load_i8x32(&ab.qs)) };
        let (d, m) = (half(wb, 0), half(wb, 2));
        sum += (d * ab.scale()) * sumi as f32 + m * ab.sum();
    }
    sum
}

/// Chapter 6's `dot_q8_0_q8_0`. Block layout (34 bytes): `d` (f16), 32 signed quants.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn dot_q8_0<const DOTPROD: bool>(w: &[u8], a: &[BlockQ8_0]) -> f32 {
    let (blocks, rest) = w.as_chunks::<{ BlockQ8_0::BYTES }>();
    assert!(
        rest.is_empty() && blocks.len() == a.len(),
        "row lengths differ"
    );
    let mut sum = 0.0f32;
    for (wb, ab) in blocks.iter().zip(a) {
        // SAFETY: as in dot_q4_0.
        let sumi = unsafe { dot32::<DOTPROD>(load_bytes32(wb, 2), load_i8x32(&ab.qs)) };
        sum += sumi as f32 * (half(wb, 0) * ab.scale());
    }
    sum
}

/// Chapter 6's `dot_int8_q8_0`: the row's i8 in blocks of 32, one scale at the end.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn dot_int8<const DOTPROD: bool>(w: &[u8], scale: f32, a: &[BlockQ8_0]) -> f32 {
    assert_eq!(w.len(), a.len() * QK, "row lengths differ");
    let mut sum = 0.0f32;
    for (wq, ab) in w.as_chunks::<QK>().0.iter().zip(a) {
        // SAFETY: as in dot_q4_0.
        let sumi = unsafe { dot32::<DOTPROD>(load_bytes32(wq, 0), load_i8x32(&ab.qs)) };
        sum += sumi as f32 * ab.scale();
    }
    sum * scale
}

levels! {
    dot_q4_1_q8_1, dot_q4_1_q8_1_sdot = dot_q4_1(w: &[u8], a: &[BlockQ8_1]) -> f32;
    dot_q4_0_q8_0, dot_q4_0_q8_0_sdot = dot_q4_0(w: &[u8], a: &[BlockQ8_0]) -> f32;
    dot_q8_0_q8_0, dot_q8_0_q8_0_sdot = dot_q8_0(w: &[u8], a: &[BlockQ8_0]) -> f32;
    dot_int8_q8_0, dot_int8_q8_0_sdot = dot_int8(w: &[u8], scale: f32, a: &[BlockQ8_0]) -> f32;
}
