//! Exercises for chapter 6. Fill in each `todo!()`, then run `cargo xtask exercises ch06`
//! (or `cargo test -p ch06-quantization --features exercises --test exercises`). Each test
//! compares your function with the chapter's own code, bit for bit, on random and edge cases.
#![allow(unused_variables)]

use crate::blocks::BlockQ8_1;

/// Exercise 1: quantize a Q8_0 block.
///
/// Return the block's scale as f16 bits and its 32 quants, exactly as llama.cpp does:
/// `d = max|x| / 127`, `id = 1/d` (0 when `d` is 0), `q_j = round(x_j · id)`, rounding
/// halves away from zero. Store `d` with `crate::f16::f32_to_f16`.
///
/// Hint: the rounding must be C's `roundf`, which Rust's `f32::round` is (not
/// `round_ties_even`); and multiply by the inverse, as llama.cpp does, rather than divide by
/// `d`: `x / d` and `x * (1/d)` differ in the last bit often enough to flip a quant. See
/// "Filling a block" in the chapter.
pub fn quantize_q8_0_block(x: &[f32; 32]) -> (u16, [i8; 32]) {
    // TODO: the scale from the largest magnitude, then every value times its inverse, rounded.
    todo!("exercise 1: quantize a Q8_0 block")
}

/// Exercise 2: unpack a Q4_0 block.
///
/// A Q4_0 block is 18 bytes: the f16 scale `d` (little-endian), then 16 bytes holding 32
/// four-bit quants `q` in 0..=15. Return the 32 values `d · (q − 8)` in element order. Decode
/// `d` with `crate::f16::f16_to_f32`.
///
/// Hint: byte `2 + j` holds element `j` in its LOW nibble and element `j + 16` in its HIGH
/// nibble, not elements `2j` and `2j + 1`: `b & 0x0f` and `b >> 4`. See "The byte layouts".
pub fn unpack_q4_0(block: &[u8; 18]) -> [f32; 32] {
    // TODO: decode d; for each of the 16 bytes, two quants, to elements j and j + 16.
    todo!("exercise 2: unpack a Q4_0 block")
}

/// Exercise 3: the Q4_1 × Q8_1 dot product.
///
/// `w` is a row of Q4_1 blocks as stored (20 bytes each: f16 `d`, f16 `m`, 16 bytes of
/// nibbles in Q4_0's order), `a` the activation row quantized to Q8_1 (one block per weight
/// block). Return `Σ_blocks (d·d_a)·Σ_j q_j·p_j + m·s`, where `q_j` are the weight block's
/// quants, `p_j = a[b].qs[j]`, `d_a = a[b].scale()` and `s = a[b].sum()`: compute the
/// integer sum in `i32`, then add each block's term to an `f32` running sum in block order,
/// exactly in this form, so your result equals the chapter's to the bit.
///
/// Hint: the `m·s` term is the whole reason Q8_1 exists: `Σ_j (d·q_j + m)·a_j` splits into
/// `d·Σ q_j·a_j` plus `m·Σ a_j`, and `s` is that sum of the activation block, stored when it
/// was quantized. Forgetting it leaves every block's minimum out. See "Why Q4_1 needs Q8_1".
pub fn dot_q4_1_q8_1(w: &[u8], a: &[BlockQ8_1]) -> f32 {
    // TODO: for each 20-byte block and its activation block: i32 sum, then the float term.
    todo!("exercise 3: the Q4_1 x Q8_1 dot product")
}

/// Exercise 4: f32 to f16, rounding to nearest, ties to even.
///
/// Return the 16 bits of the f16 nearest to `x`: sign, 5 exponent bits (bias 15), 10
/// fraction bits. Values too large become ±infinity, values below the normal range become
/// subnormals or ±0, NaN stays a NaN. A value exactly halfway between two f16 values goes to
/// the one whose last fraction bit is 0.
///
/// Hint: for a normal result keep the top 10 of f32's 23 fraction bits and look at the 13
/// you drop: more than half (0x1000) rounds up, exactly half rounds up only if the kept part
/// is odd. Add the carry to the combined exponent-and-fraction bits and it ripples into the
/// exponent by itself. Subnormals are the same with a longer shift (the implicit 1 made
/// explicit). See "Scales in 16 bits".
pub fn f32_to_f16(x: f32) -> u16 {
    // TODO: split the bits, round the fraction, handle overflow, subnormals, NaN.
    todo!("exercise 4: f32 to f16")
}
