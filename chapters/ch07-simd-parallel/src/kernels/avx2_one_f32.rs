//! The f32 kernels of attention on AVX2: dot products and `y += a·x`, 8 lanes at a time,
//! each element computed by the same operations in the same order as chapter 6's scalar
//! loops, so the same bits; and f16 to f32 by F16C.

#![cfg(target_arch = "x86_64")]
#![allow(clippy::missing_safety_doc)]

use std::arch::x86_64::*;

/// Chapter 6's `f16_to_f32s`: eight halves at a time through F16C's `vcvtph2ps`, which
/// converts every half exactly (a signalling NaN comes out quiet), the tail one at a time.
#[target_feature(enable = "avx2,f16c")]
pub fn f16_to_f32s(src: &[u16], dst: &mut [f32]) {
    assert_eq!(
        src.len(),
        dst.len(),
        "f16_to_f32s: src and dst differ in length"
    );
    let whole = src.len() / 8 * 8;
    for i in (0..whole).step_by(8) {
        // SAFETY: 8 halves and 8 floats at i + 8 ≤ whole ≤ both lengths.
        unsafe {
            let h = _mm_loadu_si128(src.as_ptr().add(i).cast());
            _mm256_storeu_ps(dst.as_mut_ptr().add(i), _mm256_cvtph_ps(h));
        }
    }
    for (o, &h) in dst[whole..].iter_mut().zip(&src[whole..]) {
        *o = ch06_quantization::f16::f16_to_f32_fast(h);
    }
}

/// Chapter 6's `dot_f32_lanes`, bit for bit: one 8-lane accumulator, multiply then add (not
/// fused), the halving horizontal add, then the tail in order.
#[target_feature(enable = "avx2,fma")]
pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "dot of slices with different lengths");
    let (a8, a_tail) = a.as_chunks::<8>();
    let (b8, b_tail) = b.as_chunks::<8>();
    let mut acc = _mm256_setzero_ps();
    for (x, y) in a8.iter().zip(b8) {
        // SAFETY: x and y are 8 f32 each.
        let (xv, yv) = unsafe { (_mm256_loadu_ps(x.as_ptr()), _mm256_loadu_ps(y.as_ptr())) };
        acc = _mm256_add_ps(acc, _mm256_mul_ps(xv, yv));
    }
    reduce8(acc, a_tail, b_tail)
}

/// The end of [`dot_f32`]: its eight lanes summed, then the tails' products added one by one.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn reduce8(acc: __m256, a_tail: &[f32], b_tail: &[f32]) -> f32 {
    // (acc0+acc4, acc1+acc5, acc2+acc6, acc3+acc7), then (·0+·2, ·1+·3), then their sum.
    let h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps::<1>(acc));
    let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    let h = _mm_add_ss(h, _mm_shuffle_ps::<0b01>(h, h));
    let sum = _mm_cvtss_f32(h);
    a_tail.iter().zip(b_tail).fold(sum, |s, (x, y)| s + x * y)
}

/// `y += a·x`, 8 lanes at a time, multiply then add (not fused), so each element is exactly
/// what the scalar loop computes.
#[target_feature(enable = "avx2,fma")]
pub fn axpy(y: &mut [f32], a: f32, x: &[f32]) {
    assert_eq!(y.len(), x.len(), "axpy of slices with different lengths");
    let av = _mm256_set1_ps(a);
    let (y8, y_tail) = y.as_chunks_mut::<8>();
    let (x8, x_tail) = x.as_chunks::<8>();
    for (yc, xc) in y8.iter_mut().zip(x8) {
        // SAFETY: yc and xc are 8 f32 each.
        unsafe {
            let r = _mm256_add_ps(
                _mm256_loadu_ps(yc.as_ptr()),
                _mm256_mul_ps(av, _mm256_loadu_ps(xc.as_ptr())),
            );
            _mm256_storeu_ps(yc.as_mut_ptr(), r);
        }
    }
    for (yv, &xv) in y_tail.iter_mut().zip(x_tail) {
        *yv += a * xv;
    }
}

/// [`dot_f32`] for each row of `rows` (each `q.len()` long): one call for a head's scores.
#[target_feature(enable = "avx2,fma")]
pub fn dot_f32_rows(q: &[f32], rows: &[f32], out: &mut [f32]) {
    for (o, row) in out.iter_mut().zip(rows.chunks_exact(q.len())) {
        *o = dot_f32(q, row);
    }
}

/// [`axpy`] for each row of `rows` in order, `y` held in registers between rows when it is
/// at most 64 floats (a head of SmolLM2): each element still sees `y + w·x`, row after row,
/// exactly as the one-row calls compute it.
#[target_feature(enable = "avx2,fma")]
pub fn axpy_rows(y: &mut [f32], w: &[f32], rows: &[f32]) {
    let d = y.len();
    if d == 0 || d > 64 || !d.is_multiple_of(8) {
        for (&w, row) in w.iter().zip(rows.chunks_exact(d.max(1))) {
            axpy(y, w, row);
        }
        return;
    }
    let lanes = d / 8;
    let mut acc = [_mm256_setzero_ps(); 8];
    for (i, a) in acc.iter_mut().enumerate().take(lanes) {
        // SAFETY: 8 f32 at 8i < d.
        *a = unsafe { _mm256_loadu_ps(y.as_ptr().add(8 * i)) };
    }
    for (&w, row) in w.iter().zip(rows.chunks_exact(d)) {
        let wv = _mm256_set1_ps(w);
        for (i, a) in acc.iter_mut().enumerate().take(lanes) {
            // SAFETY: 8 f32 at 8i < d of a row of d.
            *a = _mm256_add_ps(
                *a,
                _mm256_mul_ps(wv, unsafe { _mm256_loadu_ps(row.as_ptr().add(8 * i)) }),
            );
        }
    }
    for (i, a) in acc.iter().enumerate().take(lanes) {
        // SAFETY: 8 f32 at 8i < d.
        unsafe { _mm256_storeu_ps(y.as_mut_ptr().add(8 * i), *a) };
    }
}
