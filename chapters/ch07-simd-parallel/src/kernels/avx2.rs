//! AVX2 kernels: 32 bytes per register, one block of 32 quants per instruction.
//!
//! The workhorse is `vpmaddubsw` (`_mm256_maddubs_epi16`): it multiplies 32 **unsigned**
//! bytes by 32 **signed** bytes and adds neighbouring pairs into 16 i16 lanes. One operand
//! must be unsigned; for Q8_0 × Q8_0, both signed, the kernel moves the weight's sign onto
//! the activation (`|w| · (a·sign(w)) = w · a`), which `vpsignb` does in one instruction.
//! `vpmaddwd` against ones then adds pairs of i16 into 8 i32 lanes, and a horizontal add
//! gives the block's integer sum — exactly the integer chapter 6 computes, so the float
//! arithmetic after it, done in the same order as chapter 6, gives the same bits.
//!
//! Every function here is `#[target_feature(enable = "avx2,fma,f16c")]`: calling it on a CPU
//! without AVX2 is undefined behaviour, which is why the only caller is [`super::Avx2`],
//! which exists only after the CPU said yes.

#![cfg(target_arch = "x86_64")]
// Every public function here has one safety condition, the module's: the CPU must have the
// features its `#[target_feature]` names. It is stated once, above, not per function.
#![allow(clippy::missing_safety_doc)]

use std::arch::x86_64::*;

use ch06_quantization::blocks::{BlockQ4_0, BlockQ4_1, BlockQ8_0, BlockQ8_1, QK};

/// Sum of the 8 i32 lanes.
#[target_feature(enable = "avx2")]
pub(super) fn hsum_i32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s)); // swap the 64-bit halves
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s)); // swap neighbours
    _mm_cvtsi128_si32(s)
}

/// Two pairs of f16 scales, decoded at once with F16C's `vcvtph2ps` (exact, like chapter 1's
/// decoder): `w2` and `a2` are each two f16 side by side (Q4_1's `d, m`; Q8_1's `d, s`),
/// and the result is `[w.0, w.1, a.0, a.1]`.
#[target_feature(enable = "avx2,f16c")]
pub(super) fn halves(w2: [u8; 4], a2: [u8; 4]) -> [f32; 4] {
    let v = _mm_cvtph_ps(_mm_set_epi32(
        0,
        0,
        i32::from_le_bytes(a2),
        i32::from_le_bytes(w2),
    ));
    let mut out = [0.0f32; 4];
    // SAFETY: `out` is 4 writable f32.
    unsafe { _mm_storeu_ps(out.as_mut_ptr(), v) };
    out
}

/// Chapter 6's `f16_to_f32s`: eight halves at a time through F16C's `vcvtph2ps`, which
/// converts every half exactly (a signalling NaN comes out quiet), the tail one at a time.
#[target_feature(enable = "avx2,f16c")]
pub fn f16_to_f32s(src: &[u16], dst: &mut [f32]) {
    assert_eq!(
        src.len(),
        dst.len(),
        "f16_to_f32s: src and dst differ in length"
    );
    let whole = src.len() / 8 * 8;
    for i in (0..whole).step_by(8) {
        // SAFETY: 8 halves and 8 floats at i + 8 ≤ whole ≤ both lengths.
        unsafe {
            let h = _mm_loadu_si128(src.as_ptr().add(i).cast());
            _mm256_storeu_ps(dst.as_mut_ptr().add(i), _mm256_cvtph_ps(h));
        }
    }
    for (o, &h) in dst[whole..].iter_mut().zip(&src[whole..]) {
        *o = ch06_quantization::f16::f16_to_f32_fast(h);
    }
}

/// The first four bytes of an activation block: its f16 `d` and `s` (Q8_1) as stored.
pub(super) fn q8_1_scales(b: &BlockQ8_1) -> [u8; 4] {
    let [d0, d1] = b.d.to_le_bytes();
    let [s0, s1] = b.s.to_le_bytes();
    [d0, d1, s0, s1]
}

