//! Eight interleaved Q4_0 or Q4_1 rows ([`crate::matrix::Packed`]'s groups) against one to
//! four tokens on AVX2: lane `r` of every vector is row `r`, so a block's eight integer sums
//! come out of one `vpmaddwd` with nothing to fold, and its eight scales out of one 16-byte
//! load and one conversion.

use std::arch::x86_64::*;

use ch06_quantization::blocks::{BlockQ8_0, BlockQ8_1};

use crate::matrix::{PackedToken, packed};

// ANCHOR: packed_sums
/// Each of the eight rows' `Σ q · a` over one block, for `N` tokens: the block's 128 bytes
/// of nibbles (`quants`: four chunks of 32, each 32-bit lane four bytes of one row) against
/// each token's 32 quants (`qs[t]`). A chunk's low nibbles meet the token's quants `4c..4c +
/// 4`, broadcast to every lane, its high nibbles quants `16 + 4c..`; `vpmaddubsw` makes
/// pairs, which add up in 16 bits (eight pairs of at most 2 · 15 · 128 = 3840 each, below
/// 2^15) until one `vpmaddwd` gives each lane its row's sum.
///
/// # Safety
/// `quants` must point at 128 readable bytes.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn nibble_sums<const N: usize>(quants: *const u8, qs: [&[i8; 32]; N]) -> [__m256i; N] {
    let low = _mm256_set1_epi8(0x0f);
    let mut s16 = [_mm256_setzero_si256(); N];
    for c in 0..4 {
        // SAFETY: the caller's promise; each token's quants are 32 bytes.
        unsafe {
            let v = _mm256_loadu_si256(quants.add(32 * c).cast());
            let (lo, hi) = (
                _mm256_and_si256(v, low),
                _mm256_and_si256(_mm256_srli_epi16::<4>(v), low),
            );
            for (s, q) in s16.iter_mut().zip(qs) {
                let q = q.as_ptr().cast::<i32>();
                let (qlo, qhi) = (q.add(c).read_unaligned(), q.add(4 + c).read_unaligned());
                let pairs = _mm256_add_epi16(
                    _mm256_maddubs_epi16(lo, _mm256_set1_epi32(qlo)),
                    _mm256_maddubs_epi16(hi, _mm256_set1_epi32(qhi)),
                );
                *s = _mm256_add_epi16(*s, pairs);
            }
        }
    }
    s16.map(|s| _mm256_madd_epi16(s, _mm256_set1_epi16(1)))
}
// ANCHOR_END: packed_sums

/// An f16 (its bits) as f32, in every lane.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn splat_f16(bits: u16) -> __m256 {
    _mm256_set1_ps(_mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(
        bits,
    )))))
}

/// Bytes ahead of the block being read that a kernel asks the cache for.
const AHEAD: usize = 1024;

