//! The x86 helpers every kernel of this chapter shares: horizontal sums, scales decoded by
//! F16C, nibbles unpacked, loads, prefetches, and the byte dot product of both levels. No
//! kernel is here; every kernel file imports from here, and this file from none of them.

#![cfg(target_arch = "x86_64")]
#![allow(clippy::missing_safety_doc)]

use std::arch::x86_64::*;

use ch06_quantization::blocks::{BlockQ8_0, BlockQ8_1, QK};

/// Sum of the 8 i32 lanes.
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn hsum(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s)); // swap the 64-bit halves
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s)); // swap neighbours
    _mm_cvtsi128_si32(s)
}

/// The lane sums of `N` vectors: for four, three `vphaddd` and one add reduce them all
/// at once instead of four separate horizontal sums.
#[inline]
#[target_feature(enable = "avx2")]
fn hsums<const N: usize>(v: &[__m256i; N]) -> [i32; N] {
    if N == 4 {
        let h = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
        let s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h));
        let mut out = [0i32; 4];
        // SAFETY: four i32 into four i32.
        unsafe { _mm_storeu_si128(out.as_mut_ptr().cast(), s) };
        std::array::from_fn(|t| out[t])
    } else {
        std::array::from_fn(|t| hsum(v[t]))
    }
}

/// The f16 at byte `i` of `b`, by the CPU's converter (F16C): no branch, where the
/// portable [`ch06_quantization::f16::f16_to_f32_fast`] needs one for the subnormal
/// scales of small weights, which real K-quant blocks hold often enough to mispredict.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(crate) fn f16(b: &[u8], i: usize) -> f32 {
    let bits = u16::from_le_bytes([b[i], b[i + 1]]);
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(bits))))
}

// ANCHOR: splat_f16
/// [`f16`] in every lane of a vector. The half is copied to eight lanes, then all eight are
/// converted: with the scalar above the compiler fills the other lanes of the vector it
/// converts from whatever register is at hand (`vpinsrw`), and when that is a kernel's
/// running sum, every block waits for the one before it.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(crate) fn splat_f16(b: &[u8], i: usize) -> __m256 {
    splat_bits(u16::from_le_bytes([b[i], b[i + 1]]))
}

/// [`splat_f16`] of an f16 given by its bits.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(crate) fn splat_bits(bits: u16) -> __m256 {
    _mm256_cvtph_ps(_mm_set1_epi16(bits as i16))
}
// ANCHOR_END: splat_f16

#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn load(p: &[i8], at: usize) -> __m256i {
    assert!(at + 32 <= p.len());
    // SAFETY: 32 bytes at `at`, checked above.
    unsafe { _mm256_loadu_si256(p.as_ptr().add(at).cast()) }
}

/// The sums of an `R × T` grid of lane vectors: four at once when there are four.
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) fn grid_sums<const R: usize, const T: usize>(v: &[[__m256i; T]; R]) -> [[i32; T]; R] {
    if R * T == 4 {
        let flat: [__m256i; 4] = std::array::from_fn(|i| v[i / T][i % T]);
        let s = hsums(&flat);
        std::array::from_fn(|r| std::array::from_fn(|t| s[r * T + t]))
    } else {
        std::array::from_fn(|r| std::array::from_fn(|t| hsum(v[r][t])))
    }
}

/// Two pairs of f16 scales, decoded at once with F16C's `vcvtph2ps` (exact, like chapter 1's
/// decoder): `w2` and `a2` are each two f16 side by side (Q4_1's `d, m`; Q8_1's `d, s`),
/// and the result is `[w.0, w.1, a.0, a.1]`.
#[target_feature(enable = "avx2,f16c")]
pub(crate) fn halves(w2: [u8; 4], a2: [u8; 4]) -> [f32; 4] {
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

/// The first four bytes of an activation block: its f16 `d` and `s` (Q8_1) as stored.
pub(crate) fn q8_1_scales(b: &BlockQ8_1) -> [u8; 4] {
    let [d0, d1] = b.d.to_le_bytes();
    let [s0, s1] = b.s.to_le_bytes();
    [d0, d1, s0, s1]
}

/// The first two bytes of a Q8_0 activation block, its f16 `d`, padded to four.
pub(crate) fn q8_0_scale(b: &BlockQ8_0) -> [u8; 4] {
    let [d0, d1] = b.d.to_le_bytes();
    [d0, d1, 0, 0]
}

// ANCHOR: byte_dot
/// `Σ x_j·y_j` over 32 unsigned bytes `x` and 32 signed bytes `y`, a block's integer dot.
/// AVX2 needs two instructions: `vpmaddubsw` multiplies the bytes and adds neighbouring pairs
/// into sixteen 16-bit lanes, and `vpmaddwd` against ones adds those pairs into eight 32-bit
/// lanes. AVX-512 VNNI's `vpdpbusd` does both in one, and without the 16-bit step between,
/// which can saturate. Either way a horizontal add gives the block's integer, the same
/// integer; a kernel written once for both picks with `VNNI` and is compiled twice, each copy
/// inside a function that enables its level's features.
#[inline(always)]
pub(crate) unsafe fn dot_u8_i8<const VNNI: bool>(x: __m256i, y: __m256i) -> i32 {
    // SAFETY (both): the caller's function enables AVX2, and with VNNI also AVX-512 F/VL/VNNI.
    let lanes = if VNNI {
        unsafe { _mm256_dpbusd_epi32(_mm256_setzero_si256(), x, y) }
    } else {
        unsafe { _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), _mm256_set1_epi16(1)) }
    };
    unsafe { hsum(lanes) }
}

