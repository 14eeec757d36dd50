//! Exercises for chapter 7. Fill in each `todo!()`, then run `cargo xtask exercises ch07`
//! (or `cargo test -p ch07-simd-parallel --features exercises --test exercises`). The SIMD
//! exercises are for x86-64 with AVX2; their tests say so if this CPU lacks it.
#![allow(unused_variables)]
// The AVX2 functions have one safety condition: call them only when the CPU has AVX2 (the
// tests check `is_x86_feature_detected!` first).
#![allow(clippy::missing_safety_doc)]

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Exercise 1: an AVX2 horizontal sum.
///
/// Return the sum of the eight i32 lanes of `v` (wrapping on overflow, as the lanes' own
/// additions do).
///
/// Hint: add the two 128-bit halves (`_mm256_castsi256_si128`, `_mm256_extracti128_si256::<1>`,
/// `_mm_add_epi32`), then fold the four lanes twice with `_mm_shuffle_epi32` and an add, and
/// read lane 0 with `_mm_cvtsi128_si32`. Each fold halves the lanes that matter. See
/// "Registers and lanes" in the chapter.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub fn hsum_i32(v: __m256i) -> i32 {
    // TODO: halves, then two folds, then lane 0.
    todo!("exercise 1: an AVX2 horizontal sum")
}

/// Exercise 2: the Q8_0 block dot in AVX2.
///
/// Return `Σ_j w_j · a_j` over the 32 signed bytes of a weight block and an activation block,
/// with `_mm256_maddubs_epi16` (unsigned × signed byte pairs → i16) and `_mm256_madd_epi16`
/// (against ones: i16 pairs → i32), then a horizontal sum.
///
/// Hint: `vpmaddubsw` wants its first operand unsigned. `_mm256_sign_epi8(w, w)` is `|w|`
/// (and −128 stays the byte 0x80, which read as unsigned is 128: right), and
/// `_mm256_sign_epi8(a, w)` gives `a` the sign of `w`, so `|w| · (a·sign w) = w · a`. Load with
/// `_mm256_loadu_si256`. See "One operand unsigned".
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub fn dot_q8_0_block(w: &[i8; 32], a: &[i8; 32]) -> i32 {
    // TODO: load both, move the sign, maddubs, madd with ones, horizontal sum.
    todo!("exercise 2: the Q8_0 block dot in AVX2")
}

/// Exercise 3: splitting rows across threads.
///
/// `w` is a `(rows, cols)` matrix with `rows = out.len()`. Set `out[r] = Σ_c w[r, c] · x[c]`
/// with `ch01_tensors::ops::dot`, splitting the rows into `threads` contiguous bands, one
/// `std::thread::scope` thread each (no rayon). The result must be bit-for-bit the one
/// thread's, for any `threads` ≥ 1, including more threads than rows.
///
/// Hint: `out.chunks_mut(band)` with `band = rows.div_ceil(threads)` gives each thread its
/// own disjoint part of `out` (the borrow checker then lets them write at once); the band's
/// first row is its index times `band`. Each output is one dot product computed by one
/// thread, so how the rows are shared cannot change any bit. See "Two cores".
pub fn matvec_rows_parallel(out: &mut [f32], w: &[f32], x: &[f32], threads: usize) {
    // TODO: bands of rows, one scoped thread each.
    todo!("exercise 3: splitting rows across threads")
}

/// Exercise 4: rounding half away from zero with SIMD.
///
/// Return each lane of `v` rounded as `f32::round` does (halves away from zero: 2.5 → 3,
/// −2.5 → −3), for |v| < 2^23.
///
/// Hint: `_mm256_round_ps` with `_MM_FROUND_TO_NEAREST_INT` rounds halves to EVEN, and
/// `floor(x + 0.5)` fails on 0.49999997 (the addition itself rounds up to 1). Truncate
/// (`_MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC`), subtract to get the dropped fraction (exact),
/// and step one away from zero where its magnitude is at least 0.5. See "Exactly chapter 6's
/// answer".
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub fn round_away(v: __m256) -> __m256 {
    // TODO: truncate, compare the fraction with 0.5, add ±1 where needed.
    todo!("exercise 4: rounding half away from zero")
}

/// Exercise 5: eight tokens' block, a token per lane.
///
/// `tokens[t]` is token `t`'s 32 activation quants of one block. Return them laid out as
/// [`crate::layout::eights::Eights`] holds a block: step `k` (0..8), then token `t` (0..8), then
/// the four quants `4k..4k + 4` of that token, so that when a step's 32 bytes are loaded
/// into a register, 32-bit lane `t` holds token `t`'s four quants of that step.
///
/// Hint: it is a transpose of (token, step) into (step, token), four bytes at a time:
/// `out[k][t]` is `tokens[t][4k..4k + 4]`. See "Many tokens at once".
pub fn interleave_eight(tokens: [&[i8; 32]; 8]) -> [[[i8; 4]; 8]; 8] {
    // TODO: out[k][t] = token t's quants 4k..4k + 4.
    todo!("exercise 5: eight tokens' block, a token per lane")
}

/// Exercise 6: one step of the eight-token kernel.
///
/// `q` holds a weight block's 32 quants (unsigned, 0..=15) in element order, one per byte;
/// `step` is step `k` of eight tokens' activations (token `t`'s quants `4k..4k + 4` in 32-bit
/// lane `t`). Return `pairs` plus this step's products: in each 16-bit lane, the sum of two
/// neighbouring products of weight quant × activation quant, as `vpmaddubsw` makes them,
/// where every token meets the SAME four weight quants `4k..4k + 4`.
///
/// Hint: those four weight quants are 32-bit lane `k` of `q`; copy that lane to all eight
/// lanes with `_mm256_permutevar8x32_epi32(q, _mm256_set1_epi32(k as i32))`, then
/// `_mm256_maddubs_epi16` (weights first: they are the unsigned operand) and
/// `_mm256_add_epi16`. See "Many tokens at once".
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub fn eights_step(pairs: __m256i, q: __m256i, step: __m256i, k: usize) -> __m256i {
    // TODO: broadcast lane k of q, multiply with the step, add to pairs.
    todo!("exercise 6: one step of the eight-token kernel")
}
