//! AVX-512 (with VNNI) for the Q5_0 products of a few rows and tokens, the format that carries
//! most of Gemma-3's layer weights; [`super::Avx512`] uses them, the AVX2 kernels the rest (the
//! interleaved prefill kernels that share this file's unpacking are in
//! [`super::avx512_quads_q4_1_q5_0_q4_k`]). Three AVX-512 instructions
//! shorten its unpacking: a shift by a different count in each half of the register
//! (`vpsrlvw`) splits the nibbles, a masked add puts the fifth bit on with `qh` itself as
//! the mask, and `vpdpbusd` multiplies and sums four byte pairs per lane in one step.
use crate::layout::kquant::{Q5_0_BYTES, Q8_0Wide};

use crate::kernels::x86_helpers::prefetch_next_rows;
use std::arch::x86_64::*;

/// The 32 nibbles of the 16 bytes at `p`: the low nibbles in bytes 0..16, the high ones
/// in bytes 16..32 (Q4_0, Q4_1 and Q5_0 order them so), by one shift of 0 or 4 bits.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2")]
pub(super) unsafe fn nibbles(p: *const u8) -> __m256i {
    // SAFETY: the caller passes 16 readable bytes.
    let nib = _mm256_broadcastsi128_si256(unsafe { _mm_loadu_si128(p.cast()) });
    let shifts = _mm256_setr_epi16(0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4);
    _mm256_and_si256(_mm256_srlv_epi16(nib, shifts), _mm256_set1_epi8(0x0f))
}

/// One Q5_0 block's 32 quants (at `p`), unsigned, before the offset of 16 is taken out.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2")]
pub(super) unsafe fn unpack(p: *const u8) -> __m256i {
    // SAFETY: the caller passes a whole 22-byte block.
    let (q, qh) = unsafe { (nibbles(p.add(6)), p.add(2).cast::<u32>().read_unaligned()) };
    // Byte j gets 16 where bit j of qh is set.
    _mm256_mask_add_epi8(q, qh, q, _mm256_set1_epi8(16))
}

/// One block's `dw · da · dot`, the scalar kernel's term, for the blocks after the last
/// group of four.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,f16c")]
pub(super) fn block_term(w: &[u8], a: &Q8_0Wide) -> f32 {
    assert_eq!(w.len(), Q5_0_BYTES);
    // SAFETY: one whole block (checked) and 32 activation quants.
    let v = unsafe {
        _mm256_dpbusd_epi32(
            _mm256_setzero_si256(),
            unpack(w.as_ptr()),
            _mm256_loadu_si256(a.qs.as_ptr().cast()),
        )
    };
    let dot = super::x86_helpers::hsum(v) - 16 * a.sum;
    super::x86_helpers::f16(w, 0) * a.d * dot as f32
}

// ANCHOR: avx512_q5_0
/// Four (row, token) pairs of Q5_0 products: four rows and one token (a decode step) or
/// one row and four tokens (a prefill). Four blocks at a time, each pair's four block sums
/// are reduced together and turned into the same floats as the scalar `dw · da · dot`;
/// a 4 × 4 transpose then puts the pairs in lanes, so that one vector add per block keeps
/// each pair's sum in block order, as the scalar loop adds.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,f16c")]
pub(super) unsafe fn q5_0_pairs<const R: usize, const T: usize>(
    w: [&[u8]; R],
    a: [&[Q8_0Wide]; T],
) -> [f32; 4] {
    const { assert!(R * T == 4) };
    let blocks = a[0].len();
    let pair = |k: usize| (k % R, k / R); // (row, token) of pair k
    let mut acc = _mm_setzero_ps(); // lane k: pair k's sum so far
    let strides = _mm_setr_epi32(0, 22, 44, 66); // the f16 scales of four blocks
    let mut i = 0;
    while i + 4 <= blocks {
        if R == 4 {
            for k in i..i + 4 {
                prefetch_next_rows(w[0].as_ptr(), 4 * blocks * Q5_0_BYTES, blocks, k);
            }
        }
        let dw: [__m128; R] = std::array::from_fn(|r| {
            let b = w[r][i * Q5_0_BYTES..].as_ptr();
            // SAFETY: the gather reads 4 bytes at the start of each of blocks i..i + 4,
            // which lie inside the row (lengths checked by the caller).
            _mm_cvtph_ps(_mm_cvtepi32_epi16(unsafe {
                _mm_i32gather_epi32::<1>(b.cast(), strides)
            }))
        });
        // SAFETY: blocks i..i + 4 of each row.
        let q: [[__m256i; 4]; R] = std::array::from_fn(|r| {
            std::array::from_fn(|j| unsafe { unpack(w[r][(i + j) * Q5_0_BYTES..].as_ptr()) })
        });
        let p: [__m128; 4] = std::array::from_fn(|k| {
            let (r, t) = pair(k);
            let a = &a[t][i..i + 4];
            // SAFETY: 32 quants of each activation block.
            let v: [__m256i; 4] = std::array::from_fn(|j| unsafe {
                _mm256_dpbusd_epi32(
                    _mm256_setzero_si256(),
                    q[r][j],
                    _mm256_loadu_si256(a[j].qs.as_ptr().cast()),
                )
            });
            // The four blocks' lane sums, all at once.
            let h = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
            let dots = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h));
            let offset =
                _mm_slli_epi32::<4>(_mm_setr_epi32(a[0].sum, a[1].sum, a[2].sum, a[3].sum));
            let dots = _mm_cvtepi32_ps(_mm_sub_epi32(dots, offset)); // Σ (q − 16)·a
            let da = _mm_setr_ps(a[0].d, a[1].d, a[2].d, a[3].d);
            _mm_mul_ps(_mm_mul_ps(dw[r], da), dots)
        });
        // Transpose: column j holds block j's contribution to each pair.
        let t0 = _mm_unpacklo_ps(p[0], p[1]);
        let t1 = _mm_unpacklo_ps(p[2], p[3]);
        let t2 = _mm_unpackhi_ps(p[0], p[1]);
        let t3 = _mm_unpackhi_ps(p[2], p[3]);
        acc = _mm_add_ps(acc, _mm_movelh_ps(t0, t1));
        acc = _mm_add_ps(acc, _mm_movehl_ps(t1, t0));
        acc = _mm_add_ps(acc, _mm_movelh_ps(t2, t3));
        acc = _mm_add_ps(acc, _mm_movehl_ps(t3, t2));
        i += 4;
    }
    let mut out = [0.0f32; 4];
    // SAFETY: four f32 into four f32.
    unsafe { _mm_storeu_ps(out.as_mut_ptr(), acc) };
    for (k, o) in out.iter_mut().enumerate() {
        let (r, t) = pair(k);
        // The last blocks (fewer than four) one at a time, as the scalar loop.
        for j in i..blocks {
            *o += block_term(&w[r][j * Q5_0_BYTES..(j + 1) * Q5_0_BYTES], &a[t][j]);
        }
    }
    out
}
// ANCHOR_END: avx512_q5_0
