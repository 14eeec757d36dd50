//! Eight interleaved Q4_0, Q4_1 or Q5_0 rows ([`crate::layout::packed::Packed`]'s groups)
//! against one to four tokens on AVX2: lane `r` of every vector is row `r`, so a block's eight
//! integer sums come out of one `vpmaddwd` with nothing to fold, and its eight scales out of
//! one 16-byte load and one conversion. The K-quants' packed kernels are in
//! [`super::avx2_packed_k`], the helpers both use in [`super::avx2_packed_helpers`], and the
//! dispatch by format in [`super::avx2_packed_dispatch`].

use ch06_quantization::Format;
use std::arch::x86_64::*;

use super::avx2_packed_helpers::{blocks, fetch_ahead, lanes};
use super::x86_helpers::splat_bits;
use crate::layout::kquant::Q8_0Wide;
use ch06_quantization::blocks::{BlockQ8_0, BlockQ8_1};

// ANCHOR: packed_sums
/// Each of the eight rows' `Σ q · a` over one block, for `N` tokens: the block's 128 bytes
/// of nibbles (`quants`: four chunks of 32, each 32-bit lane four bytes of one row) against
/// each token's 32 quants (`qs[t]`). A chunk's low nibbles meet the token's quants `4c..4c +
/// 4`, broadcast to every lane, its high nibbles quants `16 + 4c..`; `vpmaddubsw` makes
/// pairs, which add up in 16 bits (eight pairs of at most 2 · 15 · 128 = 3840 each, below
/// 2^15) until one `vpmaddwd` gives each lane its row's sum. With `qh` (Q5_0: each lane a
/// row's 32 fifth bits) the quants reach 31, and two chunks' pairs are as many as 16 bits
/// hold.
///
/// # Safety
/// `quants` must point at 128 readable bytes, and the CPU must have AVX2. This function
/// enables no CPU feature of its own, so that it can be `#[inline(always)]`: each kernel
/// that calls it (which enables AVX2) gets its own copy, with `qh` known and the loop
/// unrolled. As a function of its own it was called once a block, its sums returned
/// through memory.
#[inline(always)]
unsafe fn nibble_sums<const N: usize>(
    quants: *const u8,
    qh: Option<__m256i>,
    qs: [&[i8; 32]; N],
) -> [__m256i; N] {
    // SAFETY (the whole body): the caller's promises, AVX2 and 128 bytes at `quants`; each
    // token's quants are 32 bytes.
    unsafe {
        let (low, ones) = (_mm256_set1_epi8(0x0f), _mm256_set1_epi16(1));
        let mut s16 = [_mm256_setzero_si256(); N];
        let mut s32 = [_mm256_setzero_si256(); N];
        for c in 0..4 {
            let v = _mm256_loadu_si256(quants.add(32 * c).cast());
            let (mut lo, mut hi) = (
                _mm256_and_si256(v, low),
                _mm256_and_si256(_mm256_srli_epi16::<4>(v), low),
            );
            if let Some(qh) = qh {
                lo = _mm256_or_si256(lo, fifth_bits(qh, c));
                hi = _mm256_or_si256(hi, fifth_bits(qh, 4 + c));
            }
            for (s, q) in s16.iter_mut().zip(qs) {
                let q = q.as_ptr().cast::<i32>();
                let (qlo, qhi) = (q.add(c).read_unaligned(), q.add(4 + c).read_unaligned());
                let pairs = _mm256_add_epi16(
                    _mm256_maddubs_epi16(lo, _mm256_set1_epi32(qlo)),
                    _mm256_maddubs_epi16(hi, _mm256_set1_epi32(qhi)),
                );
                *s = _mm256_add_epi16(*s, pairs);
            }
            if c == 3 || (qh.is_some() && c == 1) {
                for (s32, s16) in s32.iter_mut().zip(&mut s16) {
                    *s32 = _mm256_add_epi32(*s32, _mm256_madd_epi16(*s16, ones));
                    *s16 = _mm256_setzero_si256();
                }
            }
        }
        s32
    }
}
// ANCHOR_END: packed_sums

/// Q5_0's fifth bits for the four elements `4k..4k + 4` of each lane's row (`k` 0..8: bits
/// `4k..4k + 4` of the lane's `qh`), as 16 or 0 in each of the lane's four bytes: the byte
/// of `qh` that holds them copied to all four, one bit kept in each, compared.
#[inline]
#[target_feature(enable = "avx2")]
fn fifth_bits(qh: __m256i, k: usize) -> __m256i {
    let byte = (k / 2) as i8; // bits 4k..4k + 4 lie in byte k / 2 of the lane
    let pick: [i8; 32] = std::array::from_fn(|i| (i % 16 / 4 * 4) as i8 + byte);
    // SAFETY: 32 bytes from a 32-byte array.
    let pick = unsafe { _mm256_loadu_si256(pick.as_ptr().cast()) };
    let bits = if k.is_multiple_of(2) {
        0x0804_0201
    } else {
        0x8040_2010_u32 as i32
    };
    let bits = _mm256_set1_epi32(bits);
    let set = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(qh, pick), bits), bits);
    _mm256_and_si256(set, _mm256_set1_epi8(16))
}

