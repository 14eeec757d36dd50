//! The four-row eight-token prefill kernels of [`super::avx2_eights4_q32`] and
//! [`super::avx2_eights4_k`] in 512-bit registers: two eights of tokens side by side, the
//! first eight in lanes 0..8 and the second in lanes 8..16. One broadcast of a weight's four
//! quants now meets sixteen tokens, and each multiply-add instruction does twice the work
//! for the same count of instructions, where a core runs 512-bit operations at full width.
//!
//! Each lane still follows one token through the same steps as the 256-bit kernel: the same
//! exact integer sums per block, the same float operations on them, added in block order.
//! So lanes 0..8 are the 256-bit kernel's result for the first eight, bit for bit, and
//! lanes 8..16 its result for the second.

use std::arch::x86_64::*;

use crate::layout::eights::{Block32, Eights};
use crate::layout::eights_k::{BlockK, EightsK, RowsK};

/// Two eights' 32 bytes (at `lo` and `hi`) in one register, `lo`'s in lanes 0..8.
///
/// # Safety
/// `lo` and `hi` must each be readable for 32 bytes.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn pair(lo: *const u8, hi: *const u8) -> __m512i {
    // SAFETY: the caller's promise.
    unsafe {
        _mm512_inserti64x4::<1>(
            _mm512_castsi256_si512(_mm256_loadu_si256(lo.cast())),
            _mm256_loadu_si256(hi.cast()),
        )
    }
}

/// Two eights' eight f32 in one register, `lo`'s in lanes 0..8.
#[inline]
#[target_feature(enable = "avx512f")]
fn pair_ps(lo: &[f32; 8], hi: &[f32; 8]) -> __m512 {
    // SAFETY: 8 f32 each, 32 bytes.
    _mm512_castsi512_ps(unsafe { pair(lo.as_ptr().cast(), hi.as_ptr().cast()) })
}

/// Each row's sixteen lanes written out.
#[inline]
#[target_feature(enable = "avx512f")]
fn lanes<const R: usize>(acc: [__m512; R]) -> [[f32; 16]; R] {
    acc.map(|v| {
        let mut out = [0.0f32; 16];
        // SAFETY: sixteen f32 into sixteen f32.
        unsafe { _mm512_storeu_ps(out.as_mut_ptr(), v) };
        out
    })
}

/// The weight's four quants at `w` in every 32-bit lane.
///
/// # Safety
/// `w` must be readable for 4 bytes.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn quants(w: *const u8) -> __m512i {
    // SAFETY: the caller's promise.
    _mm512_set1_epi32(unsafe { w.cast::<i32>().read_unaligned() })
}

// ANCHOR: sixteen_row32
/// `R` (four or eight) unpacked Q4_0, Q5_0 or Q4_1 rows (Q4_1 with `Q4_1`) against two
/// eights of tokens: row `r`'s lanes 0..8 are [`super::avx2_eights4_q32::dot8x4_row32`]'s
/// for `a[0]`, lanes 8..16 for `a[1]`. Per block, eight steps of one 512-bit load of both
/// eights' activations and, for each row, a broadcast of its four quants and a `vpdpbusd`.
///
/// # Safety
/// The CPU must have AVX-512 F, BW, VL and VNNI; the lengths are checked here.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2")]
pub(super) unsafe fn dot16_rows32<const Q4_1: bool, const R: usize>(
    rows: [&[Block32]; R],
    a: [&Eights; 2],
) -> [[f32; 16]; R] {
    let n = a[0].qs.len();
    assert!(
        rows.iter().all(|r| r.len() == n)
            && a.iter().all(|a| {
                a.qs.len() == n && a.d.len() == n && a.offset.len() == n && a.s.len() == n
            }),
        "one activation block per weight block"
    );
    let mut acc = [_mm512_setzero_ps(); R]; // row r, lane t: token t's sum so far
    for (b, (x0, x1)) in a[0].qs.iter().zip(&a[1].qs).enumerate() {
        let (x0, x1): (*const u8, *const u8) = (x0.as_ptr().cast(), x1.as_ptr().cast());
        let w: [&Block32; R] = std::array::from_fn(|r| &rows[r][b]);
        let mut dots = [_mm512_setzero_si512(); R];
        for s in 0..8 {
            // SAFETY: step s's 32 bytes of each eight's 256, and quants 4s..4s + 4 of 32.
            unsafe {
                let xs = pair(x0.add(32 * s), x1.add(32 * s));
                for r in 0..R {
                    let q = quants(w[r].q.as_ptr().add(4 * s));
                    dots[r] = _mm512_dpbusd_epi32(dots[r], q, xs);
                }
            }
        }
        let da = pair_ps(&a[0].d[b], &a[1].d[b]);
        for r in 0..R {
            let dw = _mm512_set1_ps(w[r].d);
            let p = if Q4_1 {
                let s = pair_ps(&a[0].s[b], &a[1].s[b]);
                _mm512_add_ps(
                    _mm512_mul_ps(_mm512_mul_ps(dw, da), _mm512_cvtepi32_ps(dots[r])),
                    _mm512_mul_ps(_mm512_set1_ps(w[r].m), s),
                )
            } else {
                // SAFETY: 8 i32 of block b of each eight.
                let offset = unsafe {
                    pair(
                        a[0].offset[b].as_ptr().cast(),
                        a[1].offset[b].as_ptr().cast(),
                    )
                };
                let dots = _mm512_cvtepi32_ps(_mm512_sub_epi32(dots[r], offset));
                _mm512_mul_ps(_mm512_mul_ps(dw, da), dots)
            };
            acc[r] = _mm512_add_ps(acc[r], p);
        }
    }
    lanes(acc)
}
// ANCHOR_END: sixteen_row32

