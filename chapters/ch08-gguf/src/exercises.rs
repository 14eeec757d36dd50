//! Exercises for chapter 8. Fill in each `todo!()`, then run `cargo xtask exercises ch08`
//! (or `cargo test -p ch08-gguf --features exercises --test exercises`). Exercises 1 to 5
//! read a file, so each is also about refusing a bad one; 6 to 8 are about the layouts the
//! kernels read; 9 and 10 are two of the differences between model families.
#![allow(unused_variables)]

/// Exercise 1: read a metadata string.
///
/// A GGUF string at byte `pos` of `buf` is a little-endian u64 length, then that many bytes
/// of UTF-8. Return the string and the offset just after it; return `None` if the length or
/// the bytes run past the end of `buf`, or the bytes are not UTF-8. Never panic, whatever
/// the length says (think of 2^64 − 1).
///
/// Hint: `buf.get(pos..)` and `get(..8)` fail softly where indexing would panic; compare the
/// length with what remains *before* converting it to `usize` or adding it to anything.
/// `std::str::from_utf8`. See "A reader that checks first".
pub fn read_string(buf: &[u8], pos: usize) -> Option<(String, usize)> {
    // TODO: length, bounds check, bytes, UTF-8.
    todo!("exercise 1: read a metadata string")
}

/// Exercise 2: a tensor's size in bytes, with overflow checks.
///
/// A tensor of `dims` (ggml order: `dims[0]` is the row length) in a type that packs
/// `block_values` values into `block_bytes` bytes takes
/// `elements / block_values × block_bytes` bytes. Return `None` when `dims` is empty, a row
/// is not a whole number of blocks, or any product overflows a u64.
///
/// Hint: `u64::checked_mul` in a `try_fold`, and `is_multiple_of`. Q4_1 is 32 values in 20
/// bytes: `[576, 1536]` takes 1536 × 18 × 20 = 552 960 bytes. See "Sizes that cannot
/// overflow".
pub fn tensor_bytes(dims: &[u64], block_values: u64, block_bytes: u64) -> Option<u64> {
    // TODO: row check, element count, bytes: every step checked.
    todo!("exercise 2: a tensor's byte size")
}

/// Exercise 3: where a tensor's data starts.
///
/// The tensor descriptions end at byte `header_end`; the data section starts at the next
/// multiple of `alignment`; a tensor's data is at `offset` from there. Return the absolute
/// position, or `None` if `alignment` is not a power of two, `offset` is not a multiple of
/// it, or the sum overflows.
///
/// Hint: `u64::checked_next_multiple_of`, `is_power_of_two`, `checked_add`. A header that
/// ends at byte 1 785 652 with alignment 32 has 12 bytes of padding (SmolLM2's happens to end
/// at 1 785 664, on a boundary, and has none). See "The data section".
pub fn tensor_start(header_end: u64, alignment: u64, offset: u64) -> Option<u64> {
    // TODO: align up, check the offset, add.
    todo!("exercise 3: a tensor's data offset")
}

/// Exercise 4: undo llama.cpp's Q/K row order.
///
/// llama.cpp stores the query row that chapter 3 calls `r` (in head `r / head_dim`, half
/// `j`, index `i` within the half: `r = head·head_dim + j·head_dim/2 + i`) at row
/// `head·head_dim + 2i + j`. Return the stored row that holds chapter 3's row `r`.
///
/// Hint: split `r` into head, half and index with `/` and `%`; for `head_dim = 4` the rows
/// come from `[0, 2, 1, 3]`. See "Two pairings, one file".
pub fn stored_row(r: usize, head_dim: usize) -> usize {
    // TODO: head, half, index → stored row.
    todo!("exercise 4: un-permute a Q/K row")
}

/// Exercise 5: the vocabulary from metadata.
///
/// `tokenizer.ggml.tokens` holds each token's text and `tokenizer.ggml.token_type` its kind
/// (1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte). Pair them up as
/// chapter 2's `Tokenizer` constructors take them; return an error that says both lengths
/// when the arrays differ in length, and one that names the token when a type is outside
/// 1..=6.
///
/// Hint: `ch02_tokenizer::TokenKind::from_gguf` maps a known type; check the range first,
/// since it reads unknown numbers as normal. See "The tokenizer is in the file".
pub fn vocab_entries(
    tokens: &[String],
    types: &[i32],
) -> Result<Vec<(String, ch02_tokenizer::TokenKind)>, String> {
    // TODO: lengths, ranges, pairs.
    todo!("exercise 5: the vocabulary from metadata")
}