/// The first two bytes of a Q8_0 activation block, its f16 `d`, padded to four.
pub(super) fn q8_0_scale(b: &BlockQ8_0) -> [u8; 4] {
    let [d0, d1] = b.d.to_le_bytes();
    [d0, d1, 0, 0]
}

// ANCHOR: prefetch_next_rows
/// In a decode step, while block `b` of the `nb` blocks of a group of consecutive rows
/// (`group` bytes from `first`) is multiplied, asks for block `b`'s share of the group that
/// follows: by the last block, the whole next group has been asked for, in memory order, a
/// line or a few at a time. A kernel that walks four or eight rows side by side reads four
/// or eight interleaved streams, which the hardware prefetcher follows poorly; this turns
/// them back into one stream, one group ahead. A prefetch never faults, so an address past
/// the matrix is harmless.
#[inline]
#[target_feature(enable = "avx2")]
pub fn prefetch_next_rows(first: *const u8, group: usize, nb: usize, b: usize) {
    let share = group.div_ceil(nb).next_multiple_of(64);
    prefetch_lines(first.wrapping_add(group + b * share), share);
}

/// Asks the caches for the `bytes` from `at`, a cache line (64 bytes) at a time. A prefetch
/// never faults, so `at` may point anywhere, past the end of a matrix included.
#[inline]
pub fn prefetch_lines(at: *const u8, bytes: usize) {
    for line in (0..bytes).step_by(64) {
        // SAFETY: every x86-64 CPU has SSE; a prefetch reads nothing the program sees.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(at.wrapping_add(line).cast()) };
    }
}
// ANCHOR_END: prefetch_next_rows

/// Sum of 32 signed-by-signed byte products, `Σ x_j·y_j`.
#[target_feature(enable = "avx2")]
fn dot_i8(x: __m256i, y: __m256i) -> i32 {
    let ux = _mm256_sign_epi8(x, x); // |x|, as unsigned bytes (|−128| = 128 still fits)
    let sy = _mm256_sign_epi8(y, x); // y with x's sign (0 where x is 0)
    let pairs = _mm256_maddubs_epi16(ux, sy); // 16 × (|x|·sy + |x|·sy): at most 2·128·127 < 2^15
    hsum_i32(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)))
}

/// Sum of 32 unsigned-by-signed byte products (`x` in 0..=15 here, so no saturation).
#[target_feature(enable = "avx2")]
fn dot_u8_i8(x: __m256i, y: __m256i) -> i32 {
    let pairs = _mm256_maddubs_epi16(x, y);
    hsum_i32(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)))
}

/// The 32 quants of a 4-bit block, one per byte, in element order: the low nibbles of the 16
/// bytes (elements 0..16), then the high nibbles (elements 16..32).
#[target_feature(enable = "avx2")]
pub(super) fn unpack_nibbles(qs: &[u8; 16]) -> __m256i {
    // SAFETY: `qs` is 16 readable bytes.
    unsafe { unpack_nibbles_at(qs.as_ptr()) }
}

/// [`unpack_nibbles`] of the 16 bytes at `p`, for the kernels that walk blocks by pointer.
///
/// # Safety
/// `p` must be readable for 16 bytes (no alignment needed).
#[target_feature(enable = "avx2")]
pub(super) unsafe fn unpack_nibbles_at(p: *const u8) -> __m256i {
    // SAFETY: the caller's promise; loadu has no alignment requirement.
    let bytes = unsafe { _mm_loadu_si128(p.cast()) };
    let low = _mm_and_si128(bytes, _mm_set1_epi8(0x0f));
    let high = _mm_and_si128(_mm_srli_epi16::<4>(bytes), _mm_set1_epi8(0x0f));
    _mm256_set_m128i(high, low)
}

/// 32 bytes from `p`.
#[target_feature(enable = "avx2")]
pub(super) fn load32(p: &[u8; 32]) -> __m256i {
    // SAFETY: `p` is 32 readable bytes; loadu has no alignment requirement.
    unsafe { _mm256_loadu_si256(p.as_ptr().cast()) }
}

pub(super) fn qs_bytes(qs: &[i8; QK]) -> &[u8; QK] {
    // SAFETY: i8 and u8 have the same size and alignment, and every bit pattern is valid for both.
    unsafe { &*(qs as *const [i8; QK]).cast::<[u8; QK]>() }
}