/// `Σ x_j·y_j` for signed `x` and `y`: `x`'s sign moved onto `y` (`|x| · (y·sign x) = x·y`,
/// and `|−128|` is still a byte when read unsigned), then [`dot_u8_i8`].
#[inline(always)]
pub(crate) unsafe fn dot_i8<const VNNI: bool>(x: __m256i, y: __m256i) -> i32 {
    // SAFETY: as in dot_u8_i8.
    unsafe { dot_u8_i8::<VNNI>(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x)) }
}
// ANCHOR_END: byte_dot

/// The 32 quants of a 4-bit block, one per byte, in element order: the low nibbles of the 16
/// bytes (elements 0..16), then the high nibbles (elements 16..32).
#[target_feature(enable = "avx2")]
pub(crate) fn unpack_nibbles(qs: &[u8; 16]) -> __m256i {
    // SAFETY: `qs` is 16 readable bytes.
    unsafe { unpack_nibbles_at(qs.as_ptr()) }
}

/// [`unpack_nibbles`] of the 16 bytes at `p`, for the kernels that walk blocks by pointer.
///
/// # Safety
/// `p` must be readable for 16 bytes (no alignment needed).
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn unpack_nibbles_at(p: *const u8) -> __m256i {
    // SAFETY: the caller's promise; loadu has no alignment requirement.
    let bytes = unsafe { _mm_loadu_si128(p.cast()) };
    let low = _mm_and_si128(bytes, _mm_set1_epi8(0x0f));
    let high = _mm_and_si128(_mm_srli_epi16::<4>(bytes), _mm_set1_epi8(0x0f));
    _mm256_set_m128i(high, low)
}

/// 32 bytes from `p`.
#[target_feature(enable = "avx2")]
pub(crate) fn load32(p: &[u8; 32]) -> __m256i {
    // SAFETY: `p` is 32 readable bytes; loadu has no alignment requirement.
    unsafe { _mm256_loadu_si256(p.as_ptr().cast()) }
}

pub(crate) fn qs_bytes(qs: &[i8; QK]) -> &[u8; QK] {
    // SAFETY: i8 and u8 have the same size and alignment, and every bit pattern is valid for both.
    unsafe { &*(qs as *const [i8; QK]).cast::<[u8; QK]>() }
}

pub(crate) fn sub<const N: usize, const M: usize>(b: &[u8; N], start: usize) -> &[u8; M] {
    b[start..start + M]
        .try_into()
        .expect("in bounds by the block's size")
}

/// How many groups ahead [`prefetch_next_rows`] asks. On the reference Zen 5, one group
/// ahead decoded Gemma-3 6% slower than two (its lines came too late); three beat two on both
/// models and on the synthetic 1B and 7B files (by 0.5–4% in alternating rounds); four was
/// no better than three on Gemma-3, and six slower than two (lines that come too early are
/// pushed out of the cache before their turn).
pub const GROUPS_AHEAD: usize = 3;

// ANCHOR: prefetch_next_rows
/// In a decode step, while block `b` of the `nb` blocks of a group of consecutive rows
/// (`group` bytes from `first`) is multiplied, asks for block `b`'s share of the group
/// [`GROUPS_AHEAD`] groups on: by the last block, that whole group has been asked for, in memory
/// order, a line or a few at a time. A kernel that walks four or eight rows side by side
/// reads four or eight interleaved streams, which the hardware prefetcher follows poorly;
/// this turns them back into one stream, running ahead of the loads. A prefetch never
/// faults, so an address past the matrix is harmless.
#[inline]
#[target_feature(enable = "avx2")]
pub fn prefetch_next_rows(first: *const u8, group: usize, nb: usize, b: usize) {
    let share = group.div_ceil(nb).next_multiple_of(64);
    prefetch_lines(first.wrapping_add(GROUPS_AHEAD * group + b * share), share);
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
