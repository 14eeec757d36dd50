//! `nn.Linear` without bias for a whole sequence at once: `out = x · wᵀ`.
//!
//! Seven matrix products per layer, plus the LM head, are this one operation, and they are
//! where the forward pass spends nearly all its time. This module is chapter 1's
//! [`ops::matmul_transb`] with three changes that make it fast enough to watch text
//! appear, none of them beyond plain Rust:
//!
//! 1. **Sixteen accumulators.** Chapter 1's `dot` adds into one running sum, so each
//!    addition waits for the previous one. [`dot16`] keeps sixteen independent partial
//!    sums, which the compiler spreads over SIMD registers.
//! 2. **Cache blocking.** A block of weight rows stays in the cache while every token's
//!    row is multiplied by it, instead of the whole matrix streaming in once per token.
//! 3. **Both cores.** rayon splits the tokens between threads (or, for a single token,
//!    the weight rows).
//!
//! Only the order of the additions differs from `matmul_transb`, so the results agree to
//! float rounding (the tests check it). Each output element is always computed by the
//! same `dot16` call, whatever the sequence length or thread count, so a token's row
//! comes out bit-for-bit the same in a long batch as on its own. Chapter 7 writes the
//! SIMD by hand.

use ch01_tensors::ops;
use rayon::prelude::*;

/// Weight rows per cache block: 64 rows × 1536 floats × 4 bytes = 384 KiB at most, which
/// sits in the L2 cache while all the tokens pass by.
const W_BLOCK: usize = 64;

// ANCHOR: linear
/// `out (seq, n) = x (seq, k) · wᵀ`, with `w (n, k)` in `nn.Linear` layout.
///
/// # Panics
/// If a slice length does not match its dimensions.
pub fn linear(out: &mut [f32], x: &[f32], w: &[f32], seq: usize, k: usize, n: usize) {
    assert_eq!(x.len(), seq * k, "linear: x is not (seq, k) = ({seq}, {k})");
    assert_eq!(w.len(), n * k, "linear: w is not (n, k) = ({n}, {k})");
    assert_eq!(out.len(), seq * n, "linear: out is not ({seq}, {n})");
    let threads = rayon::current_num_threads();
    if seq >= threads {
        // Split the tokens: each thread takes a band of rows of x and out.
        let rows = seq.div_ceil(threads);
        out.par_chunks_mut(rows * n)
            .zip(x.par_chunks(rows * k))
            .for_each(|(out_band, x_band)| linear_rows(out_band, x_band, w, k, n));
    } else {
        // Too few tokens to share out: split the weight rows instead (one output row at a
        // time, whose columns are exactly the weight rows).
        for (out_row, x_row) in out.chunks_exact_mut(n).zip(x.chunks_exact(k)) {
            out_row
                .par_chunks_mut(W_BLOCK)
                .enumerate()
                .for_each(|(b, o)| linear_rows(o, x_row, &w[b * W_BLOCK * k..], k, o.len()));
        }
    }
}

/// The single-threaded kernel: `out (rows, n) = x (rows, k) · w[..n]ᵀ`, blocked over `w`.
fn linear_rows(out: &mut [f32], x: &[f32], w: &[f32], k: usize, n: usize) {
    for j0 in (0..n).step_by(W_BLOCK) {
        let j1 = (j0 + W_BLOCK).min(n);
        // This block of weight rows, (j1 - j0, k), is reused by every token row below.
        for (out_row, x_row) in out.chunks_exact_mut(n).zip(x.chunks_exact(k)) {
            for j in j0..j1 {
                out_row[j] = dot16(x_row, &w[j * k..(j + 1) * k]);
            }
        }
    }
}
// ANCHOR_END: linear

// ANCHOR: dot16
/// Partial sums kept apart in [`dot16`]: four SSE registers of four lanes each.
const LANES: usize = 16;

/// `Σ a[i]·b[i]` with sixteen independent partial sums, added up at the end.
///
/// A single running sum makes every addition wait for the one before (about 4 cycles
/// each). With sixteen, `acc[l]` only depends on itself, the compiler keeps the array in
/// four SIMD registers, and four additions are in flight at once.
pub fn dot16(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "dot16 of slices with different lengths");
    let ((a16, a_tail), (b16, b_tail)) = (a.as_chunks::<LANES>(), b.as_chunks::<LANES>());
    let mut acc = [0.0f32; LANES];
    for (x, y) in a16.iter().zip(b16) {
        for l in 0..LANES {
            acc[l] += x[l] * y[l];
        }
    }
    let tail: f32 = a_tail.iter().zip(b_tail).map(|(x, y)| x * y).sum();
    acc.iter().sum::<f32>() + tail
}
// ANCHOR_END: dot16

/// The obvious version, for tests and for readers comparing: chapter 1's kernel.
pub fn linear_reference(out: &mut [f32], x: &[f32], w: &[f32], seq: usize, k: usize, n: usize) {
    ops::matmul_transb(out, x, w, seq, k, n);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| (((i as u32).wrapping_mul(2654435761) ^ seed) % 1000) as f32 / 500.0 - 1.0)
            .collect()
    }

    /// Agreement with chapter 1's `matmul_transb` for shapes that hit every path: lengths
    /// that leave a tail after `dot16`'s 16 lanes, one token (weight rows split between
    /// threads) and many (tokens split), partial blocks of 64 weight rows.
    #[test]
    fn matches_chapter_1() {
        for &(seq, k, n) in &[
            (1, 576, 576),
            (1, 13, 7),
            (2, 9, 5),
            (3, 576, 192),
            (7, 40, 130),
            (33, 64, 67),
        ] {
            let (x, w) = (values(seq * k, 1), values(n * k, 2));
            let (mut fast, mut slow) = (vec![0.0; seq * n], vec![0.0; seq * n]);
            linear(&mut fast, &x, &w, seq, k, n);
            linear_reference(&mut slow, &x, &w, seq, k, n);
            for (i, (a, b)) in fast.iter().zip(&slow).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-4 * (1.0 + b.abs()),
                    "({seq},{k},{n}) element {i}: {a} vs {b}"
                );
            }
        }
    }

    #[test]
    fn hand_computed() {
        // x = [[1, 2], [3, 4]], w = [[1, 0], [0, 1], [1, 1]] → out = [[1, 2, 3], [3, 4, 7]]
        let mut out = vec![0.0; 6];
        linear(
            &mut out,
            &[1.0, 2.0, 3.0, 4.0],
            &[1.0, 0.0, 0.0, 1.0, 1.0, 1.0],
            2,
            2,
            3,
        );
        assert_eq!(out, vec![1.0, 2.0, 3.0, 3.0, 4.0, 7.0]);
        assert_eq!(dot16(&[1.0; 19], &[2.0; 19]), 38.0);
    }
}
