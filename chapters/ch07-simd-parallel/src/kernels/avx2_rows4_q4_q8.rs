//! Four dot products at once (chapter 7's "Four dots at once"): four rows against one token
//! (a decode step) or one row against four tokens (a prefill), sharing the loads they have
//! in common and one horizontal add for the four sums. Each of the four is chapter 6's dot,
//! bit for bit.

#![cfg(target_arch = "x86_64")]
// The module's one safety condition, as in `avx2_one_q4_q8.rs`: the CPU has the features named.
#![allow(clippy::missing_safety_doc)]

use std::arch::x86_64::*;

use ch06_quantization::blocks::{BlockQ4_0, BlockQ4_1, BlockQ8_0, BlockQ8_1};

use super::x86_helpers::{
    halves, load32, prefetch_next_rows, q8_0_scale, q8_1_scales, qs_bytes, unpack_nibbles_at,
};

// ANCHOR: hsum4
/// The four sums of the 8 lanes of `p[0]`, …, `p[3]`, as one vector: two rounds of
/// `vphaddd` and one add of the halves, instead of four separate horizontal sums.
#[target_feature(enable = "avx2")]
pub(super) fn hsum4_i32(p: [__m256i; 4]) -> __m128i {
    let h = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
    _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h))
}
// ANCHOR_END: hsum4

/// The four lanes of `v`.
#[target_feature(enable = "avx2")]
pub(super) fn lanes4(v: __m128) -> [f32; 4] {
    let mut out = [0.0f32; 4];
    // SAFETY: `out` is 4 writable f32.
    unsafe { _mm_storeu_ps(out.as_mut_ptr(), v) };
    out
}

/// Checks four (weight row, activation row) pairs have `nb` blocks each, and returns `nb`.
pub(super) fn pairs_blocks<const W: usize, A>(w: &[&[u8]; 4], a: &[&[A]; 4]) -> usize {
    let nb = a[0].len();
    for i in 0..4 {
        assert!(
            w[i].len() == nb * W && a[i].len() == nb,
            "row lengths differ"
        );
    }
    nb
}

// ANCHOR: dot4_q4_1
/// Four Q4_1 dots at once, each lane of the float arithmetic exactly chapter 6's
/// `(d·d_a)·sumi + m·s` added to its own running sum, block by block.
#[target_feature(enable = "avx2,fma,f16c")]
pub fn dot4_q4_1_q8_1(w: [&[u8]; 4], a: [&[BlockQ8_1]; 4]) -> [f32; 4] {
    let nb = pairs_blocks::<{ BlockQ4_1::BYTES }, _>(&w, &a);
    if w.iter().all(|r| r.as_ptr() == w[0].as_ptr()) {
        return one_row_four_tokens_q4_1(w[0], a, nb); // prefill: unpack each block once
    }
    if a.iter().all(|t| t.as_ptr() == a[0].as_ptr()) {
        return four_rows_one_token_q4_1(w, a[0], nb); // decode: load each token block once
    }
    let (wp, ap) = (w.map(<[u8]>::as_ptr), a.map(<[BlockQ8_1]>::as_ptr));
    let mut sum = _mm_setzero_ps();
    for b in 0..nb {
        // SAFETY: every weight row is nb blocks of 20 bytes and every activation row nb
        // blocks (checked above), and b < nb; unaligned loads and reads are used throughout.
        unsafe {
            let wb: [*const u8; 4] = wp.map(|p| p.add(b * BlockQ4_1::BYTES));
            let ab: [*const BlockQ8_1; 4] = ap.map(|p| p.add(b));
            // Ask for the next four rows, in memory order, a block's share at a time, while
            // these are multiplied: the hardware prefetcher follows four interleaved
            // streams poorly on its own (see `prefetch_next_rows`). This assumes the four
            // rows are consecutive, as in a decode step; for other pairs it asks for bytes
            // that are not needed, which costs a little and never faults.
            prefetch_next_rows(wp[0], 4 * nb * BlockQ4_1::BYTES, nb, b);
            let p: [__m256i; 4] = std::array::from_fn(|i| {
                let y = _mm256_loadu_si256((&raw const (*ab[i]).qs).cast());
                _mm256_madd_epi16(
                    _mm256_maddubs_epi16(unpack_nibbles_at(wb[i].add(4)), y),
                    _mm256_set1_epi16(1),
                )
            });
            let sumi = _mm_cvtepi32_ps(hsum4_i32(p));
            // d, m of the four weight blocks and d, s of the four activation blocks: the first
            // four bytes of each block (Q8_1 is repr(C): d then s).
            let (d, m) = halves4_ptr(wb.map(|p| p.cast::<i32>()));
            let (da, s) = halves4_ptr(ab.map(|p| p.cast::<i32>()));
            let t = _mm_add_ps(_mm_mul_ps(_mm_mul_ps(d, da), sumi), _mm_mul_ps(m, s));
            sum = _mm_add_ps(sum, t);
        }
    }
    lanes4(sum)
}
// ANCHOR_END: dot4_q4_1