/// Asks for the `bytes` that lie [`AHEAD`] of `at` (a prefetch never faults, wherever it
/// points): the group's blocks come in order, and the caches have them when their turn comes.
#[inline]
#[target_feature(enable = "avx2")]
fn fetch_ahead(at: *const u8, bytes: usize) {
    for line in (0..bytes).step_by(64) {
        _mm_prefetch::<_MM_HINT_T0>(at.wrapping_add(AHEAD + line).cast());
    }
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
    let bb = packed::group_block_bytes(ch06_quantization::Format::Q4_0);
    let nb = w.len() / bb;
    assert!(
        w.len() == nb * bb
            && a.iter()
                .zip(&sums)
                .all(|(a, s)| a.len() == nb && s.len() == nb),
        "a group's blocks, one per activation block"
    );
    let mut acc = [_mm256_setzero_ps(); N]; // lane r: row r's sum so far
    for b in 0..nb {
        // SAFETY: block b lies inside `w` (length checked); a prefetch never faults.
        unsafe {
            let base = w.as_ptr().add(b * bb);
            fetch_ahead(base, bb);
            let sumi = nibble_sums::<N>(base.add(16), std::array::from_fn(|t| &a[t][b].qs));
            let dw = _mm256_cvtph_ps(_mm_loadu_si128(base.cast()));
            for t in 0..N {
                let s = _mm256_sub_epi32(sumi[t], _mm256_set1_epi32(8 * sums[t][b]));
                let d = _mm256_mul_ps(dw, splat_f16(a[t][b].d));
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
    let bb = packed::group_block_bytes(ch06_quantization::Format::Q4_1);
    let nb = w.len() / bb;
    assert!(
        w.len() == nb * bb && a.iter().all(|a| a.len() == nb),
        "a group's blocks, one per activation block"
    );
    let mut acc = [_mm256_setzero_ps(); N];
    for b in 0..nb {
        // SAFETY: as in packed8_q4_0.
        unsafe {
            let base = w.as_ptr().add(b * bb);
            fetch_ahead(base, bb);
            let sumi = nibble_sums::<N>(base.add(32), std::array::from_fn(|t| &a[t][b].qs));
            let dw = _mm256_cvtph_ps(_mm_loadu_si128(base.cast()));
            let mw = _mm256_cvtph_ps(_mm_loadu_si128(base.add(16).cast()));
            for t in 0..N {
                let (ab, s) = (&a[t][b], sumi[t]);
                let dd = _mm256_mul_ps(dw, splat_f16(ab.d));
                let term = _mm256_add_ps(
                    _mm256_mul_ps(dd, _mm256_cvtepi32_ps(s)),
                    _mm256_mul_ps(mw, splat_f16(ab.s)),
                );
                acc[t] = _mm256_add_ps(acc[t], term);
            }
        }
    }
    // SAFETY: this function's own target features.
    acc.map(|v| unsafe { lanes(v) })
}

/// A vector's eight lanes.
#[inline]
#[target_feature(enable = "avx")]
unsafe fn lanes(v: __m256) -> [f32; 8] {
    let mut out = [0.0f32; 8];
    // SAFETY: eight f32 into eight f32.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), v) };
    out
}

/// [`packed::packed8_scalar`]'s contract on AVX2: one to four tokens of one format, four at
/// a time through the four-token kernels.
///
/// # Safety
/// The CPU must have AVX2 and F16C.
pub(super) unsafe fn packed8(group: &[u8], tokens: &[PackedToken], out: &mut [[f32; 8]]) {
    assert!(out.len() >= tokens.len(), "an output per token");
    let mut t = 0;
    while t < tokens.len() {
        let n = if tokens.len() - t >= 4 { 4 } else { 1 };
        let toks = &tokens[t..t + n];
        // SAFETY: the caller's promise; the kernels check the lengths.
        unsafe {
            match toks[0] {
                PackedToken::Q4_0(..) => {
                    let pick = |i: usize| match toks[i] {
                        PackedToken::Q4_0(a, s) => (a, s),
                        PackedToken::Q4_1(_) => panic!("one format per product"),
                    };
                    if n == 4 {
                        let p: [_; 4] = std::array::from_fn(pick);
                        let r = packed8_q4_0::<4>(group, p.map(|p| p.0), p.map(|p| p.1));
                        out[t..t + 4].copy_from_slice(&r);
                    } else {
                        let (a, s) = pick(0);
                        out[t] = packed8_q4_0::<1>(group, [a], [s])[0];
                    }
                }
                PackedToken::Q4_1(_) => {
                    let pick = |i: usize| match toks[i] {
                        PackedToken::Q4_1(a) => a,
                        PackedToken::Q4_0(..) => panic!("one format per product"),
                    };
                    if n == 4 {
                        let r = packed8_q4_1::<4>(group, std::array::from_fn(pick));
                        out[t..t + 4].copy_from_slice(&r);
                    } else {
                        out[t] = packed8_q4_1::<1>(group, [pick(0)])[0];
                    }
                }
            }
        }
        t += n;
    }
}
