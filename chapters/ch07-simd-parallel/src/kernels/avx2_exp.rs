//! `e^x` for eight f32 at a time that returns, bit for bit, what the C library's `expf`
//! returns: softmax and SiLU vectorised without changing a single number.
//!
//! Every level's softmax calls `f32::exp`, which is the C library's `expf`, one value at a
//! time (an opaque call, so the loop around it cannot be vectorised either). An `exp` of
//! our own with a different polynomial would be faster and *almost* the same, and
//! "almost" would change the logits of every model on every level. Instead this file does
//! glibc's algorithm (it comes from Arm's optimized-routines; musl has the same one), with
//! its constants, in its order, four lanes of f64 at a time:
//!
//! ```text
//! z = x · 32/ln2                         (in f64, where x is exact)
//! k = round(z), r = z − k                (|r| ≤ 1/2; k by adding 1.5·2^52, which rounds)
//! 2^(k/32) = 2^(k div 32) · 2^((k mod 32)/32)    the second from a table of 32
//! e^x = 2^(k/32) · 2^(r/32) ≈ s · (1 + c2·r + c1·r² + c0·r³)
//! ```
//!
//! in f64, with a fused multiply-add exactly where the library's FMA build has one (glibc
//! picks that build on every CPU with AVX2 and FMA, which this level requires; the
//! operations below follow its machine code), and one rounding to f32 at the end. Lanes
//! with `|x| ≥ 88` (where `e^x` nears the ends of f32's range: overflow, underflow,
//! infinities, NaN) take the library's own branches: the eight values go through `expf`
//! itself. A test compares this with `f32::exp` on every one of the 2^32 floats.

#![cfg(target_arch = "x86_64")]
#![allow(clippy::missing_safety_doc)]

use std::arch::x86_64::*;

/// 32 / ln 2, rounded to f64: `x` times this is `x / ln 2` in units of 1/32.
pub(super) const N_OVER_LN2: f64 = f64::from_bits(0x4047_1547_652b_82fe);
/// 1.5 · 2^52: added to a double of magnitude below 2^51 it leaves the nearest integer in
/// the low bits of the sum (the FPU's round-to-nearest-even does the rounding).
pub(super) const SHIFT: f64 = f64::from_bits(0x4338_0000_0000_0000);
/// The polynomial for `2^(r/32)`, `1 + c2·r + c1·r² + c0·r³`: `[c0, c1, c2]` (glibc's
/// `poly_scaled`).
pub(super) const C: [f64; 3] = [
    f64::from_bits(0x3ebc_6af8_4b91_2394),
    f64::from_bits(0x3f2e_bfce_50fa_c4f3),
    f64::from_bits(0x3f96_2e42_ff0c_52d6),
];
/// Entry `i` is the bits of the nearest f64 to `2^(i/32)` minus `i · 2^47`, so that adding
/// `k · 2^47` (k's low five bits are `i`) puts `k div 32` into the exponent: the bits of
/// `2^(k/32)` in one integer addition.
#[rustfmt::skip]
pub(super) const TABLE: [u64; 32] = [
    0x3ff0_0000_0000_0000, 0x3fef_d9b0_d315_8574, 0x3fef_b558_6cf9_890f, 0x3fef_9301_d012_5b51,
    0x3fef_72b8_3c7d_517b, 0x3fef_5487_3168_b9aa, 0x3fef_387a_6e75_6238, 0x3fef_1e9d_f51f_dee1,
    0x3fef_06fe_0a31_b715, 0x3fee_f1a7_373a_a9cb, 0x3fee_dea6_4c12_3422, 0x3fee_ce08_6061_892d,
    0x3fee_bfda_d536_2a27, 0x3fee_b42b_569d_4f82, 0x3fee_ab07_dd48_5429, 0x3fee_a47e_b03a_5585,
    0x3fee_a09e_667f_3bcd, 0x3fee_9f75_e8ec_5f74, 0x3fee_a114_73eb_0187, 0x3fee_a589_994c_ce13,
    0x3fee_ace5_422a_a0db, 0x3fee_b737_b0cd_c5e5, 0x3fee_c491_82a3_f090, 0x3fee_d503_b23e_255d,
    0x3fee_e89f_995a_d3ad, 0x3fee_ff76_f2fb_5e47, 0x3fef_199b_dd85_529c, 0x3fef_3720_dcef_9069,
    0x3fef_5818_dcfb_a487, 0x3fef_7c97_337b_9b5f, 0x3fef_a4af_a2a4_90da, 0x3fef_d076_5b6e_4540,
];