/// [`dot4_q4_1_q8_1`] when the four weight rows are one row (a prefill: one row against four
/// tokens): the nibbles are unpacked and the row's scales decoded once per block, not four
/// times. The arithmetic of each lane is unchanged.
#[target_feature(enable = "avx2,fma,f16c")]
fn one_row_four_tokens_q4_1(w: &[u8], a: [&[BlockQ8_1]; 4], nb: usize) -> [f32; 4] {
    let ap = a.map(<[BlockQ8_1]>::as_ptr);
    let mut sum = _mm_setzero_ps();
    for b in 0..nb {
        // SAFETY: as in dot4_q4_1_q8_1: the row has nb blocks, every activation row too.
        unsafe {
            let wb = w.as_ptr().add(b * BlockQ4_1::BYTES);
            let ab: [*const BlockQ8_1; 4] = ap.map(|p| p.add(b));
            let q = unpack_nibbles_at(wb.add(4));
            let p: [__m256i; 4] = std::array::from_fn(|i| {
                let y = _mm256_loadu_si256((&raw const (*ab[i]).qs).cast());
                _mm256_madd_epi16(_mm256_maddubs_epi16(q, y), _mm256_set1_epi16(1))
            });
            let sumi = _mm_cvtepi32_ps(hsum4_i32(p));
            let (d, m) = halves4_ptr([wb.cast::<i32>(); 4]);
            let (da, s) = halves4_ptr(ab.map(|p| p.cast::<i32>()));
            let t = _mm_add_ps(_mm_mul_ps(_mm_mul_ps(d, da), sumi), _mm_mul_ps(m, s));
            sum = _mm_add_ps(sum, t);
        }
    }
    lanes4(sum)
}

/// [`dot4_q4_1_q8_1`] when the four activation rows are one token (a decode step): the
/// token's quants are loaded, and its `d` and `s` decoded, once per block for the four rows.
#[target_feature(enable = "avx2,fma,f16c")]
fn four_rows_one_token_q4_1(w: [&[u8]; 4], a: &[BlockQ8_1], nb: usize) -> [f32; 4] {
    let wp = w.map(<[u8]>::as_ptr);
    let mut sum = _mm_setzero_ps();
    for (b, ab) in a.iter().enumerate().take(nb) {
        let y = load32(qs_bytes(&ab.qs));
        let [_, _, da, s] = halves([0; 4], q8_1_scales(ab));
        // SAFETY: every row has nb blocks (checked by the caller) and b < nb.
        unsafe {
            let wb: [*const u8; 4] = wp.map(|p| p.add(b * BlockQ4_1::BYTES));
            prefetch_next_rows(wp[0], 4 * nb * BlockQ4_1::BYTES, nb, b);
            let p: [__m256i; 4] = std::array::from_fn(|i| {
                let q = unpack_nibbles_at(wb[i].add(4));
                _mm256_madd_epi16(_mm256_maddubs_epi16(q, y), _mm256_set1_epi16(1))
            });
            let sumi = _mm_cvtepi32_ps(hsum4_i32(p));
            let (d, m) = halves4_ptr(wb.map(|p| p.cast::<i32>()));
            let t = _mm_add_ps(
                _mm_mul_ps(_mm_mul_ps(d, _mm_set1_ps(da)), sumi),
                _mm_mul_ps(m, _mm_set1_ps(s)),
            );
            sum = _mm_add_ps(sum, t);
        }
    }
    lanes4(sum)
}

