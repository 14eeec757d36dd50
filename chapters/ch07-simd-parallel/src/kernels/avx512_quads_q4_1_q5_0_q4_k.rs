//! AVX-512 (with VNNI) prefill kernels on the interleaved activations of
//! [`crate::layout::quads`]: one Q5_0, Q4_1 or Q4_K row against four tokens, sixteen
//! (block, token) pairs a lane each (`LLM_BOOK_PREFILL=quads`). Q5_0's unpacking is
//! [`super::avx512_grid_q5_0`]'s.
use crate::layout::kquant::{self, BlockQ8K, Q4_K_BYTES, Q5_0_BYTES, Q8_0Wide};
use crate::layout::quads::{ActQuads, KQuads};
use ch06_quantization::blocks::BlockQ8_1;

use super::avx512_grid_q5_0::{block_term, nibbles, unpack};
use std::arch::x86_64::*;

/// Sixteen lanes, (block b, token t) at 4b + t, each holding `per_block[b]`.
#[inline]
#[target_feature(enable = "avx512f")]
fn block_lanes(per_block: [i32; 4]) -> __m512i {
    let [a, b, c, d] = per_block;
    _mm512_setr_epi32(a, a, a, a, b, b, b, b, c, c, c, c, d, d, d, d)
}

/// The f16 in the low (`SHIFT` 0) or high (16) half of each of four dwords (four blocks'
/// d, or their second f16), as f32, each in its block's four lanes.
#[inline]
#[target_feature(enable = "avx512f,avx512vl,f16c")]
fn spread_halves<const SHIFT: i32>(dm: __m128i) -> __m512 {
    let h = _mm_cvtph_ps(_mm_cvtepi32_epi16(_mm_srli_epi32::<SHIFT>(dm)));
    _mm512_permutexvar_ps(block_lanes([0, 1, 2, 3]), _mm512_castps128_ps512(h))
}

/// `acc` (a token per lane) plus each block's four tokens of `p`, block after block: the
/// scalar loop's order of additions.
#[inline]
#[target_feature(enable = "avx512f")]
fn add_in_block_order(acc: __m128, p: __m512) -> __m128 {
    let acc = _mm_add_ps(acc, _mm512_castps512_ps128(p));
    let acc = _mm_add_ps(acc, _mm512_extractf32x4_ps::<1>(p));
    let acc = _mm_add_ps(acc, _mm512_extractf32x4_ps::<2>(p));
    _mm_add_ps(acc, _mm512_extractf32x4_ps::<3>(p))
}

// ANCHOR: avx512_q5_0_quads
/// The whole groups of four blocks of one row (Q5_0, or Q4_1 with `Q4_1`) against four
/// tokens (a prefill), sixteen (block, token) pairs at a time, one per lane, from
/// [`ActQuads`]: each of the eight steps of a group is a permute of the weights (lane
/// (b, t) gets four quants of block b) and one `vpdpbusd`, and no horizontal add is
/// needed. Then, as the scalar loop does, each block's term (Q5_0: `dw · da · dot`; Q4_1:
/// `(dw · da) · dot + mw · s`) is added to its token's sum in block order.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,f16c")]
unsafe fn quads_groups<const Q4_1: bool>(w: &[u8], quads: &ActQuads) -> [f32; 4] {
    let bytes = if Q4_1 {
        ch06_quantization::blocks::BlockQ4_1::BYTES
    } else {
        Q5_0_BYTES
    };
    let stride = bytes as i32;
    let strides = _mm_setr_epi32(0, stride, 2 * stride, 3 * stride); // four blocks' scales
    // Step s: lane (b, t) takes dword s of block b (dwords 8b..8b + 8 of the two registers).
    let steps: [__m512i; 8] = std::array::from_fn(|s| {
        let s = s as i32;
        block_lanes([s, 8 + s, 16 + s, 24 + s])
    });
    let mut acc = _mm_setzero_ps(); // lane t: token t's sum so far
    for (g, qs) in quads.qs.iter().enumerate() {
        let b = w[4 * g * bytes..].as_ptr();
        // SAFETY: blocks 4g..4g + 4 lie inside the row (checked by the caller).
        let q: [__m256i; 4] = std::array::from_fn(|j| unsafe {
            let blk = b.add(j * bytes);
            if Q4_1 {
                nibbles(blk.add(4))
            } else {
                unpack(blk)
            }
        });
        let q01 = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(q[0]), q[1]);
        let q23 = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(q[2]), q[3]);
        let mut dots = _mm512_setzero_si512();
        for (s, step) in steps.iter().enumerate() {
            // SAFETY: 64 of the group's 512 bytes.
            let act = unsafe { _mm512_loadu_si512(qs.as_ptr().add(64 * s).cast()) };
            dots = _mm512_dpbusd_epi32(dots, _mm512_permutex2var_epi32(q01, *step, q23), act);
        }
        // ANCHOR_END: avx512_q5_0_quads
        // ANCHOR: avx512_q5_0_quads_float
        // SAFETY: the gather reads 4 bytes at the start of each of the four blocks: the
        // f16 d (and, for Q4_1, the f16 m after it).
        let dm = unsafe { _mm_i32gather_epi32::<1>(b.cast(), strides) };
        let dw = spread_halves::<0>(dm);
        // SAFETY: 16 f32 (and 16 i32).
        let da = unsafe { _mm512_loadu_ps(quads.d[g].as_ptr()) };
        let p = if Q4_1 {
            let mw = spread_halves::<16>(dm);
            // SAFETY: 16 f32.
            let s = unsafe { _mm512_loadu_ps(quads.s[g].as_ptr()) };
            _mm512_add_ps(
                _mm512_mul_ps(_mm512_mul_ps(dw, da), _mm512_cvtepi32_ps(dots)),
                _mm512_mul_ps(mw, s),
            )
        } else {
            // SAFETY: 16 i32.
            let sum16 = unsafe { _mm512_loadu_si512(quads.sum16[g].as_ptr().cast()) };
            let dots = _mm512_cvtepi32_ps(_mm512_sub_epi32(dots, sum16)); // Σ (q − 16)·a
            _mm512_mul_ps(_mm512_mul_ps(dw, da), dots)
        };
        // Block b's four tokens are lanes 4b..4b + 4: added in block order.
        acc = add_in_block_order(acc, p);
    }
    let mut out = [0.0f32; 4];
    // SAFETY: four f32 into four f32.
    unsafe { _mm_storeu_ps(out.as_mut_ptr(), acc) };
    out
}
// ANCHOR_END: avx512_q5_0_quads_float