/// Rows `i..i + 4` of `rows`, checked to have one block per activation block of both eights.
fn four_rows<'r>(rows: &'r RowsK, i: usize, a: [&EightsK; 2]) -> [&'r [BlockK]; 4] {
    let rs: [&[BlockK]; 4] = std::array::from_fn(|j| rows.row(i + j));
    let n = a[0].qs.len();
    assert!(
        rs.iter().all(|r| r.len() == n)
            && a.iter().all(|a| {
                a.qs.len() == n && a.d.len() == n && a.sums.len() == n && a.sums16.len() == n
            }),
        "one activation block per weight block"
    );
    rs
}

/// A sub-block's (or group's) integer sum for each of sixteen tokens: the quants at `w`,
/// four a step, broadcast, against `K` steps, each step a `vpdpbusd` (four byte products
/// added into each 32-bit lane), the steps alternating between two sums so that one
/// multiply-add need not wait for the one before; the first starts from `start`. Exact: the
/// same integers `vpmaddubsw` adds in 16 bits in the eight-token kernels.
///
/// # Safety
/// `w` must be readable for `4K` bytes; the CPU must have AVX-512 F, BW, VL and VNNI.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn dot_steps<const K: usize>(w: *const u8, xs: &[__m512i; K], start: __m512i) -> __m512i {
    let mut sums = [start, _mm512_setzero_si512()];
    for (k, x) in xs.iter().enumerate() {
        // SAFETY: the caller's promise: 4 bytes at w + 4k.
        let q = unsafe { quants(w.add(4 * k)) };
        sums[k % 2] = _mm512_dpbusd_epi32(sums[k % 2], q, *x);
    }
    _mm512_add_epi32(sums[0], sums[1])
}

/// `K` steps of both eights' activations, from step `at` of super-block `b`.
#[inline]
#[target_feature(enable = "avx512f")]
fn load<const K: usize>(a: [&EightsK; 2], b: usize, at: usize) -> [__m512i; K] {
    let (x0, x1) = (&a[0].qs[b][32 * at..], &a[1].qs[b][32 * at..]);
    assert!(x0.len() >= 32 * K && x1.len() >= 32 * K, "K steps");
    // SAFETY: 32 bytes of step k of each eight, inside the slices (checked).
    std::array::from_fn(|k| unsafe {
        pair(
            x0.as_ptr().add(32 * k).cast(),
            x1.as_ptr().add(32 * k).cast(),
        )
    })
}

