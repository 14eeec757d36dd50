//! `avx2_exp`'s `e^x`, the C library's bits, sixteen f32 at a time: eight lanes of f64 a
//! register, and the table of 32 looked up by two in-register permutes instead of a gather.

#![cfg(target_arch = "x86_64")]
#![allow(clippy::missing_safety_doc)]

use std::arch::x86_64::*;

use super::avx2_exp::{C, N_OVER_LN2, SHIFT, TABLE};

/// The table in four registers of eight.
#[inline]
#[target_feature(enable = "avx512f")]
fn table() -> [__m512i; 4] {
    // SAFETY: 4 × 8 u64 are the table's 32.
    std::array::from_fn(|q| unsafe { _mm512_loadu_si512(TABLE.as_ptr().add(8 * q).cast()) })
}

// ANCHOR: exp8
/// `e^x` of eight f32 widened to f64, not yet rounded back: `avx2_exp`'s arithmetic.
#[inline]
#[target_feature(enable = "avx512f")]
fn exp8(x: __m512d, t: &[__m512i; 4]) -> __m512d {
    let n = _mm512_set1_pd(N_OVER_LN2);
    let shifted = _mm512_fmadd_pd(n, x, _mm512_set1_pd(SHIFT));
    let k = _mm512_sub_pd(shifted, _mm512_set1_pd(SHIFT));
    let r = _mm512_fmsub_pd(n, x, k);
    let bits = _mm512_castpd_si512(shifted);
    // entry (bits mod 16) of the first half and of the second, then bit 4 picks
    let low = _mm512_permutex2var_epi64(t[0], bits, t[1]);
    let high = _mm512_permutex2var_epi64(t[2], bits, t[3]);
    let upper = _mm512_test_epi64_mask(bits, _mm512_set1_epi64(16));
    let entry = _mm512_mask_blend_epi64(upper, low, high);
    let s = _mm512_castsi512_pd(_mm512_add_epi64(entry, _mm512_slli_epi64::<47>(bits)));
    let cubic = _mm512_fmadd_pd(_mm512_set1_pd(C[0]), r, _mm512_set1_pd(C[1]));
    let r2 = _mm512_mul_pd(r, r);
    let linear = _mm512_fmadd_pd(r, _mm512_set1_pd(C[2]), _mm512_set1_pd(1.0));
    _mm512_mul_pd(_mm512_fmadd_pd(cubic, r2, linear), s)
}
// ANCHOR_END: exp8

/// `x[i] = x[i].exp()` for every element, sixteen at a time, the same bits as `f32::exp`;
/// a lane with `|x| ≥ 88` goes through the library, except below −104, where the answer is +0.
#[target_feature(enable = "avx512f")]
pub fn exp_inplace(x: &mut [f32]) {
    let t = table();
    let (sixteens, tail) = x.as_chunks_mut::<16>();
    for e in sixteens {
        // SAFETY: e is 16 f32.
        let v = unsafe { _mm512_loadu_ps(e.as_ptr()) };
        let abs = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fff_ffff));
        // below −104: +0 (`exp_edge`); other lanes with |x| ≥ 88: the library's, afterwards
        let deep = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(v, _mm512_set1_ps(-104.0));
        let edge = _mm512_cmpge_epu32_mask(abs, _mm512_set1_epi32(0x42b0_0000)) & !deep;
        let before = (edge != 0).then_some(*e); // what the library's lanes held
        let v = _mm512_mask_blend_ps(deep | edge, v, _mm512_setzero_ps());
        let upper = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
        let lo = _mm512_cvtpd_ps(exp8(_mm512_cvtps_pd(_mm512_castps512_ps256(v)), &t));
        let hi = _mm512_cvtpd_ps(exp8(_mm512_cvtps_pd(upper), &t));
        let y = _mm512_insertf64x4::<1>(
            _mm512_castpd256_pd512(_mm256_castps_pd(lo)),
            _mm256_castps_pd(hi),
        );
        let y = _mm512_mask_blend_ps(deep, _mm512_castpd_ps(y), _mm512_setzero_ps());
        // SAFETY: as the load.
        unsafe { _mm512_storeu_ps(e.as_mut_ptr(), y) };
        if let Some(before) = before {
            super::avx2_exp::library_lanes(e, &before, u32::from(edge));
        }
    }
    super::avx2_exp::exp_inplace(tail); // AVX-512 implies AVX2 and FMA
}

/// `avx2_exp::softmax_rows` compiled for AVX-512, its exponentials by [`exp_inplace`].
#[target_feature(enable = "avx512f,avx2,fma")]
pub fn softmax_rows(x: &mut [f32], n: usize) {
    ch01_tensors::ops::softmax_rows_with(x, n, |x| exp_inplace(x));
}
