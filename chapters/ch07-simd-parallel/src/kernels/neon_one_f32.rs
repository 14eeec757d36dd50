//! The f32 kernels of attention on NEON: dot products and `y += a·x`, each element computed
//! by the same operations in the same order as chapter 6's scalar loops, so the same bits;
//! and f16 to f32 by `fcvtl`. Several queries at once are in [`super::neon_many_f32`].
//!
//! Chapter 6's `dot_f32_lanes` keeps eight running sums, AVX2's register width. A NEON
//! register holds four, so these kernels keep two, lanes 0..4 and 4..8 of the eight, and
//! end with chapter 6's halving sum: the same eight sums, the same additions. And no fused
//! multiply-add anywhere (`vfmaq_f32`, `fmla`, rounds once): each step is a `fmul` then a
//! `fadd`, as the scalar code rounds twice.

#![cfg(target_arch = "aarch64")]
#![allow(clippy::missing_safety_doc)]

use std::arch::aarch64::*;

use super::arm_helpers::f16x4_to_f32;

/// Chapter 6's `f16_to_f32s`: four halves at a time through `fcvtl`, which converts every
/// half exactly (a signalling NaN comes out quiet), the tail one at a time.
#[target_feature(enable = "neon")]
pub fn f16_to_f32s(src: &[u16], dst: &mut [f32]) {
    assert_eq!(
        src.len(),
        dst.len(),
        "f16_to_f32s: src and dst differ in length"
    );
    let whole = src.len() / 4 * 4;
    for i in (0..whole).step_by(4) {
        // SAFETY: 4 halves and 4 floats at i + 4 ≤ whole ≤ both lengths.
        unsafe {
            let h = vld1_u16(src.as_ptr().add(i));
            vst1q_f32(dst.as_mut_ptr().add(i), f16x4_to_f32(h));
        }
    }
    for (o, &h) in dst[whole..].iter_mut().zip(&src[whole..]) {
        *o = ch06_quantization::f16::f16_to_f32_fast(h);
    }
}

/// Eight floats from `p` as two registers, lanes 0..4 and 4..8.
///
/// # Safety
/// `p` must be readable for 8 f32.
#[inline]
#[target_feature(enable = "neon")]
pub(super) unsafe fn load8(p: *const f32) -> [float32x4_t; 2] {
    // SAFETY: the caller's promise.
    unsafe { [vld1q_f32(p), vld1q_f32(p.add(4))] }
}

/// `acc + x · y`, lane by lane, multiply then add (not fused).
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn mul_add8(
    acc: [float32x4_t; 2],
    x: [float32x4_t; 2],
    y: [float32x4_t; 2],
) -> [float32x4_t; 2] {
    [
        vaddq_f32(acc[0], vmulq_f32(x[0], y[0])),
        vaddq_f32(acc[1], vmulq_f32(x[1], y[1])),
    ]
}

// ANCHOR: dot_f32
/// Chapter 6's `dot_f32_lanes`, bit for bit: eight running sums in two registers, multiply
/// then add, the halving sum `((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7))`, then the
/// tail in order.
#[target_feature(enable = "neon")]
pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "dot of slices with different lengths");
    let (a8, a_tail) = a.as_chunks::<8>();
    let (b8, b_tail) = b.as_chunks::<8>();
    let mut acc = [vdupq_n_f32(0.0); 2];
    for (x, y) in a8.iter().zip(b8) {
        // SAFETY: x and y are 8 f32 each.
        let (xv, yv) = unsafe { (load8(x.as_ptr()), load8(y.as_ptr())) };
        acc = mul_add8(acc, xv, yv);
    }
    reduce8(acc, a_tail, b_tail)
}

/// The end of [`dot_f32`]: its eight sums added up as chapter 6 does, then the tails'
/// products added one by one.
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn reduce8(acc: [float32x4_t; 2], a_tail: &[f32], b_tail: &[f32]) -> f32 {
    let h = vaddq_f32(acc[0], acc[1]); // (s0+s4, s1+s5, s2+s6, s3+s7)
    let h = vadd_f32(vget_low_f32(h), vget_high_f32(h)); // (·0 + ·2, ·1 + ·3)
    let sum = vpadds_f32(h);
    a_tail.iter().zip(b_tail).fold(sum, |s, (x, y)| s + x * y)
}
// ANCHOR_END: dot_f32

/// `y += a·x`, 4 lanes at a time, multiply then add (not fused), so each element is exactly
/// what the scalar loop computes.
#[target_feature(enable = "neon")]
pub fn axpy(y: &mut [f32], a: f32, x: &[f32]) {
    assert_eq!(y.len(), x.len(), "axpy of slices with different lengths");
    let (y4, y_tail) = y.as_chunks_mut::<4>();
    let (x4, x_tail) = x.as_chunks::<4>();
    for (yc, xc) in y4.iter_mut().zip(x4) {
        // SAFETY: yc and xc are 4 f32 each.
        unsafe {
            let r = vaddq_f32(
                vld1q_f32(yc.as_ptr()),
                vmulq_n_f32(vld1q_f32(xc.as_ptr()), a),
            );
            vst1q_f32(yc.as_mut_ptr(), r);
        }
    }
    for (yv, &xv) in y_tail.iter_mut().zip(x_tail) {
        *yv += a * xv;
    }
}

/// [`dot_f32`] for each row of `rows` (each `q.len()` long): one call for a head's scores.
#[target_feature(enable = "neon")]
pub fn dot_f32_rows(q: &[f32], rows: &[f32], out: &mut [f32]) {
    for (o, row) in out.iter_mut().zip(rows.chunks_exact(q.len())) {
        *o = dot_f32(q, row);
    }
}

/// [`axpy`] for each row of `rows` in order, `y` held in registers between rows when it is
/// at most 64 floats (a head of SmolLM2; 16 of NEON's 32 registers): each element still sees
/// `y + w·x`, row after row, exactly as the one-row calls compute it.
#[target_feature(enable = "neon")]
pub fn axpy_rows(y: &mut [f32], w: &[f32], rows: &[f32]) {
    let d = y.len();
    if d == 0 || d > 64 || !d.is_multiple_of(4) {
        for (&w, row) in w.iter().zip(rows.chunks_exact(d.max(1))) {
            axpy(y, w, row);
        }
        return;
    }
    let lanes = d / 4;
    let mut acc = [vdupq_n_f32(0.0); 16];
    for (i, a) in acc.iter_mut().enumerate().take(lanes) {
        // SAFETY: 4 f32 at 4i < d.
        *a = unsafe { vld1q_f32(y.as_ptr().add(4 * i)) };
    }
    for (&w, row) in w.iter().zip(rows.chunks_exact(d)) {
        for (i, a) in acc.iter_mut().enumerate().take(lanes) {
            // SAFETY: 4 f32 at 4i < d of a row of d.
            let x = unsafe { vld1q_f32(row.as_ptr().add(4 * i)) };
            *a = vaddq_f32(*a, vmulq_n_f32(x, w));
        }
    }
    for (i, a) in acc.iter().enumerate().take(lanes) {
        // SAFETY: 4 f32 at 4i < d.
        unsafe { vst1q_f32(y.as_mut_ptr().add(4 * i), *a) };
    }
}
