//! The inner loops of a quantized matrix product, behind one trait.
//!
//! [`QMatrix::matmul_with`](crate::QMatrix::matmul_with) does the bookkeeping — quantize the
//! activations once, walk the rows, share them between threads — and calls a [`Kernels`]
//! for the arithmetic. This chapter's are [`Scalar`]: the plain Rust of [`crate::dot`] and
//! [`crate::quantize`]. Chapter 7 supplies SIMD ones for the same trait, chosen at run time
//! for the CPU, and the forward pass does not change.

use crate::blocks::{BlockQ8_0, BlockQ8_1, QK};
use crate::{dot, quantize};

// ANCHOR: kernels
/// The arithmetic a quantized matrix product needs, one implementation per instruction set.
/// Every implementation must return exactly what [`Scalar`] returns (chapter 7's tests
/// check it bit for bit).
pub trait Kernels: Sync {
    /// A short name for reports: "scalar", "avx2", …
    fn name(&self) -> &'static str;
    /// `Σ w·a` for a Q8_0 weight row (raw bytes) and a Q8_0 activation row.
    fn dot_q8_0_q8_0(&self, w: &[u8], a: &[BlockQ8_0]) -> f32;
    /// `Σ w·a` for a Q4_0 weight row and a Q8_0 activation row.
    fn dot_q4_0_q8_0(&self, w: &[u8], a: &[BlockQ8_0]) -> f32;
    /// `Σ w·a` for a Q4_1 weight row and a Q8_1 activation row.
    fn dot_q4_1_q8_1(&self, w: &[u8], a: &[BlockQ8_1]) -> f32;
    /// `Σ w·a` for an INT8 weight row with its scale and a Q8_0 activation row.
    fn dot_int8_q8_0(&self, w: &[u8], scale: f32, a: &[BlockQ8_0]) -> f32;
    /// Four independent Q4_1 dots, `(w[i], a[i])` for i in 0..4: rows of a matrix against one
    /// activation row, or one row against four tokens. The same four numbers as four calls of
    /// `dot_q4_1_q8_1`; a SIMD set does them together, so their horizontal sums share work.
    fn dot4_q4_1_q8_1(&self, w: [&[u8]; 4], a: [&[BlockQ8_1]; 4]) -> [f32; 4] {
        std::array::from_fn(|i| self.dot_q4_1_q8_1(w[i], a[i]))
    }
    /// Four independent Q8_0 dots (see [`Kernels::dot4_q4_1_q8_1`]).
    fn dot4_q8_0_q8_0(&self, w: [&[u8]; 4], a: [&[BlockQ8_0]; 4]) -> [f32; 4] {
        std::array::from_fn(|i| self.dot_q8_0_q8_0(w[i], a[i]))
    }
    /// Four independent Q4_0 dots (see [`Kernels::dot4_q4_1_q8_1`]).
    fn dot4_q4_0_q8_0(&self, w: [&[u8]; 4], a: [&[BlockQ8_0]; 4]) -> [f32; 4] {
        std::array::from_fn(|i| self.dot_q4_0_q8_0(w[i], a[i]))
    }
    /// Quantizes activations, `x.len()` a multiple of 32, to Q8_0 blocks.
    fn quantize_q8_0(&self, x: &[f32], out: &mut Vec<BlockQ8_0>);
    /// Quantizes activations to Q8_1 blocks.
    fn quantize_q8_1(&self, x: &[f32], out: &mut Vec<BlockQ8_1>);
    /// `Σ a·b` in f32, for attention's scores, in [`dot_f32_lanes`]'s order (which a SIMD
    /// version can follow exactly: every level gives the same bits).
    fn dot_f32(&self, a: &[f32], b: &[f32]) -> f32 {
        dot_f32_lanes(a, b)
    }
    /// `y += a · x`, element by element (no reordering: every implementation gives the
    /// same bits).
    fn axpy(&self, y: &mut [f32], a: f32, x: &[f32]) {
        for (y, &x) in y.iter_mut().zip(x) {
            *y += a * x;
        }
    }
    /// `out[j] = dot_f32(q, row j of rows)` for the rows of `rows` (each `q.len()` long), in
    /// one call: the same numbers as a `dot_f32` per row (a SIMD set saves the calls).
    fn dot_f32_rows(&self, q: &[f32], rows: &[f32], out: &mut [f32]) {
        for (o, row) in out.iter_mut().zip(rows.chunks_exact(q.len())) {
            *o = self.dot_f32(q, row);
        }
    }
    /// `y += w[j] · row j of rows` for j in order: the same numbers as an `axpy` per row (a
    /// SIMD set keeps `y` in registers between rows).
    fn axpy_rows(&self, y: &mut [f32], w: &[f32], rows: &[f32]) {
        for (&w, row) in w.iter().zip(rows.chunks_exact(y.len())) {
            self.axpy(y, w, row);
        }
    }
    // ANCHOR_END: kernels
    // ANCHOR: kernels_many
    /// `out[g · n + j] = dot_f32(qs[g], rows[j])` for every query and each of the `n` rows:
    /// the same numbers as a `dot_f32` each (a SIMD set loads each row once for all the
    /// queries and runs their sums side by side).
    fn dot_f32_many(&self, qs: &[&[f32]], rows: &[&[f32]], out: &mut [f32]) {
        let n = rows.len();
        for (j, row) in rows.iter().enumerate() {
            for (g, q) in qs.iter().enumerate() {
                out[g * n + j] = self.dot_f32(q, row);
            }
        }
    }
    /// `out[g · n + j] = dot_f32(query g, row j)` for the queries of `d` floats side by side
    /// in `qs` and the `n` rows of `d` in `rows`: a `dot_f32_rows` per query (a SIMD set
    /// loads each row once for all of them; SmolLM2's three heads on a KV head of 64).
    fn dot_f32_rows_many(&self, qs: &[f32], d: usize, rows: &[f32], out: &mut [f32]) {
        let n = rows.len() / d.max(1);
        if n == 0 {
            return;
        }
        for (q, o) in qs.chunks_exact(d).zip(out.chunks_exact_mut(n)) {
            self.dot_f32_rows(q, rows, o);
        }
    }
    /// `ys[g] += w[g · n + j] · rows[j]` for the `n` rows in order and every output `g` (`ys`:
    /// outputs of `rows[j].len()`, one after the other): the same numbers as an `axpy` per row
    /// and output, rows outer (a SIMD set keeps part of every output in registers).
    fn axpy_many(&self, ys: &mut [f32], w: &[f32], rows: &[&[f32]]) {
        let n = rows.len();
        let Some(d) = rows.first().map(|r| r.len()).filter(|&d| d > 0) else {
            return;
        };
        for (j, row) in rows.iter().enumerate() {
            for (g, y) in ys.chunks_exact_mut(d).enumerate() {
                self.axpy(y, w[g * n + j], row);
            }
        }
    }
    /// `ys[g] += w[g · n + j] · row j of rows` for every output `g` of `d` floats and the `n`
    /// rows of `d` in order: an `axpy_rows` per output (a SIMD set reads each row once for
    /// all of them; SmolLM2's three heads on a KV head of 64).
    fn axpy_rows_many(&self, ys: &mut [f32], d: usize, w: &[f32], rows: &[f32]) {
        axpy_rows_each(self, ys, d, w, rows);
    }
    // ANCHOR_END: kernels_many
    // ANCHOR: kernels_exp
    /// `x[i] = e^x[i]`: `f32::exp` of each, bit for bit (the C library's `expf`; a SIMD set
    /// does its arithmetic several lanes at a time, see chapter 7).
    fn exp_inplace(&self, x: &mut [f32]) {
        for v in x {
            *v = v.exp();
        }
    }
    /// Chapter 1's [`softmax_inplace`](ch01_tensors::ops::softmax_inplace), bit for bit:
    /// its own steps, the exponentials by [`Kernels::exp_inplace`].
    fn softmax(&self, x: &mut [f32]) {
        ch01_tensors::ops::softmax_with(x, |x| self.exp_inplace(x));
    }
    /// [`Kernels::softmax`] of each row of `n` values in `x`, bit for bit: chapter 1's
    /// [`softmax_rows_with`](ch01_tensors::ops::softmax_rows_with), the rows' sums side by
    /// side.
    fn softmax_rows(&self, x: &mut [f32], n: usize) {
        ch01_tensors::ops::softmax_rows_with(x, n, |x| self.exp_inplace(x));
    }
    /// Chapter 1's [`silu_inplace`](ch01_tensors::ops::silu_inplace), `x / (1 + e^(−x))`,
    /// bit for bit, the exponentials by [`Kernels::exp_inplace`] a stretch at a time.
    fn silu(&self, x: &mut [f32]) {
        let mut e = [0.0f32; 64];
        for part in x.chunks_mut(64) {
            let e = &mut e[..part.len()];
            e.iter_mut().zip(&*part).for_each(|(e, &v)| *e = -v);
            self.exp_inplace(e);
            part.iter_mut().zip(&*e).for_each(|(v, &e)| *v /= 1.0 + e);
        }
    }
    // ANCHOR_END: kernels_exp
    /// `dst[i] = src[i]` as f32, for the halves of an f16 cache (chapter 10's `--kv f16`):
    /// [`f16_to_f32_fast`](crate::f16::f16_to_f32_fast) each, which is exact, so every level
    /// gives the same bits (F16C's `vcvtph2ps` converts eight at once; only a signalling NaN
    /// comes out quiet there, still a NaN).
    fn f16_to_f32s(&self, src: &[u16], dst: &mut [f32]) {
        assert_eq!(
            src.len(),
            dst.len(),
            "f16_to_f32s: src and dst differ in length"
        );
        for (o, &h) in dst.iter_mut().zip(src) {
            *o = crate::f16::f16_to_f32_fast(h);
        }
    }
}

