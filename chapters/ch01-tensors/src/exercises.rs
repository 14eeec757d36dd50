#![allow(unused_variables)]
//! Chapter 1 exercises. Each function below is a stub: replace its `todo!()` with your
//! code, then check your work with
//!
//! ```text
//! cargo xtask exercises ch01
//! ```
//!
//! (or `cargo test -p ch01-tensors --features exercises --test exercises`). The tests
//! compare your function with the chapter's own implementation and with values worked
//! out by hand. Reference solutions are in `chapters/ch01-tensors/solutions/exercises.rs`.

use crate::{Error, Tensor};

/// Exercise 1: transpose as a view
///
/// Return `t` with dimensions `d0` and `d1` swapped — without copying a single element.
/// Element `[.., i, .., j, ..]` of the result must be element `[.., j, .., i, ..]` of `t`,
/// and the result must share `t`'s storage. (You may assume `d0` and `d1` are valid.)
///
/// Hint: element `[i0, i1, ...]` lives at `offset + Σ ik · strides[k]`. Swap two entries
/// of the shape *and* the same two entries of the strides, keep the offset, and build
/// the view with `t.as_strided(&shape, &strides, t.offset())`.
pub fn transpose_view(t: &Tensor, d0: usize, d1: usize) -> Tensor {
    // TODO: swap shape and strides at d0 and d1, then call t.as_strided.
    todo!("exercise 1: transpose as a view")
}

/// Exercise 2: narrow as a view
///
/// Return the elements `start..start + len` along dimension `dim` of `t` as a view that
/// shares `t`'s storage, like `t.narrow(dim, start, len)`. Return an `Error::Shape` when
/// `dim` is not a dimension of `t` or the range does not fit in it.
///
/// Hint: the strides do not change. Only `shape[dim]` shrinks to `len`, and the view
/// starts `start` steps further along `dim`: `offset + start · strides[dim]`.
pub fn narrow_view(t: &Tensor, dim: usize, start: usize, len: usize) -> Result<Tensor, Error> {
    // TODO: check dim and start + len, then build the view with t.as_strided.
    todo!("exercise 2: narrow as a view")
}

/// Exercise 3: matmul in i-k-j order
///
/// Compute `out (m, n) = a (m, k) · b (k, n)` (all row-major) with the loops ordered
/// i, then k, then j, so that the innermost loop walks along a row of `b` and a row of
/// `out` instead of down a column of `b`. Overwrite `out`; do not add to what is in it.
///
/// Hint: zero `out` first. Then for each row `i` and each `p` in `0..k`, take the single
/// number `a[i*k + p]` and add `a[i*k + p] × b[p*n + j]` to `out[i*n + j]` for every `j`.
pub fn matmul_ikj(out: &mut [f32], a: &[f32], b: &[f32], m: usize, k: usize, n: usize) {
    // TODO: out.fill(0.0), then loops i, p, j.
    todo!("exercise 3: matmul in i-k-j order")
}

/// Exercise 4: numerically stable softmax
///
/// Replace each `x[i]` with `e^(x[i]) / Σ e^(x[j])`, so the row becomes probabilities
/// that sum to 1. It must work for scores like `[1000.0, 1001.0]`, where `e^1000`
/// overflows f32 to infinity.
///
/// Hint: `e^(x−c) / Σ e^(x−c)` is the same value for any constant `c`. Choose `c` as the
/// largest `x`, so every exponent is ≤ 0 and every `e^…` lies in (0, 1].
pub fn softmax(x: &mut [f32]) {
    // TODO: find the max, exponentiate x - max, divide by the sum.
    todo!("exercise 4: numerically stable softmax")
}

/// Exercise 5: RMSNorm
///
/// Write `out[i] = x[i] / √(mean(x²) + eps) · weight[i]`: divide the row by its root mean
/// square, then scale each feature by its learned weight. `out`, `x` and `weight` have
/// the same length.
///
/// Hint: one pass for `Σ x[i]²`, divide by the length for the mean, add `eps` before
/// the square root (it keeps an all-zero row from giving 0/0), then one pass to write `out`.
pub fn rmsnorm(out: &mut [f32], x: &[f32], weight: &[f32], eps: f32) {
    // TODO: compute the scale 1 / sqrt(mean(x²) + eps), then out[i] = x[i] * scale * weight[i].
    todo!("exercise 5: RMSNorm")
}

/// Exercise 6: decode an f16
///
/// Turn the bits of an IEEE 754 half-precision float (`s eeeee mmmmmmmmmm`: 1 sign bit,
/// 5 exponent bits with bias 15, 10 fraction bits) into the f32 with the same value.
/// Handle zero, subnormals (exponent 0), infinity and NaN (exponent 31).
///
/// Hint: for a normal number (exponent 1..=30) the f32 has the same sign, exponent
/// `e − 15 + 127`, and the 10 fraction bits moved to the top of its 23 (`<< 13`). For
/// exponent 0 the value is `m × 2^−24`, which you can compute with f32 arithmetic
/// (`m as f32 * 2f32.powi(-24)`, then apply the sign) instead of shifting bits.
pub fn f16_to_f32(bits: u16) -> f32 {
    // TODO: split sign, exponent and fraction; handle the four cases.
    todo!("exercise 6: decode an f16")
}