/// Four pairs of f16 decoded at once (F16C), from four pointers to two f16 side by side:
/// `([x0.0, x1.0, x2.0, x3.0], [x0.1, x1.1, x2.1, x3.1])`.
///
/// # Safety
/// Each pointer must be valid for reading 4 bytes (no alignment needed).
#[target_feature(enable = "avx2,f16c")]
unsafe fn halves4_ptr(p: [*const i32; 4]) -> (__m128, __m128) {
    // SAFETY: the caller guarantees 4 readable bytes at each pointer.
    let x = unsafe { p.map(|p| p.read_unaligned()) };
    let v = _mm256_cvtph_ps(_mm_set_epi32(x[3], x[2], x[1], x[0]));
    let (lo, hi) = (_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    (
        _mm_shuffle_ps::<0b10_00_10_00>(lo, hi),
        _mm_shuffle_ps::<0b11_01_11_01>(lo, hi),
    )
}

/// Four Q8_0 dots at once.
#[target_feature(enable = "avx2,fma,f16c")]
pub fn dot4_q8_0_q8_0(w: [&[u8]; 4], a: [&[BlockQ8_0]; 4]) -> [f32; 4] {
    let nb = pairs_blocks::<{ BlockQ8_0::BYTES }, _>(&w, &a);
    let (wp, ap) = (w.map(<[u8]>::as_ptr), a.map(<[BlockQ8_0]>::as_ptr));
    let mut sum = _mm_setzero_ps();
    for b in 0..nb {
        // SAFETY: every row has nb blocks (checked above) and b < nb; unaligned loads only.
        unsafe {
            let wb: [*const u8; 4] = wp.map(|p| p.add(b * BlockQ8_0::BYTES));
            let ab: [*const BlockQ8_0; 4] = ap.map(|p| p.add(b));
            prefetch_next_rows(wp[0], 4 * nb * BlockQ8_0::BYTES, nb, b); // as in Q4_1
            let p: [__m256i; 4] = std::array::from_fn(|i| {
                let x = _mm256_loadu_si256(wb[i].add(2).cast());
                let y = _mm256_loadu_si256((&raw const (*ab[i]).qs).cast());
                _mm256_madd_epi16(
                    _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x)),
                    _mm256_set1_epi16(1),
                )
            });
            let sumi = _mm_cvtepi32_ps(hsum4_i32(p));
            // Only the low f16 of each 4-byte read is a scale (d); the high one is discarded.
            let (d, _) = halves4_ptr(wb.map(|p| p.cast::<i32>()));
            let (da, _) = halves4_ptr(ab.map(|p| p.cast::<i32>()));
            sum = _mm_add_ps(sum, _mm_mul_ps(sumi, _mm_mul_ps(d, da)));
        }
    }
    lanes4(sum)
}