/// Rows `i..i + 4` of unpacked Q4_K rows against two eights of tokens: row `r`'s lanes
/// 0..8 are [`super::avx2_eights4_k::dot8x4_q4_k`]`(rows, i, a[0])[r]`, lanes 8..16 the same
/// for `a[1]`. A sub-block's 32 quants are eight `vpdpbusd` steps into 32-bit lanes, then one
/// multiply by its scale: the same integers as the 256-bit kernel's 16-bit sums widened by
/// `vpmaddwd`, in fewer instructions.
///
/// # Safety
/// The CPU must have AVX-512 F, BW, VL and VNNI; the lengths are checked here.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2")]
pub(super) unsafe fn dot16x4_q4_k(rows: &RowsK, i: usize, a: [&EightsK; 2]) -> [[f32; 16]; 4] {
    let rs = four_rows(rows, i, a);
    let mut acc = [_mm512_setzero_ps(); 4];
    for (b, d) in a[0].d.iter().zip(&a[1].d).enumerate() {
        let (mut sumq, mut summ) = ([_mm512_setzero_si512(); 4], [_mm512_setzero_si512(); 4]);
        for s in 0..8 {
            let xs = load::<8>(a, b, 8 * s); // the sub-block's 32 quants: steps 8s..8s + 8
            for (r, sumq) in sumq.iter_mut().enumerate() {
                let w = &rs[r][b];
                // SAFETY: quants 32s..32s + 32 of the block's 256.
                let dot = unsafe {
                    dot_steps::<8>(w.q.as_ptr().add(32 * s), &xs, _mm512_setzero_si512())
                };
                let scale = _mm512_set1_epi32(i32::from(w.sm[s]));
                *sumq = _mm512_add_epi32(*sumq, _mm512_mullo_epi32(dot, scale));
            }
            // SAFETY: 8 i32 of each eight.
            let sums = unsafe {
                pair(
                    a[0].sums[b][s].as_ptr().cast(),
                    a[1].sums[b][s].as_ptr().cast(),
                )
            };
            for (r, summ) in summ.iter_mut().enumerate() {
                let min = _mm512_set1_epi32(i32::from(rs[r][b].sm[8 + s]));
                *summ = _mm512_add_epi32(*summ, _mm512_madd_epi16(sums, min));
            }
        }
        let da = pair_ps(d.0, d.1);
        for r in 0..4 {
            let [dw, dmin] = rs[r][b].d;
            let p = _mm512_sub_ps(
                _mm512_mul_ps(
                    _mm512_mul_ps(_mm512_set1_ps(dw), da),
                    _mm512_cvtepi32_ps(sumq[r]),
                ),
                _mm512_mul_ps(
                    _mm512_mul_ps(_mm512_set1_ps(dmin), da),
                    _mm512_cvtepi32_ps(summ[r]),
                ),
            );
            acc[r] = _mm512_add_ps(acc[r], p);
        }
    }
    lanes(acc)
}

/// Rows `i..i + 4` of unpacked Q6_K rows against two eights of tokens: row `r`'s lanes
/// 0..8 are [`super::avx2_eights4_k::dot8x4_q6_k`]`(rows, i, a[0])[r]`, lanes 8..16 the same
/// for `a[1]`. A group's four steps start from −32 times the tokens' sum of its 16
/// activations (the quants' offset), so one multiply by the group's scale gives
/// `scale · Σ (q − 32) · x`: the integer the 256-bit kernel reaches by taking the offset
/// off once a block.
///
/// # Safety
/// The CPU must have AVX-512 F, BW, VL and VNNI; the lengths are checked here.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2")]
pub(super) unsafe fn dot16x4_q6_k(rows: &RowsK, i: usize, a: [&EightsK; 2]) -> [[f32; 16]; 4] {
    let rs = four_rows(rows, i, a);
    let mut acc = [_mm512_setzero_ps(); 4];
    for (b, d) in a[0].d.iter().zip(&a[1].d).enumerate() {
        let mut sum = [_mm512_setzero_si512(); 4];
        for g in 0..16 {
            let xs = load::<4>(a, b, 4 * g);
            // SAFETY: 8 i32 of each eight.
            let sums = unsafe {
                pair(
                    a[0].sums16[b][g].as_ptr().cast(),
                    a[1].sums16[b][g].as_ptr().cast(),
                )
            };
            let offset = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32::<5>(sums));
            for (r, sum) in sum.iter_mut().enumerate() {
                let w = &rs[r][b];
                // SAFETY: quants 16g..16g + 16 of the block's 256.
                let dot = unsafe { dot_steps::<4>(w.q.as_ptr().add(16 * g), &xs, offset) };
                let scale = _mm512_set1_epi32(i32::from(w.sm[g] as i8));
                *sum = _mm512_add_epi32(*sum, _mm512_mullo_epi32(dot, scale));
            }
        }
        let da = pair_ps(d.0, d.1);
        for r in 0..4 {
            let p = _mm512_mul_ps(
                _mm512_mul_ps(_mm512_set1_ps(rs[r][b].d[0]), da),
                _mm512_cvtepi32_ps(sum[r]),
            );
            acc[r] = _mm512_add_ps(acc[r], p);
        }
    }
    lanes(acc)
}
