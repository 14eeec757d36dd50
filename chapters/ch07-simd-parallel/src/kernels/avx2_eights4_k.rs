//! Four unpacked Q4_K or Q6_K rows against the same eight tokens: the eight-token kernels
//! of [`super::avx2_eights_q32_k`] with each step's activations, and each sub-block's sums, loaded
//! once for the four rows (see [`super::avx2_eights4_q32`] for why). Each row's integer sums are
//! the one-row kernel's (exact, whatever the order they are added in) and its float step
//! is the same, lane for lane: the same bits.

use std::arch::x86_64::*;

use super::avx2_eights4_q32::lanes;
use crate::layout::eights_k::{BlockK, EightsK, RowsK};

/// Rows `i..i + 4` of `rows`, checked to have one block per activation block.
fn four_rows<'r>(rows: &'r RowsK, i: usize, a: &EightsK) -> [&'r [BlockK]; 4] {
    let rs: [&[BlockK]; 4] = std::array::from_fn(|j| rows.row(i + j));
    let n = a.qs.len();
    assert!(
        rs.iter().all(|r| r.len() == n)
            && a.d.len() == n
            && a.sums.len() == n
            && a.sums16.len() == n,
        "one activation block per weight block"
    );
    rs
}

/// `vpmaddubsw` of quants `4k..4k + 4` at `w` (broadcast) against the step at `x`, summed
/// in 16 bits over `K` steps.
///
/// # Safety
/// `w` must be readable for `4K` bytes and `xs` holds the `K` steps' activations.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn steps<const K: usize>(w: *const u8, xs: &[__m256i; K]) -> __m256i {
    let mut sum = _mm256_setzero_si256();
    for (k, x) in xs.iter().enumerate() {
        // SAFETY: the caller's promise: 4 bytes at w + 4k.
        let q = unsafe { w.add(4 * k).cast::<i32>().read_unaligned() };
        sum = _mm256_add_epi16(sum, _mm256_maddubs_epi16(_mm256_set1_epi32(q), *x));
    }
    sum
}

/// `K` steps of activations from `x`, 32 bytes each.
///
/// # Safety
/// `x` must be readable for `32K` bytes.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn load<const K: usize>(x: *const i8) -> [__m256i; K] {
    // SAFETY: the caller's promise.
    std::array::from_fn(|k| unsafe { _mm256_loadu_si256(x.add(32 * k).cast()) })
}

/// Rows `i..i + 4` of unpacked Q4_K rows against eight tokens: row `r`'s lanes are
/// [`super::avx2_eights_q32_k::dot8_q4_k`]`(rows, i + r, a)`'s. Per half sub-block, four steps'
/// activations are loaded once; each row sums its four products in 16 bits and widens
/// them with its scale (`vpmaddwd`).
///
/// # Safety
/// None beyond the CPU's: the lengths are checked here.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn dot8x4_q4_k(rows: &RowsK, i: usize, a: &EightsK) -> [[f32; 8]; 4] {
    let rs = four_rows(rows, i, a);
    let mut acc = [_mm256_setzero_ps(); 4]; // row r, lane t: token t's sum so far
    for (b, x) in a.qs.iter().enumerate() {
        let (mut sumq, mut summ) = ([_mm256_setzero_si256(); 4], [_mm256_setzero_si256(); 4]);
        for s in 0..8 {
            for half in 0..2 {
                let at = 32 * s + 16 * half; // the half sub-block's first quant
                // SAFETY: 4 steps of 32 bytes from step at / 4, inside block b's 2048.
                let xs = unsafe { load::<4>(x.as_ptr().add(8 * at)) };
                for (r, sumq) in sumq.iter_mut().enumerate() {
                    let w = &rs[r][b];
                    // SAFETY: quants at..at + 16 of the block's 256.
                    let p = unsafe { steps::<4>(w.q.as_ptr().add(at), &xs) };
                    let scale = _mm256_set1_epi16(i16::from(w.sm[s]));
                    *sumq = _mm256_add_epi32(*sumq, _mm256_madd_epi16(p, scale));
                }
            }
            // SAFETY: 8 i32.
            let sums = unsafe { _mm256_loadu_si256(a.sums[b][s].as_ptr().cast()) };
            for (r, summ) in summ.iter_mut().enumerate() {
                let min = _mm256_set1_epi32(i32::from(rs[r][b].sm[8 + s]));
                *summ = _mm256_add_epi32(*summ, _mm256_madd_epi16(sums, min));
            }
        }
        // SAFETY: 8 f32.
        let da = unsafe { _mm256_loadu_ps(a.d[b].as_ptr()) };
        for r in 0..4 {
            let [dw, dmin] = rs[r][b].d;
            let p = _mm256_sub_ps(
                _mm256_mul_ps(
                    _mm256_mul_ps(_mm256_set1_ps(dw), da),
                    _mm256_cvtepi32_ps(sumq[r]),
                ),
                _mm256_mul_ps(
                    _mm256_mul_ps(_mm256_set1_ps(dmin), da),
                    _mm256_cvtepi32_ps(summ[r]),
                ),
            );
            acc[r] = _mm256_add_ps(acc[r], p);
        }
    }
    lanes(acc)
}

