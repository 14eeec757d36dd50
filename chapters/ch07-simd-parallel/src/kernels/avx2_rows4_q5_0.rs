//! Four rows against one token (a decode step) on AVX2, for the formats whose one-token
//! product is bound by arithmetic rather than by memory.

use std::arch::x86_64::*;

use crate::kernels::x86_helpers::prefetch_next_rows;

use crate::layout::kquant::{Q5_0_BYTES, Q8_0Wide};

// ANCHOR: avx2_rows4_q5_0
/// Four Q5_0 rows against one token: each lane [`crate::layout::kquant::dot_q5_0_q8_0`]'s sum, bit
/// for bit. The quants stay unsigned (0..31) as Q4_0's do in chapter 7's four-row kernel:
/// `Σ (q − 16)·a = Σ q·a − 16·Σ a`, where `Σ a` came with the activations, so a row's block
/// costs its unpacking, one `vpmaddubsw` and one `vpmaddwd`, with no sign trick; the token's
/// block is loaded once for the four rows, and the next four rows are prefetched in order
/// (chapter 7's `prefetch_next_rows`).
///
/// # Safety
/// None beyond the CPU's (AVX2 and F16C): the lengths are checked here.
#[target_feature(enable = "avx2,f16c")]
pub(super) unsafe fn rows4_q5_0(w: [&[u8]; 4], a: &[Q8_0Wide]) -> [f32; 4] {
    let row_len = a.len() * Q5_0_BYTES;
    assert!(
        w.iter().all(|r| r.len() == row_len),
        "whole blocks, one per activation block"
    );
    let low = _mm_set1_epi8(0x0f);
    // Byte k of the 32 gets bit k of qh: spread qh's bytes, then test one bit per lane.
    let spread = _mm256_setr_epi8(
        0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3,
        3, 3,
    );
    let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    let (sixteen, ones) = (_mm256_set1_epi8(16), _mm256_set1_epi16(1));
    let wp = w.map(<[u8]>::as_ptr);
    let mut acc = _mm_setzero_ps(); // lane r: row r's sum so far
    for (i, ab) in a.iter().enumerate() {
        // SAFETY: the 32 quants of the token's block.
        let y = unsafe { _mm256_loadu_si256(ab.qs.as_ptr().cast()) };
        // SAFETY: block i of every row lies inside it (lengths checked); a prefetch of an
        // address past the matrix never faults.
        prefetch_next_rows(wp[0], 4 * row_len, a.len(), i);
        let p: [__m256i; 4] = std::array::from_fn(|r| unsafe {
            let b = wp[r].add(i * Q5_0_BYTES);
            let qh = b.add(2).cast::<i32>().read_unaligned();
            let nib = _mm_loadu_si128(b.add(6).cast());
            let q = _mm256_set_m128i(
                _mm_and_si128(_mm_srli_epi16::<4>(nib), low),
                _mm_and_si128(nib, low),
            );
            let h = _mm256_shuffle_epi8(_mm256_set1_epi32(qh), spread);
            let h = _mm256_cmpeq_epi8(_mm256_and_si256(h, bit), bit);
            let q = _mm256_or_si256(q, _mm256_and_si256(h, sixteen)); // 0..31
            _mm256_madd_epi16(_mm256_maddubs_epi16(q, y), ones)
        });
        let h = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
        let qa = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h));
        let dots = _mm_sub_epi32(qa, _mm_set1_epi32(16 * ab.sum)); // Σ (q − 16)·a
        // SAFETY: each block starts with its f16 scale.
        let d: [i16; 4] = std::array::from_fn(|r| unsafe {
            wp[r].add(i * Q5_0_BYTES).cast::<i16>().read_unaligned()
        });
        let dw = _mm_cvtph_ps(_mm_setr_epi16(d[0], d[1], d[2], d[3], 0, 0, 0, 0));
        let term = _mm_mul_ps(_mm_mul_ps(dw, _mm_set1_ps(ab.d)), _mm_cvtepi32_ps(dots));
        acc = _mm_add_ps(acc, term);
    }
    let mut out = [0.0f32; 4];
    // SAFETY: four f32 into four f32.
    unsafe { _mm_storeu_ps(out.as_mut_ptr(), acc) };
    out
}
// ANCHOR_END: avx2_rows4_q5_0