pub(super) fn sub<const N: usize, const M: usize>(b: &[u8; N], start: usize) -> &[u8; M] {
    b[start..start + M]
        .try_into()
        .expect("in bounds by the block's size")
}

// ANCHOR: dot_q4_1
/// Chapter 6's `dot_q4_1_q8_1`, 32 quants at a time: unpack the nibbles, one `vpmaddubsw`
/// (the nibbles are the unsigned operand, no sign trick needed), one `vpmaddwd`, a horizontal
/// add; then chapter 6's float arithmetic, in chapter 6's order.
#[target_feature(enable = "avx2,fma,f16c")]
pub fn dot_q4_1_q8_1(w: &[u8], a: &[BlockQ8_1]) -> f32 {
    let (blocks, rest) = w.as_chunks::<{ BlockQ4_1::BYTES }>();
    assert!(
        rest.is_empty() && blocks.len() == a.len(),
        "row lengths differ"
    );
    let mut sum = 0.0f32;
    for (wb, ab) in blocks.iter().zip(a) {
        let q = unpack_nibbles(sub(wb, 4));
        let sumi = dot_u8_i8(q, load32(qs_bytes(&ab.qs)));
        let [d, m, da, s] = halves(*sub(wb, 0), q8_1_scales(ab));
        sum += (d * da) * sumi as f32 + m * s;
    }
    sum
}
// ANCHOR_END: dot_q4_1

/// Chapter 6's `dot_q4_0_q8_0`: nibbles re-centred by −8 (now signed), then the sign trick.
#[target_feature(enable = "avx2,fma,f16c")]
pub fn dot_q4_0_q8_0(w: &[u8], a: &[BlockQ8_0]) -> f32 {
    let (blocks, rest) = w.as_chunks::<{ BlockQ4_0::BYTES }>();
    assert!(
        rest.is_empty() && blocks.len() == a.len(),
        "row lengths differ"
    );
    let mut sum = 0.0f32;
    for (wb, ab) in blocks.iter().zip(a) {
        let q = _mm256_sub_epi8(unpack_nibbles(sub(wb, 2)), _mm256_set1_epi8(8));
        let sumi = dot_i8(q, load32(qs_bytes(&ab.qs)));
        let [d, _, da, _] = halves([wb[0], wb[1], 0, 0], q8_0_scale(ab));
        sum += sumi as f32 * (d * da);
    }
    sum
}

/// Chapter 6's `dot_q8_0_q8_0`.
#[target_feature(enable = "avx2,fma,f16c")]
pub fn dot_q8_0_q8_0(w: &[u8], a: &[BlockQ8_0]) -> f32 {
    let (blocks, rest) = w.as_chunks::<{ BlockQ8_0::BYTES }>();
    assert!(
        rest.is_empty() && blocks.len() == a.len(),
        "row lengths differ"
    );
    let mut sum = 0.0f32;
    for (wb, ab) in blocks.iter().zip(a) {
        let sumi = dot_i8(load32(sub(wb, 2)), load32(qs_bytes(&ab.qs)));
        let [d, _, da, _] = halves([wb[0], wb[1], 0, 0], q8_0_scale(ab));
        sum += sumi as f32 * (d * da);
    }
    sum
}

/// Chapter 6's `dot_int8_q8_0`: the row's i8 in blocks of 32, one scale at the end.
#[target_feature(enable = "avx2,fma,f16c")]
pub fn dot_int8_q8_0(w: &[u8], scale: f32, a: &[BlockQ8_0]) -> f32 {
    assert_eq!(w.len(), a.len() * QK, "row lengths differ");
    let mut sum = 0.0f32;
    for (wq, ab) in w.as_chunks::<QK>().0.iter().zip(a) {
        let sumi = dot_i8(load32(wq), load32(qs_bytes(&ab.qs)));
        let [da, ..] = halves(q8_0_scale(ab), [0; 4]);
        sum += sumi as f32 * da;
    }
    sum * scale
}