/// Exercise 6: unpack a Q4_K scale and min.
///
/// A Q4_K super-block keeps eight (scale, min) pairs of 6 bits each in 12 bytes `s`. Pairs
/// 0–3: scale in the low 6 bits of `s[j]`, min in the low 6 bits of `s[j + 4]`. Pairs 4–7:
/// the low 4 bits of scale and min are the low and high nibble of `s[j + 4]`, and their top
/// 2 bits are the top 2 bits of `s[j − 4]` (scale) and `s[j]` (min). Return pair `j`.
///
/// Hint: `& 63`, `& 0x0f`, `>> 4`, `>> 6` and `<< 4`. Pairs 4–7 reuse the two spare bits of
/// each of bytes 0–7. See "The K-quant super-block".
pub fn q4_k_scale_min(j: usize, s: &[u8; 12]) -> (u8, u8) {
    // TODO: two cases, j < 4 and j >= 4.
    todo!("exercise 6: unpack a Q4_K scale and min")
}

/// Exercise 7: Q5_0's fifth bits in a packed lane.
///
/// `blk` is one block of a packed group of eight Q5_0 rows (chapter 7's `Packed`): 16 bytes
/// of the eight f16 scales, then the eight rows' 32-bit masks of fifth bits (row `r`'s at
/// bytes `16 + 4r..`, little-endian: bit `j` belongs to element `j`), then four chunks of 32
/// bytes, lane `r` of chunk `c` (bytes `48 + 32c + 4r..`) holding the row's nibble bytes
/// `4c..4c + 4`. Return row `r`'s quants in chunk `c`, 0 to 31: elements `4c..4c + 4` (the
/// low nibbles, first) and then `16 + 4c..16 + 4c + 4` (the high nibbles), each with its
/// fifth bit (16) added.
///
/// Hint: read the mask with `u32::from_le_bytes`; element `j`'s fifth bit is
/// `(qh >> j) & 1`. See "Packed Q5_0 and the K-quants".
pub fn packed_q5_0_quants(blk: &[u8], r: usize, c: usize) -> [u8; 8] {
    // TODO: the lane's mask, its four bytes, low nibbles then high, each with its fifth bit.
    todo!("exercise 7: Q5_0's fifth bits in a packed lane")
}

/// Exercise 8: one token's lane of the eight-token Q4_K kernel.
///
/// `block` is a Q4_K super-block unpacked (`BlockK`: 256 quants 0..15 in element order,
/// `sm[0..8]` the eight sub-blocks' scales and `sm[8..16]` their mins, `d = [d, dmin]`), and
/// `a` eight tokens' activations laid out as `EightsK` (in `a.qs[b]`, quant `l` of token `t`
/// is at `32 · (l / 4) + 4t + l % 4`; `a.sums[b][s][t]` is the sum of token `t`'s quants in
/// sub-block `s`; `a.d[b][t]` its scale). Return block `b`'s term of token `t`'s dot:
/// `d · d_a · Σ_s scale_s · Σ q·a − dmin · d_a · Σ_s min_s · sums_s`, the integer sums in
/// i32 and the float step in that order.
///
/// Hint: two integers per block, `sum_q` and `sum_m`, then one line of float arithmetic, as
/// chapter 7's `layout::kquant::dot_q4_k_q8_k` does it for one token. See "The K-quants,
/// eight tokens a register".
pub fn eights_q4_k_lane(
    block: &ch07_simd_parallel::layout::eights_k::BlockK,
    a: &ch07_simd_parallel::layout::eights_k::EightsK,
    b: usize,
    t: usize,
) -> f32 {
    // TODO: sum_q over the eight sub-blocks, sum_m from the stored sums, then the float step.
    todo!("exercise 8: one token's lane of the eight-token Q4_K kernel")
}

/// Exercise 9: Qwen3's QK-norm.
///
/// `x` is one token's queries (or keys): `n_heads` heads of `weight.len()` values each, side
/// by side. Qwen3 (and Gemma-3) RMS-normalise every head on its own before RoPE: for each
/// head `h`, `x_h[i] ← x_h[i] / √(mean(x_h²) + eps) · weight[i]`, the mean over that head's
/// values only. The same `weight` serves every head.
///
/// Hint: `chunks_exact_mut(weight.len())`; compute the mean of squares in f32, then
/// `1.0 / (mean + eps).sqrt()`. Normalising the whole row at once is the mistake to avoid:
/// a loud head would quiet the others. See "The families people run".
pub fn qk_norm(x: &mut [f32], weight: &[f32], eps: f32) {
    // TODO: one RMSNorm per head-sized chunk of x.
    todo!("exercise 9: Qwen3's QK-norm")
}

/// Exercise 10: Gemma-2's soft-capped attention weights.
///
/// `scores` are one query's dot products with its keys. Turn them into attention weights in
/// place: multiply each by `scale`, soft-cap it (`cap · tanh(s / cap)`), then softmax (the
/// largest subtracted before `exp`, then divided by the sum).
///
/// Hint: the cap comes after the scale and before the softmax; compute it as llama.cpp does,
/// `(s * (1.0 / cap)).tanh() * cap`. A score of 100 with a cap of 5 counts as 5, so it
/// can no longer take all the weight. See "The families people run".
pub fn softcapped_weights(scores: &mut [f32], scale: f32, cap: f32) {
    // TODO: scale, cap, softmax.
    todo!("exercise 10: Gemma-2's soft-capped attention weights")
}
