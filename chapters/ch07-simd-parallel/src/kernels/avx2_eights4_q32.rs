//! Four unpacked Q4_0, Q5_0 or Q4_1 rows against the same eight tokens: the eight-token
//! kernel of [`super::avx2_eights_q32_k`] with each step's activations loaded once for the four
//! rows. One row a call loads a step's 32 activation bytes and a weight broadcast for
//! every `vpmaddubsw`, two loads an instruction; here four rows share the first, so a
//! block costs 8 + 32 loads for four rows instead of 64, and the activations, read from
//! L1 either way, are read a quarter as often.
//!
//! With VNNI, `vpdpbusd` (on 256-bit registers: AVX-512 VL) multiplies the four byte
//! pairs of a lane and adds them to its 32-bit total in one instruction, where AVX2 needs
//! `vpmaddubsw`, a 16-bit add and `vpmaddwd`. The integer dots are exact both ways, and
//! each row's float step is the one-row kernel's, lane for lane: the same bits.

use std::arch::x86_64::*;

use crate::layout::eights::{Block32, Eights};

/// Panics unless every row (of `blocks` blocks) has one block per activation block.
fn check(blocks: [usize; 4], a: &Eights) {
    let n = a.qs.len();
    assert!(
        blocks.iter().all(|&b| b == n) && a.d.len() == n && a.offset.len() == n && a.s.len() == n,
        "one activation block per weight block"
    );
}

/// The float step of one row's block, as [`super::avx2_eights_q32_k`]'s: `(dw · da) · dot`
/// less the offset (Q4_0, Q5_0), or plus `m · s` (Q4_1), added to the row's lanes.
#[inline]
#[target_feature(enable = "avx2")]
fn block_step<const Q4_1: bool>(
    acc: __m256,
    w: &Block32,
    dots: __m256i,
    a: &Eights,
    b: usize,
) -> __m256 {
    // SAFETY: 8 f32 (or i32) of block b (lengths checked by the callers).
    let da = unsafe { _mm256_loadu_ps(a.d[b].as_ptr()) };
    let dw = _mm256_set1_ps(w.d);
    let p = if Q4_1 {
        // SAFETY: as above.
        let s = unsafe { _mm256_loadu_ps(a.s[b].as_ptr()) };
        _mm256_add_ps(
            _mm256_mul_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(dots)),
            _mm256_mul_ps(_mm256_set1_ps(w.m), s),
        )
    } else {
        // SAFETY: as above.
        let offset = unsafe { _mm256_loadu_si256(a.offset[b].as_ptr().cast()) };
        let dots = _mm256_cvtepi32_ps(_mm256_sub_epi32(dots, offset));
        _mm256_mul_ps(_mm256_mul_ps(dw, da), dots)
    };
    _mm256_add_ps(acc, p)
}

/// The weight's quants `4s..4s + 4` of block `w`, in every lane.
#[inline]
#[target_feature(enable = "avx2")]
fn quants(w: &Block32, s: usize) -> __m256i {
    let q: [u8; 4] = w.q[4 * s..4 * s + 4].try_into().expect("four quants");
    _mm256_set1_epi32(i32::from_le_bytes(q))
}

/// Writes each row's eight lanes out.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn lanes(acc: [__m256; 4]) -> [[f32; 8]; 4] {
    acc.map(|v| {
        let mut out = [0.0f32; 8];
        // SAFETY: eight f32 into eight f32.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), v) };
        out
    })
}

