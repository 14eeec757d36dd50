//! A weight matrix in any of the chapter's formats, and `out = x · Wᵀ` with it.
//!
//! [`QMatrix`] is what replaces chapter 4's `&[f32]` weights: the same `(rows, cols)`
//! matrix in `nn.Linear` layout, stored as f32, per-row INT8, or rows of llama.cpp blocks.
//! The forward pass calls [`QMatrix::matmul`] and never looks at the format.
//!
//! This file holds the matrix and its rows; `matrix/format.rs` the formats and their sizes,
//! `matrix/bytes.rs` the bytes behind a matrix, `matrix/quantize.rs` building one from f32
//! weights, and `matrix/matmul.rs` the product.

mod bytes;
mod format;
mod matmul;
mod quantize;

use ch01_tensors::Tensor;
use rayon::prelude::*;

use crate::blocks::{BlockQ4_0, BlockQ4_1, BlockQ8_0, BlockQ8_1, QK};
use crate::quantize::{dequantize_q4_0, dequantize_q4_1, dequantize_q8_0};
pub use bytes::Bytes;
pub use format::{ActFormat, Format, KQuant, Packable, Q32, QBlocks, Spec};

#[derive(Clone, Debug)]
enum Data {
    /// f32, row-major: chapter 4's tensor (a view of the mapped file when it can be).
    F32(Tensor),
    /// INT8: `rows × cols` i8, and each row's scale.
    Int8 { q: Bytes, scales: Vec<f32> },
    /// Rows of blocks, each row `Format::row_bytes(cols)` bytes, as llama.cpp stores them.
    Blocks(Bytes),
}

// ANCHOR: qmatrix
/// A `(rows, cols)` weight matrix in `nn.Linear` layout: row `r` holds the weights of
/// output `r`.
#[derive(Clone, Debug)]
pub struct QMatrix {
    format: Format,
    rows: usize,
    cols: usize,
    data: Data,
}
// ANCHOR_END: qmatrix

/// Activations quantized once per matrix product: one row of blocks per token.
pub enum Activations {
    Q8_0(Vec<BlockQ8_0>), // (seq, cols / 32)
    Q8_1(Vec<BlockQ8_1>), // (seq, cols / 32)
}

impl QMatrix {
    /// An f32 matrix, kept as it is (no copy of a mapped tensor).
    pub fn from_f32(t: Tensor) -> Result<QMatrix, String> {
        let (rows, cols) = match t.shape() {
            &[r, c] => (r, c),
            s => return Err(format!("a weight matrix has two dimensions, not {s:?}")),
        };
        let t = t.contiguous();
        Ok(QMatrix {
            format: Format::F32,
            rows,
            cols,
            data: Data::F32(t),
        })
    }

    /// A matrix of llama.cpp blocks that are already in memory (chapter 8: in the mapped
    /// file). `bytes` must hold exactly `rows` rows of `cols` weights.
    pub fn from_blocks(
        format: Format,
        rows: usize,
        cols: usize,
        bytes: Bytes,
    ) -> Result<QMatrix, String> {
        if format.qblocks().is_none() {
            return Err(format!(
                "{} is not one of this chapter's block formats",
                format.name()
            ));
        }
        if !cols.is_multiple_of(QK) {
            return Err(format!(
                "{} rows must be whole blocks of {QK}, not {cols} values",
                format.name()
            ));
        }
        let need = rows.checked_mul(format.row_bytes(cols));
        if need != Some(bytes.len) {
            return Err(format!(
                "a ({rows}, {cols}) {} matrix takes {need:?} bytes, not {}",
                format.name(),
                bytes.len
            ));
        }
        Ok(QMatrix {
            format,
            rows,
            cols,
            data: Data::Blocks(bytes),
        })
    }

    pub fn format(&self) -> Format {
        self.format
    }
    pub fn rows(&self) -> usize {
        self.rows
    }
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Bytes the weights take in memory (scales included): what a matrix-vector product reads.
    pub fn bytes(&self) -> usize {
        self.rows * self.format.row_bytes(self.cols)
    }

    /// The stored bytes of row `r` (a block format's blocks, or INT8's quants; for f32 the
    /// floats' bytes).
    #[inline]
    pub fn row_bytes(&self, r: usize) -> &[u8] {
        match &self.data {
            Data::F32(t) => {
                let row = &t.as_slice().expect("contiguous")[r * self.cols..(r + 1) * self.cols];
                // SAFETY: any initialised f32 can be read as its 4 bytes; the slice stays
                // borrowed from `t` for the returned lifetime.
                unsafe { std::slice::from_raw_parts(row.as_ptr().cast::<u8>(), row.len() * 4) }
            }
            Data::Int8 { q, .. } => &q.as_slice()[r * self.cols..(r + 1) * self.cols],
            Data::Blocks(b) => {
                let n = self.format.row_bytes(self.cols);
                &b.as_slice()[r * n..(r + 1) * n]
            }
        }
    }

