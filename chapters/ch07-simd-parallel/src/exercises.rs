//! Exercises for chapter 7. Fill in each `todo!()`, then run `cargo xtask exercises ch07`
//! (or `cargo test -p ch07-simd-parallel --features exercises --test exercises`). Exercises 2
//! and 5 are AVX2 code; their tests say so if this CPU lacks it. Exercise 7's test compares
//! with the arena of huge pages, and says so where there is none (not Linux).
#![allow(unused_variables)]
// The AVX2 functions have one safety condition: call them only when the CPU has AVX2 (the
// tests check `is_x86_feature_detected!` first).
#![allow(clippy::missing_safety_doc)]

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Exercise 1: chapter 6's eight-lane f32 sum in two four-lane halves.
///
/// Return `Σ a_i · b_i` with exactly the bits of chapter 6's `dot_f32_lanes` (eight running
/// sums, lane `l` taking elements `8k + l`; then the halving sum; then the tail in order), but
/// keeping the eight sums as two four-lane registers would: `lo` for lanes 0..4 and `hi` for
/// lanes 4..8, each step a multiply and then an add. This is how the NEON `dot_f32` of "The
/// same kernels on ARM" keeps chapter 6's order on 128-bit registers; here it is plain Rust,
/// so it runs on any machine.
///
/// Hint: after the loop, `lo[l] + hi[l]` is chapter 6's `acc[l] + acc[l + 4]`. Of the four
/// sums left, chapter 6 adds lane 0 to lane 2 and lane 1 to lane 3 first, then the two
/// results; `(s0 + s1) + (s2 + s3)` is another number in its last bits. Do not use
/// `mul_add`: it rounds once where chapter 6 rounds twice. See "Exactly chapter 6's answer".
pub fn dot_f32_two_halves(a: &[f32], b: &[f32]) -> f32 {
    // TODO: lo and hi, multiply then add; then the lanes' sum in chapter 6's order; the tail.
    todo!("exercise 1: the eight-lane f32 sum in two halves")
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
/// `_mm256_loadu_si256`. For the horizontal sum, add the two 128-bit halves
/// (`_mm256_castsi256_si128`, `_mm256_extracti128_si256::<1>`, `_mm_add_epi32`), fold the four
/// lanes twice with `_mm_shuffle_epi32` and an add, and read lane 0 with `_mm_cvtsi128_si32`.
/// See "One operand unsigned" and "Registers and lanes".
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

/// Exercise 4: eight tokens' block, a token per lane.
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
    todo!("exercise 4: eight tokens' block, a token per lane")
}

/// Exercise 5: the eight-row float step.
///
/// Eight rows' Q8_0 dots against one token, block `b` of them: `sumi` holds each row's exact
/// integer `Σ w·a` over the block (row `r` in lane `r`), `d` the eight rows' f16 scales (as
/// bits), `d_a` the token's block scale (f16 bits). Return `acc` with each lane's running
/// sum advanced as chapter 6's `dot_q8_0_q8_0` advances it: `sum += sumi as f32 · (d · d_a)`.
/// Called block after block, lane `r` must end with row `r`'s dot, bit for bit.
///
/// Hint: `_mm256_cvtph_ps` turns eight f16 (an `__m128i`, `_mm_loadu_si128`) into eight f32;
/// `_mm_set1_epi16` puts `d_a` in every lane first. Multiply `d · d_a` first, then by the
/// converted `sumi` (`_mm256_cvtepi32_ps`), then add: another order rounds differently. See
/// "Eight rows at a time" (`add_scaled`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
pub fn eight_rows_step(acc: __m256, sumi: __m256i, d: &[u16; 8], d_a: u16) -> __m256 {
    // TODO: convert the scales, multiply in chapter 6's order, add to acc.
    todo!("exercise 5: the eight-row float step")
}

/// Exercise 6: a packed group's block.
///
/// `rows[r]` is block `b` of row `r` of a Q4_0 matrix as the file stores it: 2 bytes of f16
/// scale, then 16 bytes of nibbles. Return block `b` of the packed group of those eight rows
/// (144 bytes): the eight scales side by side (row `r`'s at bytes `2r..2r + 2`), then four
/// chunks of 32 bytes, chunk `c` holding nibble bytes `4c..4c + 4` of row 0, then of row 1,
/// ... of row 7.
///
/// Hint: the head is 16 bytes, so lane `r`'s four bytes of chunk `c` start at
/// `16 + 32c + 4r`; a row's nibble bytes start at byte 2 of its block. See "Eight rows
/// interleaved at load".
pub fn pack_q4_0_block(rows: [&[u8; 18]; 8]) -> [u8; 144] {
    // TODO: eight scales, then four chunks of four bytes a row.
    todo!("exercise 6: a packed group's block")
}

/// Exercise 7: where the arena puts each copy.
///
/// An arena of huge pages reserves `cap` bytes and hands out pieces front to back: a piece
/// starts at the arena's next free byte; the piece after it starts at the end rounded up to
/// a multiple of 64 (a cache line), but never past `cap`. A request whose end would pass
/// `cap` gets `None` and changes nothing. Return each request's start (an offset from the
/// arena's first byte), in order.
///
/// Hint: keep `next`; `checked_add` for the end (a length can be huge), `next_multiple_of(64)`
/// and `min(cap)`. See "Huge pages" (`Arena::take`).
pub fn arena_offsets(lens: &[usize], cap: usize) -> Vec<Option<usize>> {
    // TODO: one start per request, or None.
    todo!("exercise 7: where the arena puts each copy")
}