// ANCHOR: packed8_q4_0
/// A group of eight Q4_0 rows against `N` tokens (`a[t]`: Q8_0 blocks, `sums[t]`: each
/// block's `Σ a`): `out[t][r]` is chapter 6's `dot_q4_0_q8_0` of row `r` and token `t`, bit
/// for bit: the exact integer `Σ q·a − 8·Σ a`, then the scalar's `sum += sumi · (d · d_a)`
/// in each lane.
///
/// # Safety
/// None beyond the CPU's (AVX2 and F16C): the lengths are checked here.
#[target_feature(enable = "avx2,f16c")]
pub(super) unsafe fn packed8_q4_0<const N: usize>(
    w: &[u8],
    a: [&[BlockQ8_0]; N],
    sums: [&[i32]; N],
) -> [[f32; 8]; N] {
    let (bb, nb) = blocks(w, Format::Q4_0, a.iter().map(|a| a.len()));
    assert!(
        sums.iter().all(|s| s.len() == nb),
        "a sum per activation block"
    );
    let mut acc = [_mm256_setzero_ps(); N]; // lane r: row r's sum so far
    for b in 0..nb {
        // SAFETY: block b lies inside `w` (length checked); a prefetch never faults.
        unsafe {
            let base = w.as_ptr().add(b * bb);
            fetch_ahead(base, bb);
            let sumi = nibble_sums::<N>(base.add(16), None, std::array::from_fn(|t| &a[t][b].qs));
            let dw = _mm256_cvtph_ps(_mm_loadu_si128(base.cast()));
            for t in 0..N {
                let s = _mm256_sub_epi32(sumi[t], _mm256_set1_epi32(8 * sums[t][b]));
                let d = _mm256_mul_ps(dw, splat_bits(a[t][b].d));
                acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(_mm256_cvtepi32_ps(s), d));
            }
        }
    }
    // SAFETY: this function's own target features.
    acc.map(|v| unsafe { lanes(v) })
}
// ANCHOR_END: packed8_q4_0

/// A group of eight Q4_1 rows against `N` tokens' Q8_1 blocks: `out[t][r]` is chapter 6's
/// `dot_q4_1_q8_1` of row `r` and token `t`, bit for bit (the scalar's `(d · d_a) · sumi +
/// m · s` in each lane).
///
/// # Safety
/// None beyond the CPU's (AVX2 and F16C): the lengths are checked here.
#[target_feature(enable = "avx2,f16c")]
#[allow(clippy::needless_range_loop)] // `b` indexes every token's blocks
pub(super) unsafe fn packed8_q4_1<const N: usize>(w: &[u8], a: [&[BlockQ8_1]; N]) -> [[f32; 8]; N] {
    let (bb, nb) = blocks(w, Format::Q4_1, a.iter().map(|a| a.len()));
    let mut acc = [_mm256_setzero_ps(); N];
    for b in 0..nb {
        // SAFETY: as in packed8_q4_0.
        unsafe {
            let base = w.as_ptr().add(b * bb);
            fetch_ahead(base, bb);
            let sumi = nibble_sums::<N>(base.add(32), None, std::array::from_fn(|t| &a[t][b].qs));
            let dw = _mm256_cvtph_ps(_mm_loadu_si128(base.cast()));
            let mw = _mm256_cvtph_ps(_mm_loadu_si128(base.add(16).cast()));
            for t in 0..N {
                let (ab, s) = (&a[t][b], sumi[t]);
                let dd = _mm256_mul_ps(dw, splat_bits(ab.d));
                let term = _mm256_add_ps(
                    _mm256_mul_ps(dd, _mm256_cvtepi32_ps(s)),
                    _mm256_mul_ps(mw, splat_bits(ab.s)),
                );
                acc[t] = _mm256_add_ps(acc[t], term);
            }
        }
    }
    // SAFETY: this function's own target features.
    acc.map(|v| unsafe { lanes(v) })
}

/// A group of eight Q5_0 rows against `N` tokens' wide Q8_0 blocks: `out[t][r]` is chapter
/// 8's `dot_q5_0_q8_0` of row `r` and token `t`, summed over the blocks as its row product
/// sums them, bit for bit (the quants 0..31 with their fifth bits, `16 · Σ a` taken off,
/// then `(d · d_a) · sumi` in each lane).
///
/// # Safety
/// None beyond the CPU's (AVX2 and F16C): the lengths are checked here.
#[target_feature(enable = "avx2,f16c")]
#[allow(clippy::needless_range_loop)] // `b` indexes every token's blocks
pub(super) unsafe fn packed8_q5_0<const N: usize>(w: &[u8], a: [&[Q8_0Wide]; N]) -> [[f32; 8]; N] {
    let (bb, nb) = blocks(w, Format::Q5_0, a.iter().map(|a| a.len()));
    let mut acc = [_mm256_setzero_ps(); N];
    for b in 0..nb {
        // SAFETY: as in packed8_q4_0; the eight qh lie after the eight scales.
        unsafe {
            let base = w.as_ptr().add(b * bb);
            fetch_ahead(base, bb);
            let qh = _mm256_loadu_si256(base.add(16).cast());
            let qs = std::array::from_fn(|t| &a[t][b].qs);
            let sumi = nibble_sums::<N>(base.add(48), Some(qh), qs);
            let dw = _mm256_cvtph_ps(_mm_loadu_si128(base.cast()));
            for t in 0..N {
                let ab = &a[t][b];
                let s = _mm256_sub_epi32(sumi[t], _mm256_set1_epi32(16 * ab.sum));
                let d = _mm256_mul_ps(dw, _mm256_set1_ps(ab.d));
                acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(d, _mm256_cvtepi32_ps(s)));
            }
        }
    }
    // SAFETY: this function's own target features.
    acc.map(|v| unsafe { lanes(v) })
}