/// [`Kernels::axpy_rows_many`] as an `axpy_rows` per output: the default, and what a SIMD
/// set does with a shape its kernel does not take.
pub fn axpy_rows_each<K: Kernels + ?Sized>(
    k: &K,
    ys: &mut [f32],
    d: usize,
    w: &[f32],
    rows: &[f32],
) {
    let n = rows.len() / d.max(1);
    for (y, w) in ys.chunks_exact_mut(d.max(1)).zip(w.chunks_exact(n.max(1))) {
        k.axpy_rows(y, w, rows);
    }
}

// ANCHOR: dot_f32_lanes
/// `Σ a·b` with eight running sums, `acc[l]` taking every element `i ≡ l (mod 8)`, each step
/// a multiplication then an addition (not fused), added up at the end as
/// `((acc0+acc4) + (acc2+acc6)) + ((acc1+acc5) + (acc3+acc7))`, then the tail after the last
/// whole 8. That is exactly what one 8-lane SIMD register and the usual halving
/// horizontal add compute, so chapter 7's AVX2 version gives the same bits; chapter 1's
/// one-accumulator `dot` cannot be vectorised without changing its result.
pub fn dot_f32_lanes(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "dot of slices with different lengths");
    let (a8, a_tail) = a.as_chunks::<8>();
    let (b8, b_tail) = b.as_chunks::<8>();
    let mut acc = [0.0f32; 8];
    for (x, y) in a8.iter().zip(b8) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    let sum = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
    a_tail.iter().zip(b_tail).fold(sum, |s, (x, y)| s + x * y)
}
// ANCHOR_END: dot_f32_lanes

