//! Q5_0's products on AVX2: `R` rows against `T` tokens, each block's fifth bits spread
//! over the bytes, the quants made signed (−16..16) and chapter 7's sign trick moving their
//! sign onto the activations.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

use super::x86_helpers::{f16, grid_sums};
use crate::layout::kquant::{Q5_0_BYTES, Q8_0Wide};

/// `R` Q5_0 rows against `T` tokens.
#[target_feature(enable = "avx2,f16c")]
pub(super) unsafe fn q5_0<const R: usize, const T: usize>(
    w: [&[u8]; R],
    a: [&[Q8_0Wide]; T],
) -> [[f32; T]; R] {
    let low = _mm_set1_epi8(0x0f);
    // Byte k of the 32 gets bit k of qh: spread qh's bytes, then test one bit per lane.
    let spread = _mm256_setr_epi8(
        0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3,
        3, 3,
    );
    let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    let sixteen = _mm256_set1_epi8(16);
    let ones = _mm256_set1_epi16(1);
    let mut acc = [[0.0f32; T]; R];
    let mut acc4 = _mm_setzero_ps(); // the four pairs' sums when R · T = 4
    let blocks = w[0].len() / Q5_0_BYTES;
    for i in 0..blocks {
        // Each token's activations, unsigned, once for all R rows.
        let av: [__m256i; T] = std::array::from_fn(|t| {
            // SAFETY: 32 quants of a Q8_0 block.
            unsafe { _mm256_loadu_si256(a[t][i].qs.as_ptr().cast()) }
        });
        let mut sums = [[_mm256_setzero_si256(); T]; R];
        for r in 0..R {
            let b = &w[r][i * Q5_0_BYTES..(i + 1) * Q5_0_BYTES];
            let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
            // SAFETY: 16 nibble bytes at 6..22 of a 22-byte block.
            let nib = unsafe { _mm_loadu_si128(b.as_ptr().add(6).cast()) };
            let q = _mm256_set_m128i(
                _mm_and_si128(_mm_srli_epi16::<4>(nib), low),
                _mm_and_si128(nib, low),
            );
            let h = _mm256_shuffle_epi8(_mm256_set1_epi32(qh as i32), spread);
            let h = _mm256_cmpeq_epi8(_mm256_and_si256(h, bit), bit);
            let q = _mm256_or_si256(q, _mm256_and_si256(h, sixteen)); // 0..32
            let q = _mm256_sub_epi8(q, sixteen); // −16..16, signed
            for t in 0..T {
                // |a| unsigned (−128 becomes the byte 128, read right), q given a's sign:
                // |a|·(q·sign a) = q·a, and q (at most 16 in size) never overflows a byte.
                sums[r][t] = _mm256_madd_epi16(
                    _mm256_maddubs_epi16(
                        _mm256_sign_epi8(av[t], av[t]),
                        _mm256_sign_epi8(q, av[t]),
                    ),
                    ones,
                );
            }
        }
        let dw = |r: usize| f16(w[r], i * Q5_0_BYTES);
        let da = |t: usize| a[t][i].d;
        if R * T == 4 {
            // Four (row, token) pairs at once: the same three roundings per lane as the
            // scalar `acc += dw · da · dot`, in four lanes.
            let flat: [__m256i; 4] = std::array::from_fn(|k| sums[k / T][k % T]);
            let h = _mm256_hadd_epi32(
                _mm256_hadd_epi32(flat[0], flat[1]),
                _mm256_hadd_epi32(flat[2], flat[3]),
            );
            let dots = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h));
            let ws = _mm_setr_ps(dw(0), dw(1 % R), dw(2 % R), dw(3 % R));
            let as_ = _mm_setr_ps(da(0), da(1 % T), da(2 % T), da(3 % T));
            acc4 = _mm_add_ps(acc4, _mm_mul_ps(_mm_mul_ps(ws, as_), _mm_cvtepi32_ps(dots)));
        } else {
            let dots = grid_sums(&sums);
            for r in 0..R {
                for t in 0..T {
                    acc[r][t] += dw(r) * da(t) * dots[r][t] as f32;
                }
            }
        }
    }
    if R * T == 4 {
        let mut lanes = [0.0f32; 4];
        // SAFETY: four f32 into four f32.
        unsafe { _mm_storeu_ps(lanes.as_mut_ptr(), acc4) };
        for (k, v) in lanes.into_iter().enumerate() {
            acc[k / T][k % T] = v;
        }
    }
    acc
}
