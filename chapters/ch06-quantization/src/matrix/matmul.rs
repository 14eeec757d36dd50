//! `out = x · Wᵀ`: the activations quantized once, then one integer dot per (token, row),
//! split between threads by tokens or by rows.

use ch04_forward::linear::linear;
use rayon::prelude::*;

use super::{ActFormat, Activations, Data, Format, QMatrix};
use crate::blocks::QK;
use crate::kernels::{Kernels, Scalar};

/// Weight rows per block of work: 64 rows of 576 Q4_1 weights are 22.5 KiB, which stay in
/// the L1/L2 cache while a band of tokens passes by.
const ROW_BLOCK: usize = 64;

impl QMatrix {
    // ANCHOR: quantize_activations
    /// Quantizes the activation rows `x` (`(seq, cols)`) to the format this matrix's dot
    /// product wants: Q8_1 for Q4_1 weights (its sums), Q8_0 for the others.
    pub fn quantize_activations(&self, k: &dyn Kernels, x: &[f32]) -> Activations {
        // every row is whole blocks, so blocks never straddle rows
        match self.format.activation() {
            Some(ActFormat::Q8_1) => {
                let mut a = Vec::with_capacity(x.len() / QK);
                k.quantize_q8_1(x, &mut a);
                Activations::Q8_1(a)
            }
            Some(ActFormat::Q8_K) => unreachable!("a QMatrix holds none of the K-quants"),
            Some(ActFormat::Q8_0) | None => {
                let mut a = Vec::with_capacity(x.len() / QK);
                k.quantize_q8_0(x, &mut a);
                Activations::Q8_0(a)
            }
        }
    }
    // ANCHOR_END: quantize_activations

    // ANCHOR: dot_row
    /// `Σ_c W[r, c] · x[t, c]`: weight row `r` against activation row `t`.
    pub fn dot_row(&self, k: &dyn Kernels, r: usize, acts: &Activations, t: usize) -> f32 {
        let nb = self.cols / QK; // blocks per row
        let w = self.row_bytes(r);
        match (self.format, &self.data, acts) {
            (Format::Int8, Data::Int8 { scales, .. }, Activations::Q8_0(a)) => {
                k.dot_int8_q8_0(w, scales[r], &a[t * nb..(t + 1) * nb])
            }
            (Format::Q8_0, Data::Blocks(_), Activations::Q8_0(a)) => {
                k.dot_q8_0_q8_0(w, &a[t * nb..(t + 1) * nb])
            }
            (Format::Q4_0, Data::Blocks(_), Activations::Q8_0(a)) => {
                k.dot_q4_0_q8_0(w, &a[t * nb..(t + 1) * nb])
            }
            (Format::Q4_1, Data::Blocks(_), Activations::Q8_1(a)) => {
                k.dot_q4_1_q8_1(w, &a[t * nb..(t + 1) * nb])
            }
            // f32 weights (chapter 4's `linear`), chapter 8's formats, and activations that
            // `quantize_activations` does not make for these weights: every triple named, so
            // that a new format, layout or kind of activations must be placed here
            (
                Format::F32
                | Format::Int8
                | Format::Q8_0
                | Format::Q4_0
                | Format::Q4_1
                | Format::Q5_0
                | Format::Q4_K
                | Format::Q6_K,
                Data::F32(_) | Data::Int8 { .. } | Data::Blocks(_),
                Activations::Q8_0(_) | Activations::Q8_1(_),
            ) => panic!(
                "{} weights cannot meet these activations",
                self.format.name()
            ),
        }
    }
    // ANCHOR_END: dot_row

    /// Four dots at once: weight row `r[i]` against activation row `t[i]`, for i in 0..4 (the
    /// same numbers as four [`QMatrix::dot_row`] calls).
    pub fn dot_rows4(
        &self,
        k: &dyn Kernels,
        r: [usize; 4],
        acts: &Activations,
        t: [usize; 4],
    ) -> [f32; 4] {
        let nb = self.cols / QK;
        match (self.format, &self.data, acts) {
            (Format::Q4_1, Data::Blocks(_), Activations::Q8_1(a)) => k.dot4_q4_1_q8_1(
                r.map(|r| self.row_bytes(r)),
                t.map(|t| &a[t * nb..(t + 1) * nb]),
            ),
            (Format::Q8_0, Data::Blocks(_), Activations::Q8_0(a)) => k.dot4_q8_0_q8_0(
                r.map(|r| self.row_bytes(r)),
                t.map(|t| &a[t * nb..(t + 1) * nb]),
            ),
            (Format::Q4_0, Data::Blocks(_), Activations::Q8_0(a)) => k.dot4_q4_0_q8_0(
                r.map(|r| self.row_bytes(r)),
                t.map(|t| &a[t * nb..(t + 1) * nb]),
            ),
            // no four-row kernel (INT8), or a pairing `dot_row` refuses: one row at a time
            (
                Format::F32
                | Format::Int8
                | Format::Q8_0
                | Format::Q4_0
                | Format::Q4_1
                | Format::Q5_0
                | Format::Q4_K
                | Format::Q6_K,
                Data::F32(_) | Data::Int8 { .. } | Data::Blocks(_),
                Activations::Q8_0(_) | Activations::Q8_1(_),
            ) => std::array::from_fn(|i| self.dot_row(k, r[i], acts, t[i])),
        }
    }

