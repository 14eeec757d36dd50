//! Eight Q8_0 rows against eight tokens with the rows in the lanes: the LM head of a batch of
//! decode rows (Gemma-3's is 262 144 rows of Q8_0).
//!
//! [`super::avx512_sixteens_q8_0`] puts tokens in the lanes: a step broadcasts one row's four
//! quants and moves the row's signs onto the activations, work done again for every row. Here a
//! register holds four quants of each of eight rows, read from the file as they lie and
//! transposed once per block (an 8 × 8 transpose of 32-bit words), and each token's four
//! activations are broadcast against it. `vpdpbusd` wants its first operand unsigned, so every
//! weight is made unsigned by adding 128 (flipping its top bit) and `128 · Σa` comes off
//! again: the same exact integer dot. The float step is chapter 6's `dot · (d_w · d_a)`,
//! eight rows at once, added in block order: every lane is the scalar kernel's number.

use std::arch::x86_64::*;

use crate::kernels::x86_helpers::prefetch_next_rows;

use crate::layout::eights::Eights;

/// Bytes of a Q8_0 block: the f16 scale, then 32 quants.
const BYTES: usize = 34;

/// The 8 × 8 transpose of 32-bit words: `out[s]` lane `r` is `rows[r]`'s word `s`.
#[inline]
#[target_feature(enable = "avx2")]
fn transpose(r: [__m256i; 8]) -> [__m256i; 8] {
    let t: [__m256i; 8] = std::array::from_fn(|i| {
        let (a, b) = (r[i / 2 * 2], r[i / 2 * 2 + 1]);
        if i % 2 == 0 {
            _mm256_unpacklo_epi32(a, b) // words 0 1 | 4 5 of a and b, interleaved
        } else {
            _mm256_unpackhi_epi32(a, b) // words 2 3 | 6 7
        }
    });
    // u[k]: word k (low half) and k + 4 (high half) of rows 0..4 (k < 4) or 4..8 (k ≥ 4)
    let u: [__m256i; 8] = std::array::from_fn(|k| {
        let (q, j) = (k / 4 * 4, k % 4);
        let (a, b) = (t[q + j / 2], t[q + 2 + j / 2]);
        if j % 2 == 0 {
            _mm256_unpacklo_epi64(a, b)
        } else {
            _mm256_unpackhi_epi64(a, b)
        }
    });
    std::array::from_fn(|s| {
        if s < 4 {
            _mm256_permute2x128_si256::<0x20>(u[s], u[4 + s])
        } else {
            _mm256_permute2x128_si256::<0x31>(u[s - 4], u[s])
        }
    })
}

/// Eight Q8_0 rows, as they lie in the file, against eight tokens: `out[t][r]` is
/// [`crate::layout::eights_q8_0::dot8_q8_0`]`(w[r], a)[t]`. With `prefetch` (the rows are consecutive
/// in the matrix, and met here for the first time), each block also asks for its share of
/// the eight rows that follow, as chapter 7's decode kernels do: eight interleaved streams are
/// more than the hardware prefetcher follows.
///
/// # Safety
/// None beyond the CPU's (AVX-512 VL, VNNI, and F16C): the lengths are checked here.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,f16c")]
pub(super) unsafe fn dot8x8_q8_0(w: [&[u8]; 8], a: &Eights, prefetch: bool) -> [[f32; 8]; 8] {
    let n = a.qs.len();
    assert!(
        w.iter().all(|w| w.len() == n * BYTES) && a.d.len() == n,
        "one activation block per weight block"
    );
    let (flip, ones) = (_mm256_set1_epi8(i8::MIN), _mm256_set1_epi8(1));
    // ANCHOR: rows8_q8_0
    let mut acc = [_mm256_setzero_ps(); 8]; // token t: its sums, a row a lane
    for (b, x) in a.qs.iter().enumerate() {
        if prefetch {
            prefetch_next_rows(w[0].as_ptr(), 8 * n * BYTES, n, b);
        }
        let at = b * BYTES;
        let (mut rows, mut d) = ([_mm256_setzero_si256(); 8], [0i16; 8]);
        for r in 0..8 {
            let block = &w[r][at..at + BYTES];
            // SAFETY: the block's 32 quants, after its scale.
            let q = unsafe { _mm256_loadu_si256(block[2..].as_ptr().cast()) };
            rows[r] = _mm256_xor_si256(q, flip); // w + 128
            d[r] = i16::from_le_bytes([block[0], block[1]]);
        }
        let steps = transpose(rows);
        let dw = _mm256_cvtph_ps(_mm_setr_epi16(
            d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7],
        ));
        // each token's Σa, a token a lane, then 128 · Σa
        let mut sum = _mm256_setzero_si256();
        for s in 0..8 {
            // SAFETY: step s's 32 bytes of block b's 256.
            sum = _mm256_dpbusd_epi32(sum, ones, unsafe {
                _mm256_loadu_si256(x[32 * s..].as_ptr().cast())
            });
        }
        let mut off = [0i32; 8];
        // SAFETY: eight i32 into eight i32.
        unsafe { _mm256_storeu_si256(off.as_mut_ptr().cast(), _mm256_slli_epi32::<7>(sum)) };
        for (t, acc) in acc.iter_mut().enumerate() {
            let mut dot = _mm256_setzero_si256();
            for (s, step) in steps.iter().enumerate() {
                // SAFETY: token t's four quants of step s, inside the block's 256 bytes.
                let q = unsafe {
                    x.as_ptr()
                        .add(32 * s + 4 * t)
                        .cast::<i32>()
                        .read_unaligned()
                };
                let q = _mm256_set1_epi32(q); // token t's quants, every lane
                dot = _mm256_dpbusd_epi32(dot, *step, q);
            }
            let dot = _mm256_cvtepi32_ps(_mm256_sub_epi32(dot, _mm256_set1_epi32(off[t])));
            let scale = _mm256_mul_ps(dw, _mm256_set1_ps(a.d[b][t])); // d_w · d_a
            *acc = _mm256_add_ps(*acc, _mm256_mul_ps(dot, scale));
        }
    }
    // ANCHOR_END: rows8_q8_0
    acc.map(|v| {
        let mut out = [0.0f32; 8];
        // SAFETY: eight f32 into eight f32.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), v) };
        out
    })
}