// ANCHOR: rows4_avx2
/// One block of four rows against eight tokens on AVX2: each row's exact integer dots, one
/// lane a token. Per half block, the four steps' activations (`x`, the block's 256 bytes)
/// are loaded once; each row sums its four `vpmaddubsw`s in 16 bits (at most
/// `8 · 128 · 31`, inside i16) and widens them with `vpmaddwd`.
#[inline]
#[target_feature(enable = "avx2")]
fn block_dots(w: [&Block32; 4], x: &[i8; 256]) -> [__m256i; 4] {
    let ones = _mm256_set1_epi16(1);
    let mut dots = [_mm256_setzero_si256(); 4];
    for half in 0..2 {
        // SAFETY: steps 4·half..4·half + 4, 32 bytes each, of the block's 256.
        let xs: [__m256i; 4] = std::array::from_fn(|s| unsafe {
            _mm256_loadu_si256(x.as_ptr().add(32 * (4 * half + s)).cast())
        });
        for (w, dot) in w.iter().zip(dots.iter_mut()) {
            let p: [__m256i; 4] =
                std::array::from_fn(|s| _mm256_maddubs_epi16(quants(w, 4 * half + s), xs[s]));
            let p = _mm256_add_epi16(_mm256_add_epi16(p[0], p[1]), _mm256_add_epi16(p[2], p[3]));
            *dot = _mm256_add_epi32(*dot, _mm256_madd_epi16(p, ones));
        }
    }
    dots
}
// ANCHOR_END: rows4_avx2

/// [`block_dots`] with VNNI: one `vpdpbusd` a step and row, the four rows' sums independent.
#[inline]
#[target_feature(enable = "avx512f,avx512vl,avx512vnni,avx2")]
fn block_dots_vnni(w: [&Block32; 4], x: &[i8; 256]) -> [__m256i; 4] {
    let mut dots = [_mm256_setzero_si256(); 4];
    for s in 0..8 {
        // SAFETY: step s's 32 bytes of the block's 256.
        let xs = unsafe { _mm256_loadu_si256(x.as_ptr().add(32 * s).cast()) };
        let q: [__m256i; 4] = std::array::from_fn(|r| quants(w[r], s));
        dots = std::array::from_fn(|r| _mm256_dpbusd_epi32(dots[r], q[r], xs));
    }
    dots
}

/// Each row's float step for block `b` (`w`, its four blocks), added to its lanes.
#[inline]
#[target_feature(enable = "avx2")]
fn four_steps<const Q4_1: bool>(
    acc: &mut [__m256; 4],
    w: [&Block32; 4],
    dots: [__m256i; 4],
    a: &Eights,
    b: usize,
) {
    for r in 0..4 {
        acc[r] = block_step::<Q4_1>(acc[r], w[r], dots[r], a, b);
    }
}

/// Four unpacked rows ([`crate::layout::eights::Rows32`]'s) against eight tokens: row `r`'s lanes are
/// [`super::avx2_eights_q32_k::dot8_row32`]`(rows[r], a)`'s.
///
/// # Safety
/// The CPU must have AVX2, and with `VNNI` AVX-512 VL and VNNI; the lengths are checked here.
pub(super) unsafe fn dot8x4_row32<const Q4_1: bool, const VNNI: bool>(
    rows: [&[Block32]; 4],
    a: &Eights,
) -> [[f32; 8]; 4] {
    check(rows.map(<[Block32]>::len), a);
    #[target_feature(enable = "avx2")]
    fn avx2<const Q4_1: bool>(rows: [&[Block32]; 4], a: &Eights) -> [[f32; 8]; 4] {
        let mut acc = [_mm256_setzero_ps(); 4]; // row r, lane t: token t's sum so far
        for (b, x) in a.qs.iter().enumerate() {
            let w = [&rows[0][b], &rows[1][b], &rows[2][b], &rows[3][b]];
            four_steps::<Q4_1>(&mut acc, w, block_dots(w, x), a, b);
        }
        lanes(acc)
    }
    #[target_feature(enable = "avx512f,avx512vl,avx512vnni,avx2")]
    fn vnni<const Q4_1: bool>(rows: [&[Block32]; 4], a: &Eights) -> [[f32; 8]; 4] {
        let mut acc = [_mm256_setzero_ps(); 4];
        for (b, x) in a.qs.iter().enumerate() {
            let w = [&rows[0][b], &rows[1][b], &rows[2][b], &rows[3][b]];
            four_steps::<Q4_1>(&mut acc, w, block_dots_vnni(w, x), a, b);
        }
        lanes(acc)
    }
    // SAFETY: the caller's promise.
    unsafe {
        if VNNI {
            vnni::<Q4_1>(rows, a)
        } else {
            avx2::<Q4_1>(rows, a)
        }
    }
}