    // ANCHOR: matmul
    /// `out (seq, rows) = x (seq, cols) · Wᵀ`. f32 weights go through chapter 4's `linear`;
    /// the others quantize `x` once, then take one integer dot per (token, row). As in
    /// chapter 4, rayon splits the tokens between threads, or the rows when there are too
    /// few tokens to give each thread four; each output is one `dot_row` call whatever the split, so
    /// a token's outputs do not depend on what else is in the batch.
    pub fn matmul(&self, out: &mut [f32], x: &[f32], seq: usize) {
        self.matmul_with(&Scalar, out, x, seq);
    }

    /// [`QMatrix::matmul`] with the given kernels (chapter 7 passes SIMD ones).
    pub fn matmul_with(&self, k: &dyn Kernels, out: &mut [f32], x: &[f32], seq: usize) {
        let (rows, cols) = (self.rows, self.cols);
        assert_eq!(x.len(), seq * cols, "matmul: x is not (seq, {cols})");
        assert_eq!(out.len(), seq * rows, "matmul: out is not (seq, {rows})");
        if let Data::F32(t) = &self.data {
            return linear(out, x, t.as_slice().expect("contiguous"), seq, cols, rows);
        }
        let acts = self.quantize_activations(k, x); // once per product, shared by every row
        let threads = rayon::current_num_threads();
        if seq >= 4 * threads {
            // Split the tokens: each thread takes a band of at least four of them, and walks
            // the weights in blocks of rows that stay in cache while every token of the band
            // meets them, four tokens at a time.
            let band = seq.div_ceil(threads);
            out.par_chunks_mut(band * rows)
                .enumerate()
                .for_each(|(b, out_band)| {
                    let n = out_band.len() / rows; // tokens in this band
                    for r0 in (0..rows).step_by(ROW_BLOCK) {
                        for r in r0..(r0 + ROW_BLOCK).min(rows) {
                            let mut i = 0;
                            while i + 4 <= n {
                                let t = b * band + i;
                                let v = self.dot_rows4(k, [r; 4], &acts, [t, t + 1, t + 2, t + 3]);
                                for (j, v) in v.into_iter().enumerate() {
                                    out_band[(i + j) * rows + r] = v;
                                }
                                i += 4;
                            }
                            for i in i..n {
                                out_band[i * rows + r] = self.dot_row(k, r, &acts, b * band + i);
                            }
                        }
                    }
                });
        // ANCHOR_END: matmul
        // ANCHOR: matmul_rows
        } else {
            // Too few tokens to give every thread four (a decode step has one): split the
            // rows instead, four rows at a time.
            for (t, out_t) in out.chunks_exact_mut(rows).enumerate() {
                out_t
                    .par_chunks_mut(ROW_BLOCK)
                    .enumerate()
                    .for_each(|(c, o)| {
                        let r0 = c * ROW_BLOCK;
                        let mut quads = o.chunks_exact_mut(4);
                        for (q, o4) in (&mut quads).enumerate() {
                            let r = r0 + 4 * q;
                            o4.copy_from_slice(&self.dot_rows4(
                                k,
                                [r, r + 1, r + 2, r + 3],
                                &acts,
                                [t; 4],
                            ));
                        }
                        let done = o.len() / 4 * 4;
                        for (i, o) in o[done..].iter_mut().enumerate() {
                            *o = self.dot_row(k, r0 + done + i, &acts, t);
                        }
                    });
            }
        }
    }
    // ANCHOR_END: matmul_rows

    /// `out = x · Wᵀ` the obvious way: dequantize every row to f32 and take f32 dots with
    /// the unquantized `x`. Slower, and free of activation error; for comparison.
    pub fn matmul_dequantized(&self, out: &mut [f32], x: &[f32], seq: usize) {
        let w = self.dequantize();
        linear(out, x, &w, seq, self.cols, self.rows);
    }
}