// ANCHOR: quantize
/// `x · id` rounded half away from zero (Rust's `round`, C's `roundf`), 8 lanes at a time.
/// AVX's own rounding instruction rounds halves to even, so: truncate, and step one away
/// from zero where the dropped fraction is at least one half (the subtraction is exact).
#[target_feature(enable = "avx2,fma,f16c")]
fn round_away(v: __m256) -> __m256i {
    let t = _mm256_round_ps::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(v);
    let frac = _mm256_sub_ps(v, t);
    let abs = _mm256_andnot_ps(_mm256_set1_ps(-0.0), frac);
    let step = _mm256_and_ps(
        _mm256_cmp_ps::<_CMP_GE_OQ>(abs, _mm256_set1_ps(0.5)),
        _mm256_set1_ps(1.0),
    );
    let signed_step = _mm256_or_ps(step, _mm256_and_ps(v, _mm256_set1_ps(-0.0))); // ±1 or ±0
    _mm256_cvttps_epi32(_mm256_add_ps(t, signed_step))
}

/// One block of activations quantized as chapter 6's `quantize_q8_0` does, bit for bit:
/// the largest magnitude by a vector max, then `round(x · (1/d))` 8 lanes at a time.
/// Returns `(d, quants, Σ quants)`.
#[target_feature(enable = "avx2,fma,f16c")]
fn quantize_block(x: &[f32; QK]) -> (f32, [i8; QK], i32) {
    // SAFETY: `x` is 32 readable f32; loadu has no alignment requirement.
    let v: [__m256; 4] = std::array::from_fn(|i| unsafe { _mm256_loadu_ps(x.as_ptr().add(8 * i)) });
    let sign = _mm256_set1_ps(-0.0);
    let m = v.iter().fold(_mm256_setzero_ps(), |m, &vi| {
        _mm256_max_ps(m, _mm256_andnot_ps(sign, vi))
    });
    let mut lanes = [0.0f32; 8];
    // SAFETY: `lanes` is 8 writable f32.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), m) };
    let amax = lanes.iter().fold(0.0f32, |a, &b| a.max(b)); // max is exact in any order
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut q = [0i32; QK];
    for (i, &vi) in v.iter().enumerate() {
        let r = round_away(_mm256_mul_ps(vi, _mm256_set1_ps(id)));
        // SAFETY: `q[8i..8i + 8]` is 8 writable i32.
        unsafe { _mm256_storeu_si256(q.as_mut_ptr().add(8 * i).cast(), r) };
    }
    let qs: [i8; QK] = std::array::from_fn(|j| q[j] as i8); // |q| ≤ 127
    (d, qs, q.iter().sum())
}
// ANCHOR_END: quantize

/// Activations to Q8_0 blocks.
#[target_feature(enable = "avx2,fma,f16c")]
pub fn quantize_q8_0(x: &[f32], out: &mut Vec<BlockQ8_0>) {
    out.clear();
    for b in x.as_chunks::<QK>().0 {
        let (d, qs, _) = quantize_block(b);
        out.push(BlockQ8_0 {
            d: ch06_quantization::f16::f32_to_f16(d),
            qs,
        });
    }
}

/// Activations to Q8_1 blocks (with `s = d · Σq`).
#[target_feature(enable = "avx2,fma,f16c")]
pub fn quantize_q8_1(x: &[f32], out: &mut Vec<BlockQ8_1>) {
    use ch06_quantization::f16::f32_to_f16;
    out.clear();
    for b in x.as_chunks::<QK>().0 {
        let (d, qs, sum) = quantize_block(b);
        out.push(BlockQ8_1 {
            d: f32_to_f16(d),
            s: f32_to_f16(sum as f32 * d),
            qs,
        });
    }
}

/// Chapter 6's `dot_f32_lanes`, bit for bit: one 8-lane accumulator, multiply then add (not
/// fused), the halving horizontal add, then the tail in order.
#[target_feature(enable = "avx2,fma")]
pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "dot of slices with different lengths");
    let (a8, a_tail) = a.as_chunks::<8>();
    let (b8, b_tail) = b.as_chunks::<8>();
    let mut acc = _mm256_setzero_ps();
    for (x, y) in a8.iter().zip(b8) {
        // SAFETY: x and y are 8 f32 each.
        let (xv, yv) = unsafe { (_mm256_loadu_ps(x.as_ptr()), _mm256_loadu_ps(y.as_ptr())) };
        acc = _mm256_add_ps(acc, _mm256_mul_ps(xv, yv));
    }
    reduce8(acc, a_tail, b_tail)
}

