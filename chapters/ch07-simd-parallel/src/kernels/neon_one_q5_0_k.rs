//! One-token products of chapter 8's formats on NEON: Q5_0, Q4_K and Q6_K, one row against
//! one token's activations, each compiled for both ARM levels (plain NEON and `sdot`). Each
//! (sub-)block's integer is exact; the float arithmetic after it is
//! [`crate::layout::kquant`]'s, in its order, so the bits are the scalar kernels'.
//!
//! NEON multiplies signed bytes, so every format's quants are made signed first (Q5_0's
//! −16..16, Q6_K's −32..32) or are small enough to be read as signed (Q4_K's 0..16), and the
//! sub-block scales multiply each sub-block's four lane sums before the one horizontal sum of
//! a super-block.

#![cfg(target_arch = "aarch64")]
#![allow(clippy::missing_safety_doc)]

use std::arch::aarch64::*;

use ch06_quantization::f16::f16_to_f32_fast as f16;

use super::arm_helpers::levels;
use super::arm_helpers::{dot16, dot32, load_i8x32};
use crate::layout::kquant::{BlockQ8K, Q4_K_BYTES, Q5_0_BYTES, Q6_K_BYTES, Q8_0Wide, scale_min_k4};

fn half(b: &[u8], i: usize) -> f32 {
    f16(u16::from_le_bytes([b[i], b[i + 1]]))
}

/// Sixteen bytes from `b[at..at + 16]`.
#[inline]
#[target_feature(enable = "neon")]
fn load16(b: &[u8], at: usize) -> uint8x16_t {
    let p = b[at..at + 16].as_ptr();
    // SAFETY: 16 readable bytes at `p` (the slice checked the bounds).
    unsafe { vld1q_u8(p) }
}

// ANCHOR: q5_0
/// A Q5_0 row against one token. Block layout (22 bytes): `d` (f16), `qh` (32 bits: bit `j`
/// is element `j`'s fifth bit), 16 bytes of nibbles as in Q4_0. The fifth bits reach their
/// bytes by a test: byte `j` of a register holding `qh`'s byte `j / 8` eight times, against
/// the mask `1 << (j % 8)` (`cmtst`), gives 0xff where the bit is set.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn q5_0<const DOTPROD: bool>(w: &[u8], a: &[Q8_0Wide]) -> f32 {
    assert_eq!(w.len(), a.len() * Q5_0_BYTES, "row lengths differ");
    // SAFETY: 16 bytes.
    let bit =
        unsafe { vld1q_u8([1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128].as_ptr()) };
    let (sixteen, low) = (vdupq_n_u8(16), vdupq_n_u8(0x0f));
    let mut acc = 0.0f32;
    for (b, a) in w.chunks_exact(Q5_0_BYTES).zip(a) {
        let nib = load16(b, 6);
        // 16 where element j's fifth bit is set, for elements 0..16 (qh's bytes 0, 1) and
        // 16..32 (bytes 2, 3)
        let fifth = [(b[2], b[3]), (b[4], b[5])].map(|(lo, hi)| {
            let spread = vcombine_u8(vdup_n_u8(lo), vdup_n_u8(hi));
            vandq_u8(vtstq_u8(spread, bit), sixteen)
        });
        let q = [
            vorrq_u8(vandq_u8(nib, low), fifth[0]),
            vorrq_u8(vshrq_n_u8::<4>(nib), fifth[1]),
        ];
        let signed = vreinterpretq_s8_u8(sixteen);
        let q = [
            vsubq_s8(vreinterpretq_s8_u8(q[0]), signed), // −16..16
            vsubq_s8(vreinterpretq_s8_u8(q[1]), signed),
        ];
        // SAFETY: the caller promises what DOTPROD needs (this function's contract).
        let dot = unsafe { dot32::<DOTPROD>(q, load_i8x32(&a.qs)) };
        acc += half(b, 0) * a.d * dot as f32;
    }
    acc
}
// ANCHOR_END: q5_0