// ANCHOR: avx512_q4_k_quads
/// One Q4_K row against four tokens, sixteen (super-block, token) pairs a lane each, as
/// [`q5_0_quads`] does for Q5_0: per sub-block of 32, eight permute-and-`vpdpbusd` steps
/// give each lane its sub-block dot, which is multiplied by that block's 6-bit scale in
/// 32 bits and added up; the mins meet the activations' sub-block sums the same way.
/// Then each super-block's `d · da · Σq − dmin · da · Σm`, as the scalar kernel writes
/// it, is added to its token's sum in block order.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,f16c")]
pub(super) unsafe fn q4_k_quads(w: &[u8], quads: &KQuads, a: [&[BlockQ8K]; 4]) -> [f32; 4] {
    let strides = _mm_setr_epi32(0, 144, 288, 432); // four blocks' d and dmin
    let steps: [__m512i; 8] = std::array::from_fn(|s| {
        let s = s as i32;
        block_lanes([s, 8 + s, 16 + s, 24 + s])
    });
    // Lane (b, t) takes entry j of block b's sixteen (scales, then mins): from the first
    // register of a pair for blocks 0 and 2, from the second for blocks 1 and 3.
    let pick = |j: i32| block_lanes([j, 16 + j, j, 16 + j]);
    let low = _mm256_set1_epi8(0x0f);
    let mut acc = _mm_setzero_ps(); // lane t: token t's sum so far
    for (g, qs) in quads.qs.iter().enumerate() {
        let b = w[4 * g * Q4_K_BYTES..].as_ptr();
        // Each block's 8 scales and 8 mins, widened to 32 bits.
        let sm: [__m512i; 4] = std::array::from_fn(|j| {
            // SAFETY: the 12 packed bytes at 4..16 of block j (inside the row).
            let packed = unsafe { std::slice::from_raw_parts(b.add(j * Q4_K_BYTES + 4), 12) };
            let sm = super::avx2_grid_k::scales_and_mins(packed);
            // SAFETY: 16 bytes.
            _mm512_cvtepu8_epi32(unsafe { _mm_loadu_si128(sm.as_ptr().cast()) })
        });
        let (mut sumq, mut summ) = (_mm512_setzero_si512(), _mm512_setzero_si512());
        for sub in 0..8 {
            // Sub-block `sub` of the four blocks: 32 bytes of nibbles each (low nibbles of
            // chunk sub / 2 for even sub-blocks, high for odd ones).
            let q: [__m256i; 4] = std::array::from_fn(|j| {
                // SAFETY: bytes 16 + 32c .. 48 + 32c of block j, inside the row.
                let v = unsafe {
                    _mm256_loadu_si256(b.add(j * Q4_K_BYTES + 16 + 32 * (sub / 2)).cast())
                };
                let v = if sub % 2 == 1 {
                    _mm256_srli_epi16::<4>(v)
                } else {
                    v
                };
                _mm256_and_si256(v, low)
            });
            let q01 = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(q[0]), q[1]);
            let q23 = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(q[2]), q[3]);
            let mut dots = _mm512_setzero_si512();
            for (k, step) in steps.iter().enumerate() {
                // SAFETY: 64 of the group's 4096 bytes.
                let act = unsafe { _mm512_loadu_si512(qs.as_ptr().add(64 * (sub * 8 + k)).cast()) };
                dots = _mm512_dpbusd_epi32(dots, _mm512_permutex2var_epi32(q01, *step, q23), act);
            }
            let lanes = |j: i32| {
                let p = pick(j);
                _mm512_mask_blend_epi32(
                    0xff00,
                    _mm512_permutex2var_epi32(sm[0], p, sm[1]),
                    _mm512_permutex2var_epi32(sm[2], p, sm[3]),
                )
            };
            sumq = _mm512_add_epi32(sumq, _mm512_mullo_epi32(dots, lanes(sub as i32)));
            // SAFETY: 16 i32.
            let sums = unsafe { _mm512_loadu_si512(quads.sums[g][sub].as_ptr().cast()) };
            summ = _mm512_add_epi32(summ, _mm512_mullo_epi32(sums, lanes(8 + sub as i32)));
        }
        // SAFETY: the gather reads the f16 d and dmin at the start of each of the four blocks.
        let dm = unsafe { _mm_i32gather_epi32::<1>(b.cast(), strides) };
        let d = spread_halves::<0>(dm);
        let dmin = spread_halves::<16>(dm);
        // SAFETY: 16 f32.
        let da = unsafe { _mm512_loadu_ps(quads.d[g].as_ptr()) };
        let p = _mm512_sub_ps(
            _mm512_mul_ps(_mm512_mul_ps(d, da), _mm512_cvtepi32_ps(sumq)),
            _mm512_mul_ps(_mm512_mul_ps(dmin, da), _mm512_cvtepi32_ps(summ)),
        );
        // Block b's four tokens are lanes 4b..4b + 4: added in block order.
        acc = add_in_block_order(acc, p);
    }
    let mut out = [0.0f32; 4];
    // SAFETY: four f32 into four f32.
    unsafe { _mm_storeu_ps(out.as_mut_ptr(), acc) };
    // The blocks after the last whole group, one at a time, as the scalar loop.
    for (t, o) in out.iter_mut().enumerate() {
        for j in 4 * quads.qs.len()..a[t].len() {
            *o += kquant::dot_q4_k_q8_k(&w[j * Q4_K_BYTES..(j + 1) * Q4_K_BYTES], &a[t][j]);
        }
    }
    out
}
// ANCHOR_END: avx512_q4_k_quads

