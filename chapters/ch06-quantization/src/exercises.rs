//! Exercises for chapter 6. Fill in each `todo!()`, then run `cargo xtask exercises ch06`
//! (or `cargo test -p ch06-quantization --features exercises --test exercises`). Each test
//! compares your function with the chapter's own code, on random and edge cases.
#![allow(unused_variables)]

/// Exercise 1: decode an f16 with one multiplication.
///
/// Return the f32 value of the f16 whose bits are `bits`, exactly the value of chapter 1's
/// `f16_to_f32`, but computed the way this chapter's kernels do it, as "Scales in 16 bits"
/// describes: a normal half's 15 bits below the sign, moved up by 13, hold its exponent and
/// fraction where an f32 keeps them, and one multiplication by a power of two fixes the
/// exponent; a subnormal half (exponent 0) is its 10-bit fraction, as an integer, times
/// 2^-24. Put the sign back last. Infinity and NaN (exponent 31) may take
/// `crate::f16::f16_to_f32`.
///
/// Hint: after the shift the exponent field holds f16's exponent biased by 15, where an f32
/// expects a bias of 127, so the value is 2^112 too small. Build the powers of two from their
/// bits, `f32::from_bits((127 + 112) << 23)`, so they are exact. (Chapter 1's exercise 6
/// decoded the same bits case by case; the answer must be the same, bit for bit.)
pub fn f16_to_f32_fast(bits: u16) -> f32 {
    // TODO: subnormal, normal (shift and one multiply), or infinity/NaN; then the sign.
    todo!("exercise 1: decode an f16 with one multiplication")
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

/// Exercise 3: how far a Q8_0 block can be off.
///
/// Return the bound "How large the error can be" states for a Q8_0 block: no value `x_j`
/// comes back further than `d/2 + 127·e(d)` from where it was, with `d = max|x| / 127` and
/// `e(v)` the most that storing `v` as an f16 can move it. The test quantizes blocks with the
/// chapter's code and checks your bound against their real errors.
///
/// Hint: `d/2` is rounding to the nearest of the levels; the stored scale is off by up to
/// `e(d)`, and a quant of up to 127 multiplies that. For a normal f16, `e(v) = |v|·2^-11`
/// (f16 keeps 11 significant bits). Below f16's smallest normal number, 2^-14, the gaps
/// between f16 values stop shrinking: there the error is up to half the smallest subnormal
/// step, 2^-25, however small `v` is. `e(v)` is the larger of the two.
pub fn q8_0_error_bound(x: &[f32; 32]) -> f32 {
    // TODO: d from the largest magnitude, e(d), then half a step plus 127 times e(d).
    todo!("exercise 3: how far a Q8_0 block can be off")
}

/// Exercise 4: how far the quantized model's prediction moved.
///
/// The KL column of "What each bit costs" compares, at each position, the f32 model's
/// next-token distribution `p` with a quantized model's `q`, each the softmax of a row of
/// logits: `KL(p ‖ q) = Σ_i p_i · (log p_i − log q_i)`, in nats. Return it for one position,
/// computed in f64.
///
/// Hint: never take `exp` of a raw logit: a logit of 100 overflows f32's `exp`, and a
/// probability of 1e-300 has no useful log. Work with log-probabilities,
/// `log p_i = l_i − log Σ_j exp(l_j)`, and compute that log-sum-exp after subtracting the
/// largest logit, so that every `exp` is at most 1.
pub fn kl_divergence(p_logits: &[f32], q_logits: &[f32]) -> f64 {
    // TODO: both rows' log-sum-exp, then Σ p_i (log p_i − log q_i).
    todo!("exercise 4: how far the prediction moved")
}