// ANCHOR: exp4
/// `e^x` of four f32 already widened to f64 (exact), not yet rounded back: the library's
/// arithmetic, lane by lane.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn exp4(x: __m256d) -> __m256d {
    let n = _mm256_set1_pd(N_OVER_LN2);
    let shifted = _mm256_fmadd_pd(n, x, _mm256_set1_pd(SHIFT)); // k in the low bits
    let k = _mm256_sub_pd(shifted, _mm256_set1_pd(SHIFT));
    let r = _mm256_fmsub_pd(n, x, k); // x·32/ln2 − k, with one rounding
    let bits = _mm256_castpd_si256(shifted);
    let i = _mm256_and_si256(bits, _mm256_set1_epi64x(31));
    // SAFETY: each index is below 32, the table's length.
    let t = unsafe { _mm256_i64gather_epi64::<8>(TABLE.as_ptr().cast(), i) };
    let s = _mm256_castsi256_pd(_mm256_add_epi64(t, _mm256_slli_epi64::<47>(bits)));
    // 2^(r/32) ≈ (c0·r + c1)·r² + (1 + c2·r), each bracket one fused step, then the sum
    let cubic = _mm256_fmadd_pd(_mm256_set1_pd(C[0]), r, _mm256_set1_pd(C[1]));
    let r2 = _mm256_mul_pd(r, r);
    let linear = _mm256_fmadd_pd(r, _mm256_set1_pd(C[2]), _mm256_set1_pd(1.0));
    _mm256_mul_pd(_mm256_fmadd_pd(cubic, r2, linear), s)
}
// ANCHOR_END: exp4

// ANCHOR: exp_inplace
/// `x[i] = x[i].exp()` for every element, eight at a time, the same bits as `f32::exp`.
#[target_feature(enable = "avx2,fma")]
pub fn exp_inplace(x: &mut [f32]) {
    let (eights, tail) = x.as_chunks_mut::<8>();
    for e in eights {
        // SAFETY: e is 8 f32.
        let v = unsafe { _mm256_loadu_ps(e.as_ptr()) };
        // below −104 the answer is +0 (`exp_edge`): those lanes take 0 in and give 0 out
        let deep = _mm256_cmp_ps::<_CMP_LT_OQ>(v, _mm256_set1_ps(-104.0));
        // the other lanes with |x| ≥ 88 (bits of |x| from 0x42b0_0000 up, infinities and NaN
        // included): the library's branches, in the library, afterwards
        let abs = _mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32(0x7fff_ffff));
        let big = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x42af_ffff));
        let edge = _mm256_andnot_ps(deep, _mm256_castsi256_ps(big));
        let lanes = _mm256_movemask_ps(edge) as u32;
        let before = (lanes != 0).then_some(*e); // what the library's lanes held
        let zero = _mm256_setzero_ps();
        let v = _mm256_blendv_ps(v, zero, _mm256_or_ps(deep, edge));
        let lo = exp4(_mm256_cvtps_pd(_mm256_castps256_ps128(v)));
        let hi = exp4(_mm256_cvtps_pd(_mm256_extractf128_ps::<1>(v)));
        let y = _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo));
        let y = _mm256_blendv_ps(y, zero, deep);
        // SAFETY: as the load.
        unsafe { _mm256_storeu_ps(e.as_mut_ptr(), y) };
        if let Some(before) = before {
            library_lanes(e, &before, lanes);
        }
    }
    tail.iter_mut().for_each(|v| *v = exp_edge(*v));
}
// ANCHOR_END: exp_inplace

/// `f32::exp` of one value, below −104 without asking the library: e^x is then under half
/// the smallest subnormal (2⁻¹⁵⁰ is e^−103.97), so the answer is +0, and the library would
/// reach it through its underflow branch, which sets `errno` (an attention row whose keys
/// lie far below the best one asks this hundreds of times).
#[inline]
pub(super) fn exp_edge(v: f32) -> f32 {
    if v < -104.0 { 0.0 } else { v.exp() }
}

/// The lanes of `e` set in `mask` (bit `i` for lane `i`) replaced by [`exp_edge`] of what
/// they held `before`.
#[inline]
pub(super) fn library_lanes(e: &mut [f32], before: &[f32], mut mask: u32) {
    while mask != 0 {
        let i = mask.trailing_zeros() as usize;
        e[i] = exp_edge(before[i]);
        mask &= mask - 1;
    }
}

/// Chapter 1's `softmax_rows_with`, compiled for AVX2 (its maxima, subtractions and
/// divisions eight lanes at a time; the same operations, so the same bits), its exponentials
/// by [`exp_inplace`].
#[target_feature(enable = "avx2,fma")]
pub fn softmax_rows(x: &mut [f32], n: usize) {
    ch01_tensors::ops::softmax_rows_with(x, n, |x| exp_inplace(x));
}