/// An f16's bits as f32, by the CPU's converter.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn half(bits: u16) -> f32 {
    super::x86_helpers::f16(&bits.to_le_bytes(), 0)
}

/// One Q5_0 row against four tokens: the groups, then the last blocks one at a time.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,f16c")]
pub(super) unsafe fn q5_0_quads(w: &[u8], quads: &ActQuads, a: [&[Q8_0Wide]; 4]) -> [f32; 4] {
    // SAFETY: the caller's checks are this function's.
    let mut out = unsafe { quads_groups::<false>(w, quads) };
    for (t, o) in out.iter_mut().enumerate() {
        for j in 4 * quads.qs.len()..a[t].len() {
            *o += block_term(&w[j * Q5_0_BYTES..(j + 1) * Q5_0_BYTES], &a[t][j]);
        }
    }
    out
}

/// One Q4_1 row against four tokens: the groups, then the last blocks one at a time, each
/// block's term as chapter 6 writes it, `(d · da) · dot + m · s`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,f16c")]
pub(super) unsafe fn q4_1_quads(w: &[u8], quads: &ActQuads, a: [&[BlockQ8_1]; 4]) -> [f32; 4] {
    // SAFETY: the caller's checks are this function's.
    let mut out = unsafe { quads_groups::<true>(w, quads) };
    let done = 4 * quads.qs.len();
    for (t, o) in out.iter_mut().enumerate() {
        for j in done..a[t].len() {
            let (blk, a) = (
                &w[j * ch06_quantization::blocks::BlockQ4_1::BYTES
                    ..(j + 1) * ch06_quantization::blocks::BlockQ4_1::BYTES],
                &a[t][j],
            );
            // SAFETY: 16 nibble bytes of a whole block, and 32 activation quants.
            let v = unsafe {
                _mm256_dpbusd_epi32(
                    _mm256_setzero_si256(),
                    nibbles(blk.as_ptr().add(4)),
                    _mm256_loadu_si256(a.qs.as_ptr().cast()),
                )
            };
            let (d, m) = (
                super::x86_helpers::f16(blk, 0),
                super::x86_helpers::f16(blk, 2),
            );
            let (da, s) = (half(a.d), half(a.s));
            *o += (d * da) * super::x86_helpers::hsum(v) as f32 + m * s;
        }
    }
    out
}