/// A Q4_K row against one token. Block layout (144 bytes): `d`, `dmin` (f16), 12 bytes of
/// eight 6-bit (scale, min) pairs, 128 bytes of nibbles: each 32 bytes hold sub-block `2c` in
/// their low nibbles and `2c + 1` in their high ones. Each sub-block's four lane sums are
/// multiplied by its scale (exact in i32: at most 8 · 63 · 32 · 15 · 128), summed across
/// lanes once; the mins meet the activations' precomputed sums, as in the scalar code.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn q4_k<const DOTPROD: bool>(w: &[u8], a: &[BlockQ8K]) -> f32 {
    assert_eq!(w.len(), a.len() * Q4_K_BYTES, "row lengths differ");
    let low = vdupq_n_u8(0x0f);
    let mut acc = 0.0f32;
    for (b, a) in w.chunks_exact(Q4_K_BYTES).zip(a) {
        let scales = &b[4..16];
        let mut lanes = vdupq_n_s32(0);
        let mut sum_m = 0i32;
        for c in 0..4 {
            let q = [load16(b, 16 + 32 * c), load16(b, 32 + 32 * c)];
            for (h, s) in [2 * c, 2 * c + 1].into_iter().enumerate() {
                let (sc, m) = scale_min_k4(s, scales);
                let q = if h == 0 {
                    [vandq_u8(q[0], low), vandq_u8(q[1], low)]
                } else {
                    [vshrq_n_u8::<4>(q[0]), vshrq_n_u8::<4>(q[1])]
                };
                let q = [vreinterpretq_s8_u8(q[0]), vreinterpretq_s8_u8(q[1])];
                let [a0, a1] = sub32(&a.qs, 32 * s);
                // SAFETY: as in q5_0.
                let dot = unsafe {
                    dot16::<DOTPROD>(dot16::<DOTPROD>(vdupq_n_s32(0), q[0], a0), q[1], a1)
                };
                lanes = vmlaq_n_s32(lanes, dot, i32::from(sc));
                sum_m += i32::from(m) * (i32::from(a.bsums[2 * s]) + i32::from(a.bsums[2 * s + 1]));
            }
        }
        let sum_q = vaddvq_s32(lanes);
        let (d, dmin) = (half(b, 0), half(b, 2));
        acc += d * a.d * sum_q as f32 - dmin * a.d * sum_m as f32;
    }
    acc
}

/// Quants `at..at + 32` of a Q8_K block as two registers.
#[inline]
#[target_feature(enable = "neon")]
fn sub32(qs: &[i8], at: usize) -> [int8x16_t; 2] {
    let p = qs[at..at + 32].as_ptr();
    // SAFETY: 32 readable bytes at `p`.
    unsafe { [vld1q_s8(p), vld1q_s8(p.add(16))] }
}

/// A Q6_K row against one token. Block layout (210 bytes): 128 bytes of low nibbles (`ql`),
/// 64 bytes of 2-bit highs (`qh`), 16 signed scales, `d` (f16). Each half of 128 values reads
/// 64 bytes of `ql` and 32 of `qh` as four runs of 32 values: the low nibbles of `ql`'s first
/// 32 bytes with bits 0–1 of `qh`, of its next 32 with bits 2–3, then their high nibbles with
/// bits 4–5 and 6–7. A run is two groups of 16, each with its own scale.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn q6_k<const DOTPROD: bool>(w: &[u8], a: &[BlockQ8K]) -> f32 {
    assert_eq!(w.len(), a.len() * Q6_K_BYTES, "row lengths differ");
    let (low, three, off) = (vdupq_n_u8(0x0f), vdupq_n_u8(3), vdupq_n_s8(32));
    let mut acc = 0.0f32;
    for (b, a) in w.chunks_exact(Q6_K_BYTES).zip(a) {
        let mut lanes = vdupq_n_s32(0);
        for h in 0..2 {
            for half16 in 0..2 {
                // bytes 16·half16.. of the half's two ql runs and of its qh
                let at = 16 * half16;
                let ql0 = load16(b, 64 * h + at);
                let ql1 = load16(b, 64 * h + 32 + at);
                let qh = load16(b, 128 + 32 * h + at);
                let runs = [
                    vorrq_u8(vandq_u8(ql0, low), vshlq_n_u8::<4>(vandq_u8(qh, three))),
                    vorrq_u8(
                        vandq_u8(ql1, low),
                        vshlq_n_u8::<4>(vandq_u8(vshrq_n_u8::<2>(qh), three)),
                    ),
                    vorrq_u8(
                        vshrq_n_u8::<4>(ql0),
                        vshlq_n_u8::<4>(vandq_u8(vshrq_n_u8::<4>(qh), three)),
                    ),
                    vorrq_u8(vshrq_n_u8::<4>(ql1), vshlq_n_u8::<4>(vshrq_n_u8::<6>(qh))),
                ];
                for (k, q) in runs.into_iter().enumerate() {
                    let q = vsubq_s8(vreinterpretq_s8_u8(q), off); // −32..32
                    let g = 8 * h + 2 * k + half16; // this group of 16
                    let p = a.qs[16 * g..16 * g + 16].as_ptr();
                    // SAFETY: 16 readable quants at `p`; the dot as in q5_0.
                    let dot = unsafe { dot16::<DOTPROD>(vdupq_n_s32(0), q, vld1q_s8(p)) };
                    lanes = vmlaq_n_s32(lanes, dot, i32::from(b[192 + g] as i8));
                }
            }
        }
        acc += half(b, 208) * a.d * vaddvq_s32(lanes) as f32;
    }
    acc
}

levels! {
    dot_q5_0, dot_q5_0_sdot = q5_0(w: &[u8], a: &[Q8_0Wide]) -> f32;
    dot_q4_k, dot_q4_k_sdot = q4_k(w: &[u8], a: &[BlockQ8K]) -> f32;
    dot_q6_k, dot_q6_k_sdot = q6_k(w: &[u8], a: &[BlockQ8K]) -> f32;
}