/// The end of [`dot_f32`]: its eight lanes summed, then the tails' products added one by one.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn reduce8(acc: __m256, a_tail: &[f32], b_tail: &[f32]) -> f32 {
    // (acc0+acc4, acc1+acc5, acc2+acc6, acc3+acc7), then (·0+·2, ·1+·3), then their sum.
    let h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps::<1>(acc));
    let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    let h = _mm_add_ss(h, _mm_shuffle_ps::<0b01>(h, h));
    let sum = _mm_cvtss_f32(h);
    a_tail.iter().zip(b_tail).fold(sum, |s, (x, y)| s + x * y)
}

/// `y += a·x`, 8 lanes at a time, multiply then add (not fused), so each element is exactly
/// what the scalar loop computes.
#[target_feature(enable = "avx2,fma")]
pub fn axpy(y: &mut [f32], a: f32, x: &[f32]) {
    assert_eq!(y.len(), x.len(), "axpy of slices with different lengths");
    let av = _mm256_set1_ps(a);
    let (y8, y_tail) = y.as_chunks_mut::<8>();
    let (x8, x_tail) = x.as_chunks::<8>();
    for (yc, xc) in y8.iter_mut().zip(x8) {
        // SAFETY: yc and xc are 8 f32 each.
        unsafe {
            let r = _mm256_add_ps(
                _mm256_loadu_ps(yc.as_ptr()),
                _mm256_mul_ps(av, _mm256_loadu_ps(xc.as_ptr())),
            );
            _mm256_storeu_ps(yc.as_mut_ptr(), r);
        }
    }
    for (yv, &xv) in y_tail.iter_mut().zip(x_tail) {
        *yv += a * xv;
    }
}

/// [`dot_f32`] for each row of `rows` (each `q.len()` long): one call for a head's scores.
#[target_feature(enable = "avx2,fma")]
pub fn dot_f32_rows(q: &[f32], rows: &[f32], out: &mut [f32]) {
    for (o, row) in out.iter_mut().zip(rows.chunks_exact(q.len())) {
        *o = dot_f32(q, row);
    }
}

/// [`axpy`] for each row of `rows` in order, `y` held in registers between rows when it is
/// at most 64 floats (a head of SmolLM2): each element still sees `y + w·x`, row after row,
/// exactly as the one-row calls compute it.
#[target_feature(enable = "avx2,fma")]
pub fn axpy_rows(y: &mut [f32], w: &[f32], rows: &[f32]) {
    let d = y.len();
    if d == 0 || d > 64 || !d.is_multiple_of(8) {
        for (&w, row) in w.iter().zip(rows.chunks_exact(d.max(1))) {
            axpy(y, w, row);
        }
        return;
    }
    let lanes = d / 8;
    let mut acc = [_mm256_setzero_ps(); 8];
    for (i, a) in acc.iter_mut().enumerate().take(lanes) {
        // SAFETY: 8 f32 at 8i < d.
        *a = unsafe { _mm256_loadu_ps(y.as_ptr().add(8 * i)) };
    }
    for (&w, row) in w.iter().zip(rows.chunks_exact(d)) {
        let wv = _mm256_set1_ps(w);
        for (i, a) in acc.iter_mut().enumerate().take(lanes) {
            // SAFETY: 8 f32 at 8i < d of a row of d.
            *a = _mm256_add_ps(
                *a,
                _mm256_mul_ps(wv, unsafe { _mm256_loadu_ps(row.as_ptr().add(8 * i)) }),
            );
        }
    }
    for (i, a) in acc.iter().enumerate().take(lanes) {
        // SAFETY: 8 f32 at 8i < d.
        unsafe { _mm256_storeu_ps(y.as_mut_ptr().add(8 * i), *a) };
    }
}