/// Rows `i..i + 4` of unpacked Q6_K rows against eight tokens: row `r`'s lanes are
/// [`super::avx2_eights_q32_k::dot8_q6_k`]`(rows, i + r, a)`'s. Per group of 16 quants, its four
/// steps' activations and its sums are loaded once for the four rows.
///
/// # Safety
/// None beyond the CPU's: the lengths are checked here.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn dot8x4_q6_k(rows: &RowsK, i: usize, a: &EightsK) -> [[f32; 8]; 4] {
    let rs = four_rows(rows, i, a);
    let mut acc = [_mm256_setzero_ps(); 4];
    for (b, x) in a.qs.iter().enumerate() {
        let (mut sum, mut offset) = ([_mm256_setzero_si256(); 4], [_mm256_setzero_si256(); 4]);
        for g in 0..16 {
            // SAFETY: the group's 4 steps of 32 bytes, inside block b's 2048.
            let xs = unsafe { load::<4>(x.as_ptr().add(128 * g)) };
            // SAFETY: 8 i32.
            let sums = unsafe { _mm256_loadu_si256(a.sums16[b][g].as_ptr().cast()) };
            for r in 0..4 {
                let w = &rs[r][b];
                let scale = i16::from(w.sm[g] as i8);
                let s16 = _mm256_set1_epi16(scale);
                // two steps at a time in 16 bits: 6-bit quants, four could overflow
                // SAFETY: quants 16g..16g + 16 of the block's 256.
                let (p0, p1) = unsafe {
                    let q = w.q.as_ptr().add(16 * g);
                    (
                        steps::<2>(q, &[xs[0], xs[1]]),
                        steps::<2>(q.add(8), &[xs[2], xs[3]]),
                    )
                };
                let p = _mm256_add_epi32(_mm256_madd_epi16(p0, s16), _mm256_madd_epi16(p1, s16));
                sum[r] = _mm256_add_epi32(sum[r], p);
                let s32 = _mm256_set1_epi32(i32::from(scale as u16));
                offset[r] = _mm256_add_epi32(offset[r], _mm256_madd_epi16(sums, s32));
            }
        }
        // SAFETY: 8 f32.
        let da = unsafe { _mm256_loadu_ps(a.d[b].as_ptr()) };
        for r in 0..4 {
            let sum = _mm256_sub_epi32(sum[r], _mm256_slli_epi32::<5>(offset[r]));
            let p = _mm256_mul_ps(
                _mm256_mul_ps(_mm256_set1_ps(rs[r][b].d[0]), da),
                _mm256_cvtepi32_ps(sum),
            );
            acc[r] = _mm256_add_ps(acc[r], p);
        }
    }
    lanes(acc)
}