    /// The stored bytes of rows `r..r + n`, back to back, as [`QMatrix::row_bytes`] gives
    /// each one.
    pub fn rows_bytes(&self, r: usize, n: usize) -> &[u8] {
        match &self.data {
            Data::F32(t) => {
                let rows = &t.as_slice().expect("contiguous")[r * self.cols..(r + n) * self.cols];
                // SAFETY: as in `row_bytes`.
                unsafe { std::slice::from_raw_parts(rows.as_ptr().cast::<u8>(), rows.len() * 4) }
            }
            Data::Int8 { q, .. } => &q.as_slice()[r * self.cols..(r + n) * self.cols],
            Data::Blocks(b) => {
                let len = self.format.row_bytes(self.cols);
                &b.as_slice()[r * len..(r + n) * len]
            }
        }
    }

    // ANCHOR: dequantize_row
    /// Row `r` as f32: `(cols)` values written to `out`.
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        assert_eq!(out.len(), self.cols, "dequantize_row: out is not (cols)");
        let bytes = self.row_bytes(r);
        match &self.data {
            Data::F32(t) => out.copy_from_slice(
                &t.as_slice().expect("contiguous")[r * self.cols..(r + 1) * self.cols],
            ),
            Data::Int8 { scales, .. } => crate::int8::dequantize_row(bytes, scales[r], out),
            Data::Blocks(_) => {
                let out = out.as_chunks_mut::<QK>().0;
                let blocks = self.format.qblocks();
                match blocks.expect("from_blocks takes this chapter's block formats only") {
                    QBlocks::Q8_0 => {
                        for (o, b) in out
                            .iter_mut()
                            .zip(bytes.as_chunks::<{ BlockQ8_0::BYTES }>().0)
                        {
                            dequantize_q8_0(&BlockQ8_0::from_bytes(b), o);
                        }
                    }
                    QBlocks::Q4_0 => {
                        for (o, b) in out
                            .iter_mut()
                            .zip(bytes.as_chunks::<{ BlockQ4_0::BYTES }>().0)
                        {
                            dequantize_q4_0(BlockQ4_0(b), o);
                        }
                    }
                    QBlocks::Q4_1 => {
                        for (o, b) in out
                            .iter_mut()
                            .zip(bytes.as_chunks::<{ BlockQ4_1::BYTES }>().0)
                        {
                            dequantize_q4_1(BlockQ4_1(b), o);
                        }
                    }
                }
            }
        }
    }
    // ANCHOR_END: dequantize_row

    /// The whole matrix as f32, `(rows, cols)`.
    pub fn dequantize(&self) -> Vec<f32> {
        let mut out = vec![0.0f32; self.rows * self.cols];
        out.par_chunks_mut(self.cols)
            .enumerate()
            .for_each(|(r, o)| self.dequantize_row(r, o));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::ScaleRule;

    fn values(n: usize, seed: u64) -> Vec<f32> {
        ch01_tensors::random::uniform(n, seed)
    }

    /// Every format's matmul against the f32 product of its own dequantized weights with the
    /// unquantized activations: what is left is the activation rounding only.
    #[test]
    fn matmul_is_close_to_the_dequantized_product() {
        let (seq, rows, cols) = (3, 70, 96);
        let (w, x) = (values(rows * cols, 1), values(seq * cols, 2));
        for format in Format::ALL {
            let m = QMatrix::quantize(&w, rows, cols, format, ScaleRule::Absmax).unwrap();
            let (mut fast, mut slow) = (vec![0.0; seq * rows], vec![0.0; seq * rows]);
            m.matmul(&mut fast, &x, seq);
            m.matmul_dequantized(&mut slow, &x, seq);
            for (a, b) in fast.iter().zip(&slow) {
                // |x| ≤ 1 rounded to 8 bits: each product is off by at most |w|·max|x|/254.
                assert!(
                    (a - b).abs() < cols as f32 / 254.0 * 0.5,
                    "{}: {a} vs {b}",
                    format.name()
                );
            }
            // a token's outputs do not depend on the batch: row 1 alone equals row 1 of 3
            let mut one = vec![0.0; rows];
            m.matmul(&mut one, &x[cols..2 * cols], 1);
            assert_eq!(
                one,
                fast[rows..2 * rows],
                "{}: batch changed a row",
                format.name()
            );
        }
    }

    #[test]
    fn bytes_are_what_the_formats_promise() {
        let w = values(4 * 64, 3);
        let sizes: Vec<usize> = Format::ALL
            .iter()
            .map(|&f| {
                QMatrix::quantize(&w, 4, 64, f, ScaleRule::Absmax)
                    .unwrap()
                    .bytes()
            })
            .collect();
        assert_eq!(
            sizes,
            vec![4 * 64 * 4, 4 * (64 + 4), 4 * 2 * 34, 4 * 2 * 20, 4 * 2 * 18]
        );
    }

    #[test]
    fn rows_that_are_not_whole_blocks_are_refused() {
        let err =
            QMatrix::quantize(&[0.0; 40], 1, 40, Format::Q4_0, ScaleRule::Absmax).unwrap_err();
        assert!(err.contains("whole blocks"), "{err}");
        let short = Bytes::from_vec(vec![0; 10]);
        assert!(QMatrix::from_blocks(Format::Q4_1, 1, 32, short).is_err());
    }
}
