//! AVX2 kernels for the K-quants (Q4_K and Q6_K): `R` rows against `T` tokens, each weight
//! block unpacked once for its `T` tokens, the sub-block scales riding in `vpmaddwd`'s second
//! operand so that a super-block needs one horizontal sum per token, not one per sub-block.

use crate::layout::kquant::{BlockQ8K, Q4_K_BYTES, Q6_K_BYTES};

use std::arch::x86_64::*;

use super::x86_helpers::{f16, grid_sums, load};
use crate::kernels::x86_helpers::prefetch_next_rows;

// ANCHOR: avx2_q4_k_scales
/// Q4_K's eight 6-bit scales and eight 6-bit mins as sixteen bytes (scales first): the
/// rule of [`crate::layout::kquant::scale_min_k4`] applied to all eight pairs at once, on three words.
#[inline]
pub(super) fn scales_and_mins(packed: &[u8]) -> [u8; 16] {
    let word = |i: usize| u32::from_le_bytes(packed[4 * i..4 * i + 4].try_into().expect("4"));
    let (w0, w1, w2) = (word(0), word(1), word(2));
    let six = 0x3f3f_3f3f; // the low 6 bits of each byte
    let nib = 0x0f0f_0f0f;
    let two = 0x0303_0303;
    let scales_lo = w0 & six;
    let mins_lo = w1 & six;
    let scales_hi = (w2 & nib) | (((w0 >> 6) & two) << 4);
    let mins_hi = ((w2 >> 4) & nib) | (((w1 >> 6) & two) << 4);
    let mut out = [0u8; 16];
    for (i, w) in [scales_lo, scales_hi, mins_lo, mins_hi]
        .into_iter()
        .enumerate()
    {
        out[4 * i..4 * i + 4].copy_from_slice(&w.to_le_bytes());
    }
    out
}
// ANCHOR_END: avx2_q4_k_scales

// ANCHOR: avx2_q4_k
/// `R` Q4_K rows against `T` tokens (1 × 1, 1 × 4 for a prefill, 4 × 1 for a decode step):
/// each weight block is unpacked once for its `T` tokens.
#[target_feature(enable = "avx2,f16c")]
pub(super) unsafe fn q4_k<const R: usize, const T: usize>(
    w: [&[u8]; R],
    a: [&[BlockQ8K]; T],
) -> [[f32; T]; R] {
    let low = _mm256_set1_epi8(0x0f);
    // Sub-block j's scale (an i16) in every lane: one byte shuffle each.
    let pick: [__m256i; 8] = std::array::from_fn(|j| _mm256_set1_epi16(0x0100 + 0x0202 * j as i16));
    let mut acc = [[0.0f32; T]; R];
    let blocks = w[0].len() / Q4_K_BYTES;
    for i in 0..blocks {
        let mut sums = [[_mm256_setzero_si256(); T]; R];
        let mut min_sums = [[_mm256_setzero_si256(); T]; R];
        // Each token's activation sums of sub-blocks (pairs of its 16-value sums).
        let pairs: [__m128i; T] = std::array::from_fn(|t| {
            // SAFETY: 16 i16 sums.
            let bs = unsafe { _mm256_loadu_si256(a[t][i].bsums.as_ptr().cast()) };
            let h = _mm256_hadd_epi16(bs, bs); // per half: 4 pair sums, twice
            _mm256_castsi256_si128(_mm256_permute4x64_epi64::<0b00_00_10_00>(h))
        });
        // ANCHOR_END: avx2_q4_k
        // ANCHOR: avx2_q4_k_rows
        if R == 4 {
            prefetch_next_rows(w[0].as_ptr(), 4 * blocks * Q4_K_BYTES, blocks, i);
        }
        for r in 0..R {
            let b = &w[r][i * Q4_K_BYTES..(i + 1) * Q4_K_BYTES];
            let sm = scales_and_mins(&b[4..16]);
            // SAFETY: 16 bytes.
            let sm = _mm256_cvtepu8_epi16(unsafe { _mm_loadu_si128(sm.as_ptr().cast()) });
            let scales = _mm256_permute4x64_epi64::<0b01_00_01_00>(sm); // 8 scales, twice
            let mins = _mm256_extracti128_si256::<1>(sm);
            for t in 0..T {
                // Σ_s min_s · (activation sum of sub-block s), in four lanes
                min_sums[r][t] = _mm256_zextsi128_si256(_mm_madd_epi16(mins, pairs[t]));
            }
            for c in 0..4 {
                // 32 bytes: sub-block 2c in the low nibbles, 2c + 1 in the high ones.
                // SAFETY: bytes 16 + 32c .. 48 + 32c of a 144-byte block.
                let q = unsafe { _mm256_loadu_si256(b.as_ptr().add(16 + 32 * c).cast()) };
                let lo = _mm256_and_si256(q, low);
                let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q), low);
                let s0 = _mm256_shuffle_epi8(scales, pick[2 * c]);
                let s1 = _mm256_shuffle_epi8(scales, pick[2 * c + 1]);
                for t in 0..T {
                    let qs = &a[t][i].qs;
                    // scale · (q·a pairs), summed in i32 lanes: exact, as the scalar sum.
                    let p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, load(qs, 64 * c)), s0);
                    let p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, load(qs, 64 * c + 32)), s1);
                    sums[r][t] = _mm256_add_epi32(sums[r][t], _mm256_add_epi32(p0, p1));
                }
            }
        }
        let totals = grid_sums(&sums);
        let min_totals = grid_sums(&min_sums);
        for r in 0..R {
            let b = &w[r][i * Q4_K_BYTES..];
            let (d, dmin) = (f16(b, 0), f16(b, 2));
            for t in 0..T {
                let ad = a[t][i].d;
                acc[r][t] += d * ad * totals[r][t] as f32 - dmin * ad * min_totals[r][t] as f32;
            }
        }
    }
    acc
}
// ANCHOR_END: avx2_q4_k_rows

