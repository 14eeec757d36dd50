//! Exercises for chapter 13. Fill in each `todo!()`, then run `cargo xtask exercises ch13`.
//! Exercise 3 is WGSL: its test runs your shader code on the GPU (lavapipe will do; `bash
//! scripts/test-deps.sh` installs it).
#![allow(unused_variables)]

/// Exercise 1: a grid of workgroups.
///
/// A dispatch names its workgroups as a grid `(x, y)`, and each dimension is capped (65 535
/// on most adapters: `max_per_dim`). Return a grid for `total` workgroups (at least one of
/// each dimension) that holds every one of them (`x · y ≥ total`), with `x ≤ max_per_dim`,
/// and wastes less than one row of it (`x · y − total < x`). A shader numbers its group
/// `y · x_count + x` and skips those past `total`.
///
/// Hint: as wide as allowed, then as many rows as it takes: `u32::div_ceil`. A `total` of 0
/// still needs a grid of one (the shader skips it). See "One submission, many dispatches".
pub fn grid(total: u32, max_per_dim: u32) -> (u32, u32) {
    // TODO: x = as many as fit in a row; y = the rows needed for `total`.
    todo!("exercise 1: a grid of workgroups")
}

/// Exercise 2: a Q4_0 weight, read as a shader reads it.
///
/// The weights buffer is the file's bytes as `u32` words (little-endian), and an 18-byte
/// Q4_0 block starts wherever the one before it ended, often in the middle of a word.
/// `block` is the byte where a block starts. Return its element `i` (0..32) as the integer
/// it stands for: byte `2 + j` of the block (after the f16 scale) holds element `j` in its
/// low nibble and element `j + 16` in its high one, each stored as `q + 8`.
///
/// Hint: byte `b` of the buffer is `(words[b / 4] >> (8 · (b % 4))) & 0xff`, which works
/// wherever the block starts; then a nibble, then `- 8`. See "The weights as the file holds
/// them".
pub fn q4_0_weight(words: &[u32], block: usize, i: usize) -> i32 {
    // TODO: the byte that holds element i, its nibble, minus 8.
    todo!("exercise 2: a Q4_0 weight from words")
}

/// Exercise 3: the workgroup's sum, in WGSL.
///
/// Return WGSL text that defines `fn workgroup_sum(lane: u32, v: f32) -> f32`. Each of a
/// workgroup's 256 invocations calls it with its own `lane` (0..256) and its own value; each
/// must get back the sum of all 256 values. The test's shader declares the workgroup memory
/// you may use, `var<workgroup> partial: array<f32, 256>;`, and calls your function from
/// every invocation at once (this is how the RMSNorm shader adds its sums of squares).
///
/// Hint: store `v` in `partial[lane]`, then halve: while `width` goes 128, 64, …, 1, lanes
/// below `width` add `partial[lane + width]` into `partial[lane]`. A `workgroupBarrier()`
/// must come between every step (and before anyone reads the total), and every invocation
/// must reach each barrier, so the `if` goes inside the loop, around the addition only. See
/// "The Q4_0 product, built up".
pub fn workgroup_sum_wgsl() -> &'static str {
    // TODO: the WGSL of `fn workgroup_sum(lane: u32, v: f32) -> f32`.
    todo!("exercise 3: the workgroup's sum")
}

/// Exercise 4: how far two orders of a sum may land apart.
///
/// The CPU adds a row's `n` terms in one order, the GPU in another; each f32 sum lands
/// within `γ(n − 1) · Σ|t|` of the exact one, where `γ(k) = k·u / (1 − k·u)` and `u = 2⁻²⁴`.
/// Return the bound on how far apart the two sums can be, for `n` terms whose magnitudes
/// add up to `sum_abs`: twice that.
///
/// Hint: compute in f64; with `n` of 0 or 1 there is no addition at all, and the bound is
/// 0. See "How close to the CPU, exactly".
pub fn order_bound(n: usize, sum_abs: f64) -> f64 {
    // TODO: 2 · γ(n − 1) · sum_abs.
    todo!("exercise 4: the bound on two orders")
}
