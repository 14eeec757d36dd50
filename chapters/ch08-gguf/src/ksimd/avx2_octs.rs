//! The eight-token prefill kernel on AVX2 (layouts in [`crate::octs`]): one unpacked Q5_0
//! or Q4_1 row against eight tokens, a token per 32-bit lane.
//!
//! Per block, eight steps of one broadcast load of the weight's four quants
//! (`vpbroadcastd`, no shuffle), one load of the eight tokens' four activations and one
//! `vpmaddubsw`, summed in 16 bits. That sum is exact while it stays inside i16: two
//! products of a quant `q` and an activation `|a| ≤ 128` are at most `2 · 128 · q`, so the
//! eight steps of a 4-bit block fit (`16 · 128 · 15 = 30 720`), and a 5-bit block's fit four
//! at a time (`8 · 128 · 31 = 31 744`). `vpmaddwd` with ones widens them, and the block's
//! term, in the scalar kernel's float operations, is added to each token's lane in block
//! order.

use std::arch::x86_64::*;

use super::avx2::f16;
use crate::octs::{ActOcts, Format32, Row32};

/// One Q5_0 or Q4_1 block unpacked as [`crate::octs::unpack_block`] does: the nibbles
/// split by a shift and a mask, Q5_0's fifth bits spread over the bytes (each byte tests
/// its own bit of `qh`) and put on with an OR; the scales by F16C.
#[target_feature(enable = "avx2,f16c")]
pub(super) fn unpack_block(format: Format32, b: &[u8]) -> ([u8; 32], f32, f32) {
    let q4_1 = format == Format32::Q4_1;
    let at = if q4_1 { 4 } else { 6 };
    assert!(b.len() >= at + 16, "a whole block");
    // SAFETY: the 16 nibble bytes, inside the block (checked).
    let nib = unsafe { _mm_loadu_si128(b.as_ptr().add(at).cast()) };
    let low = _mm_set1_epi8(0x0f);
    let mut q = _mm256_set_m128i(
        _mm_and_si128(_mm_srli_epi16::<4>(nib), low),
        _mm_and_si128(nib, low),
    );
    if !q4_1 {
        let qh = i32::from_le_bytes([b[2], b[3], b[4], b[5]]);
        // Byte j gets byte j / 8 of qh, then 16 if its bit j % 8 is set.
        let spread = _mm256_setr_epi8(
            0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3,
            3, 3, 3,
        );
        let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
        let h = _mm256_shuffle_epi8(_mm256_set1_epi32(qh), spread);
        let h = _mm256_cmpeq_epi8(_mm256_and_si256(h, bit), bit);
        q = _mm256_or_si256(q, _mm256_and_si256(h, _mm256_set1_epi8(16)));
    }
    let mut out = [0u8; 32];
    // SAFETY: 32 bytes into 32 bytes.
    unsafe { _mm256_storeu_si256(out.as_mut_ptr().cast(), q) };
    (out, f16(b, 0), if q4_1 { f16(b, 2) } else { 0.0 })
}

/// Four steps of 16-bit sums: the weight's quants `4s..4s + 4` (at `w + 4s`) broadcast to
/// every lane, against the eight tokens' (at `a + 32s`), for s in 0..4.
///
/// # Safety
/// `w` must be readable for 16 bytes and `a` for 128.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn four_steps(w: *const u8, a: *const i8) -> __m256i {
    // SAFETY: the caller's promise: 4 bytes at w + 4s and 32 at a + 32s, s < 4.
    let p: [__m256i; 4] = std::array::from_fn(|s| unsafe {
        _mm256_maddubs_epi16(
            _mm256_set1_epi32(w.add(4 * s).cast::<i32>().read_unaligned()),
            _mm256_loadu_si256(a.add(32 * s).cast()),
        )
    });
    _mm256_add_epi16(_mm256_add_epi16(p[0], p[1]), _mm256_add_epi16(p[2], p[3]))
}

// ANCHOR: avx2_octs
/// One unpacked row (Q4_1 with `Q4_1`, else Q5_0) against eight tokens: each lane exactly
/// [`crate::octs::dot8_row32`]'s, which is the scalar kernel's.
///
/// # Safety
/// None beyond the CPU's: the lengths are checked here.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn dot8_row32<const Q4_1: bool>(row: Row32<'_>, a: &ActOcts) -> [f32; 8] {
    let n = row.q.len();
    assert!(
        row.d.len() == n && row.m.len() == n && a.qs.len() == n,
        "one activation block per weight block"
    );
    assert!(a.d.len() == n && a.sum16.len() == n && a.s.len() == n);
    let ones = _mm256_set1_epi16(1);
    let mut acc = _mm256_setzero_ps(); // lane t: token t's sum so far
    for b in 0..n {
        let (w, x) = (row.q[b].as_ptr(), a.qs[b].as_ptr());
        // SAFETY: 32 weight bytes and 256 activation bytes of block b (lengths checked).
        let (first, second) = unsafe { (four_steps(w, x), four_steps(w.add(16), x.add(128))) };
        let dots = if Q4_1 {
            _mm256_madd_epi16(_mm256_add_epi16(first, second), ones)
        } else {
            _mm256_add_epi32(
                _mm256_madd_epi16(first, ones),
                _mm256_madd_epi16(second, ones),
            )
        };
        // SAFETY: 8 f32 (or i32) of block b.
        let da = unsafe { _mm256_loadu_ps(a.d[b].as_ptr()) };
        let dw = _mm256_set1_ps(row.d[b]);
        let p = if Q4_1 {
            // SAFETY: as above.
            let s = unsafe { _mm256_loadu_ps(a.s[b].as_ptr()) };
            _mm256_add_ps(
                _mm256_mul_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(dots)),
                _mm256_mul_ps(_mm256_set1_ps(row.m[b]), s),
            )
        } else {
            // SAFETY: as above.
            let sum16 = unsafe { _mm256_loadu_si256(a.sum16[b].as_ptr().cast()) };
            let dots = _mm256_cvtepi32_ps(_mm256_sub_epi32(dots, sum16)); // Σ (q − 16)·a
            _mm256_mul_ps(_mm256_mul_ps(dw, da), dots)
        };
        acc = _mm256_add_ps(acc, p);
    }
    let mut out = [0.0f32; 8];
    // SAFETY: eight f32 into eight f32.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), acc) };
    out
}
// ANCHOR_END: avx2_octs