/// Q6_K's quants 0..63 from bytes of `ql` (`ql0`: a half's first 32, `ql1`: its next 32)
/// and the matching bytes of `qh`: four runs, the low nibbles of `ql0` with bits 0–1 of
/// `qh`, of `ql1` with bits 2–3, the high nibbles of `ql0` with bits 4–5, of `ql1` with 6–7.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn q6_k_runs(ql0: __m256i, ql1: __m256i, qh: __m256i) -> [__m256i; 4] {
    let (low, three) = (_mm256_set1_epi8(0x0f), _mm256_set1_epi8(3));
    [
        _mm256_or_si256(
            _mm256_and_si256(ql0, low),
            _mm256_slli_epi16::<4>(_mm256_and_si256(qh, three)),
        ),
        _mm256_or_si256(
            _mm256_and_si256(ql1, low),
            _mm256_slli_epi16::<2>(_mm256_and_si256(qh, _mm256_slli_epi16::<2>(three))),
        ),
        _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16::<4>(ql0), low),
            _mm256_and_si256(qh, _mm256_slli_epi16::<4>(three)),
        ),
        _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16::<4>(ql1), low),
            _mm256_and_si256(_mm256_srli_epi16::<2>(qh), _mm256_slli_epi16::<4>(three)),
        ),
    ]
}

/// `R` Q6_K rows against `T` tokens.
#[target_feature(enable = "avx2,f16c")]
pub(super) unsafe fn q6_k<const R: usize, const T: usize>(
    w: [&[u8]; R],
    a: [&[BlockQ8K]; T],
) -> [[f32; T]; R] {
    // For run k (groups 2k and 2k + 1): group 2k's scale in every i16 of the low half,
    // 2k + 1's in the high half, picked by one byte shuffle from the scales widened to
    // i16 (groups 0–7 or 8–15 in both halves).
    // The shuffle index of i16 lane `g`: its two bytes, 2g and 2g + 1.
    let lane = |g: i16| (2 * g) | ((2 * g + 1) << 8);
    let pick: [__m256i; 4] = std::array::from_fn(|k| {
        let k = k as i16;
        _mm256_set_m128i(_mm_set1_epi16(lane(2 * k + 1)), _mm_set1_epi16(lane(2 * k)))
    });
    let mut acc = [[0.0f32; T]; R];
    let blocks = w[0].len() / Q6_K_BYTES;
    for i in 0..blocks {
        let mut sums = [[_mm256_setzero_si256(); T]; R];
        if R == 4 {
            prefetch_next_rows(w[0].as_ptr(), 4 * blocks * Q6_K_BYTES, blocks, i);
        }
        for r in 0..R {
            let b = &w[r][i * Q6_K_BYTES..(i + 1) * Q6_K_BYTES];
            // SAFETY: the 16 scale bytes at 192..208 of a 210-byte block.
            let sc = _mm256_cvtepi8_epi16(unsafe { _mm_loadu_si128(b.as_ptr().add(192).cast()) });
            let halves = [
                _mm256_permute4x64_epi64::<0b01_00_01_00>(sc), // groups 0–7, twice
                _mm256_permute4x64_epi64::<0b11_10_11_10>(sc), // groups 8–15, twice
            ];
            for t in 0..T {
                // Σ(q − 32)·a = Σ q·a − 32·Σ a: the offset's share, per group pair, taken
                // out of the lanes before the one horizontal sum.
                // SAFETY: 16 i16 sums.
                let bs = unsafe { _mm256_loadu_si256(a[t][i].bsums.as_ptr().cast()) };
                sums[r][t] = _mm256_sub_epi32(
                    sums[r][t],
                    _mm256_slli_epi32::<5>(_mm256_madd_epi16(sc, bs)),
                );
            }
            for h in 0..2 {
                // SAFETY: ql bytes 64h..64h+64, qh bytes 128+32h..+32 of a 210-byte block.
                let (ql0, ql1, qh) = unsafe {
                    (
                        _mm256_loadu_si256(b.as_ptr().add(64 * h).cast()),
                        _mm256_loadu_si256(b.as_ptr().add(64 * h + 32).cast()),
                        _mm256_loadu_si256(b.as_ptr().add(128 + 32 * h).cast()),
                    )
                };
                // The four runs of 32 values of this half, unsigned 0..64.
                let runs = q6_k_runs(ql0, ql1, qh);
                for (run, q) in runs.into_iter().enumerate() {
                    let base = 128 * h + 32 * run;
                    let k = 4 * h + run; // groups 2k, 2k + 1
                    let s = _mm256_shuffle_epi8(halves[k / 4], pick[k % 4]);
                    for t in 0..T {
                        let p =
                            _mm256_madd_epi16(_mm256_maddubs_epi16(q, load(&a[t][i].qs, base)), s);
                        sums[r][t] = _mm256_add_epi32(sums[r][t], p);
                    }
                }
            }
        }
        let totals = grid_sums(&sums);
        for r in 0..R {
            let d = f16(w[r], i * Q6_K_BYTES + 208);
            for t in 0..T {
                acc[r][t] += d * a[t][i].d * totals[r][t] as f32;
            }
        }
    }
    acc
}