/// Chapter 6's kernels: plain Rust, whatever the CPU.
pub struct Scalar;

impl Kernels for Scalar {
    fn name(&self) -> &'static str {
        "scalar"
    }
    fn dot_q8_0_q8_0(&self, w: &[u8], a: &[BlockQ8_0]) -> f32 {
        dot::dot_q8_0_q8_0(w, a)
    }
    fn dot_q4_0_q8_0(&self, w: &[u8], a: &[BlockQ8_0]) -> f32 {
        dot::dot_q4_0_q8_0(w, a)
    }
    fn dot_q4_1_q8_1(&self, w: &[u8], a: &[BlockQ8_1]) -> f32 {
        dot::dot_q4_1_q8_1(w, a)
    }
    fn dot_int8_q8_0(&self, w: &[u8], scale: f32, a: &[BlockQ8_0]) -> f32 {
        dot::dot_int8_q8_0(w, scale, a)
    }
    fn quantize_q8_0(&self, x: &[f32], out: &mut Vec<BlockQ8_0>) {
        out.clear();
        out.extend(x.as_chunks::<QK>().0.iter().map(quantize::quantize_q8_0));
    }
    fn quantize_q8_1(&self, x: &[f32], out: &mut Vec<BlockQ8_1>) {
        out.clear();
        out.extend(x.as_chunks::<QK>().0.iter().map(quantize::quantize_q8_1));
    }
}