/// Four Q4_0 dots at once: [`dot4_q8_0_q8_0`] with each weight block's nibbles unpacked and
/// re-centred by −8 first, as [`ch06_quantization::dot::dot_q4_0_q8_0`] does; one row
/// against four tokens unpacks the row's block once, four rows against one token
/// (`four_rows_one_token_q4_0`) read the token's block once.
#[target_feature(enable = "avx2,fma,f16c")]
pub fn dot4_q4_0_q8_0(w: [&[u8]; 4], a: [&[BlockQ8_0]; 4]) -> [f32; 4] {
    let nb = pairs_blocks::<{ BlockQ4_0::BYTES }, _>(&w, &a);
    if a.iter().all(|t| t.as_ptr() == a[0].as_ptr()) {
        return four_rows_one_token_q4_0(w, a[0], nb); // decode: one token, four rows
    }
    let one_row = w.iter().all(|r| r.as_ptr() == w[0].as_ptr());
    let (wp, ap) = (w.map(<[u8]>::as_ptr), a.map(<[BlockQ8_0]>::as_ptr));
    let unpack = |p: *const u8| {
        // SAFETY: the caller passes a block's first byte; its 16 nibble bytes follow the scale.
        _mm256_sub_epi8(unsafe { unpack_nibbles_at(p.add(2)) }, _mm256_set1_epi8(8))
    };
    let mut sum = _mm_setzero_ps();
    for b in 0..nb {
        // SAFETY: every row has nb blocks (checked above) and b < nb; unaligned loads only.
        unsafe {
            let wb: [*const u8; 4] = wp.map(|p| p.add(b * BlockQ4_0::BYTES));
            let ab: [*const BlockQ8_0; 4] = ap.map(|p| p.add(b));
            let q: [__m256i; 4] = if one_row {
                [unpack(wb[0]); 4]
            } else {
                wb.map(unpack)
            };
            let p: [__m256i; 4] = std::array::from_fn(|i| {
                let y = _mm256_loadu_si256((&raw const (*ab[i]).qs).cast());
                _mm256_madd_epi16(
                    _mm256_maddubs_epi16(_mm256_sign_epi8(q[i], q[i]), _mm256_sign_epi8(y, q[i])),
                    _mm256_set1_epi16(1),
                )
            });
            let sumi = _mm_cvtepi32_ps(hsum4_i32(p));
            let (d, _) = halves4_ptr(wb.map(|p| p.cast::<i32>()));
            let (da, _) = halves4_ptr(ab.map(|p| p.cast::<i32>()));
            sum = _mm_add_ps(sum, _mm_mul_ps(sumi, _mm_mul_ps(d, da)));
        }
    }
    lanes4(sum)
}

// ANCHOR: four_rows_q4_0
/// Four Q4_0 rows against one token (a decode step): the token's block is loaded, and its
/// scale decoded, once for the four rows. The nibbles stay unsigned (0..15, no sign trick):
/// `Σ (q − 8)·y = Σ q·y − 8·Σ y`, and `8·Σ y` is one more `vpmaddubsw` per block, shared by
/// the four rows. The integers are the same, so every lane is [`dot_q4_0_q8_0`]'s.
#[target_feature(enable = "avx2,fma,f16c")]
fn four_rows_one_token_q4_0(w: [&[u8]; 4], a: &[BlockQ8_0], nb: usize) -> [f32; 4] {
    let wp = w.map(<[u8]>::as_ptr);
    let ones = _mm256_set1_epi16(1);
    let mut sum = _mm_setzero_ps();
    for (b, ab) in a.iter().enumerate().take(nb) {
        let y = load32(qs_bytes(&ab.qs));
        let eight_y = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(8), y), ones);
        // SAFETY: every row has nb blocks (checked by the caller) and b < nb.
        unsafe {
            let wb: [*const u8; 4] = wp.map(|p| p.add(b * BlockQ4_0::BYTES));
            prefetch_next_rows(wp[0], 4 * nb * BlockQ4_0::BYTES, nb, b); // as in Q4_1
            let p: [__m256i; 4] = std::array::from_fn(|i| {
                let q = unpack_nibbles_at(wb[i].add(2));
                _mm256_sub_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(q, y), ones), eight_y)
            });
            let sumi = _mm_cvtepi32_ps(hsum4_i32(p));
            let (d, _) = halves4_ptr(wb.map(|p| p.cast::<i32>()));
            let [_, _, da, _] = halves([0; 4], q8_0_scale(ab));
            sum = _mm_add_ps(sum, _mm_mul_ps(sumi, _mm_mul_ps(d, _mm_set1_ps(da))));
        }
    }
    lanes4(sum)
}
// ANCHOR_END: four_rows_q4_0
