//! A weight matrix in any of the chapter's formats, and `out = x · Wᵀ` with it.
//!
//! [`QMatrix`] is what replaces chapter 4's `&[f32]` weights: the same `(rows, cols)`
//! matrix in `nn.Linear` layout, stored as f32, per-row INT8, or rows of llama.cpp blocks.
//! The forward pass calls [`QMatrix::matmul`] and never looks at the format.

use std::sync::Arc;

use ch01_tensors::Tensor;
use ch04_forward::linear::linear;
use rayon::prelude::*;

use crate::blocks::{BlockQ4_0, BlockQ4_1, BlockQ8_0, BlockQ8_1, QK};
use crate::kernels::{Kernels, Scalar};
use crate::quantize::*;
use crate::search::{ScaleRule, search_q4_0, search_q4_1, search_q8_0};

/// Weight rows per block of work: 64 rows of 576 Q4_1 weights are 23 KiB, which stay in
/// the L1/L2 cache while a band of tokens passes by.
const ROW_BLOCK: usize = 64;

// ANCHOR: format
/// How a weight matrix is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// 4 bytes a weight: chapters 1–5.
    F32,
    /// One i8 a weight and one f32 scale a row (per output channel, symmetric).
    Int8,
    /// Blocks of 32: f16 scale + 32 × i8 (34 bytes).
    Q8_0,
    /// Blocks of 32: f16 scale + 16 bytes of 4-bit quants (18 bytes).
    Q4_0,
    /// Blocks of 32: f16 scale + f16 minimum + 16 bytes of 4-bit quants (20 bytes).
    Q4_1,
}
// ANCHOR_END: format

impl Format {
    /// Every format, smallest last.
    pub const ALL: [Format; 5] = [
        Format::F32,
        Format::Int8,
        Format::Q8_0,
        Format::Q4_1,
        Format::Q4_0,
    ];

    /// The name used on the command line and in llama.cpp (`q4_1`, …).
    pub fn name(self) -> &'static str {
        match self {
            Format::F32 => "f32",
            Format::Int8 => "int8",
            Format::Q8_0 => "q8_0",
            Format::Q4_0 => "q4_0",
            Format::Q4_1 => "q4_1",
        }
    }

    /// The format called `name`, if there is one.
    pub fn parse(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Bytes one row of `cols` weights takes (the INT8 row's scale included).
    #[inline]
    pub fn row_bytes(self, cols: usize) -> usize {
        match self {
            Format::F32 => 4 * cols,
            Format::Int8 => cols + 4,
            Format::Q8_0 => cols / QK * BlockQ8_0::BYTES,
            Format::Q4_0 => cols / QK * BlockQ4_0::BYTES,
            Format::Q4_1 => cols / QK * BlockQ4_1::BYTES,
        }
    }

    /// Storage per weight, in bits (for a row long enough that INT8's scale vanishes).
    pub fn bits_per_weight(self) -> f64 {
        match self {
            Format::F32 => 32.0,
            Format::Int8 => 8.0,
            Format::Q8_0 => 8.5,
            Format::Q4_0 => 4.5,
            Format::Q4_1 => 5.0,
        }
    }

    /// The format the activations are quantized to before meeting these weights.
    pub fn activation(self) -> Option<&'static str> {
        match self {
            Format::F32 => None,
            Format::Int8 | Format::Q8_0 | Format::Q4_0 => Some("q8_0"),
            Format::Q4_1 => Some("q8_1"),
        }
    }
}

/// Bytes that may belong to something else: a `Vec` this program filled, or (chapter 8) a
/// memory-mapped file. Cloning shares them.
#[derive(Clone)]
pub struct Bytes {
    owner: Arc<dyn AsRef<[u8]> + Send + Sync>,
    start: usize,
    len: usize,
}

impl Bytes {
    /// Bytes this program owns.
    pub fn from_vec(v: Vec<u8>) -> Bytes {
        let len = v.len();
        Bytes {
            owner: Arc::new(v),
            start: 0,
            len,
        }
    }

    /// `len` bytes from `start` of `owner`, or `None` if that is past its end.
    pub fn slice_of(
        owner: Arc<dyn AsRef<[u8]> + Send + Sync>,
        start: usize,
        len: usize,
    ) -> Option<Bytes> {
        let end = start.checked_add(len)?;
        ((*owner).as_ref().len() >= end).then_some(Bytes { owner, start, len })
    }

    /// The bytes.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        &(*self.owner).as_ref()[self.start..self.start + self.len]
    }
}

impl std::fmt::Debug for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Bytes({} bytes)", self.len)
    }
}

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

    // ANCHOR: quantize_matrix
    /// Quantizes the f32 matrix `w` (`(rows, cols)`) to `format`, rows in parallel.
    pub fn quantize(
        w: &[f32],
        rows: usize,
        cols: usize,
        format: Format,
        rule: ScaleRule,
    ) -> Result<QMatrix, String> {
        if w.len() != rows * cols {
            return Err(format!(
                "{} weights are not a ({rows}, {cols}) matrix",
                w.len()
            ));
        }
        if format != Format::F32 && !cols.is_multiple_of(QK) {
            return Err(format!(
                "{} needs rows of whole blocks of {QK}; these have {cols}",
                format.name()
            ));
        }
        let data = match format {
            Format::F32 => {
                Data::F32(Tensor::from_vec(w.to_vec(), &[rows, cols]).map_err(|e| e.to_string())?)
            }
            Format::Int8 => {
                let mut q = vec![0u8; rows * cols];
                let mut scales = vec![0.0f32; rows];
                q.par_chunks_mut(cols)
                    .zip(scales.par_iter_mut())
                    .zip(w.par_chunks(cols))
                    .for_each(|((q_row, scale), w_row)| {
                        *scale = crate::int8::quantize_row(w_row, q_row)
                    });
                Data::Int8 {
                    q: Bytes::from_vec(q),
                    scales,
                }
            }
            _ => {
                let row_bytes = format.row_bytes(cols);
                let mut bytes = vec![0u8; rows * row_bytes];
                bytes
                    .par_chunks_mut(row_bytes)
                    .zip(w.par_chunks(cols))
                    .for_each(|(out, w_row)| {
                        quantize_row(format, rule, w_row, out);
                    });
                Data::Blocks(Bytes::from_vec(bytes))
            }
        };
        Ok(QMatrix {
            format,
            rows,
            cols,
            data,
        })
    }
    // ANCHOR_END: quantize_matrix

    /// A matrix of llama.cpp blocks that are already in memory (chapter 8: in the mapped
    /// file). `bytes` must hold exactly `rows` rows of `cols` weights.
    pub fn from_blocks(
        format: Format,
        rows: usize,
        cols: usize,
        bytes: Bytes,
    ) -> Result<QMatrix, String> {
        if matches!(format, Format::F32 | Format::Int8) {
            return Err(format!("{} is not a block format", format.name()));
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
                match self.format {
                    Format::Q8_0 => {
                        for (o, b) in out
                            .iter_mut()
                            .zip(bytes.as_chunks::<{ BlockQ8_0::BYTES }>().0)
                        {
                            dequantize_q8_0(&BlockQ8_0::from_bytes(b), o);
                        }
                    }
                    Format::Q4_0 => {
                        for (o, b) in out
                            .iter_mut()
                            .zip(bytes.as_chunks::<{ BlockQ4_0::BYTES }>().0)
                        {
                            dequantize_q4_0(BlockQ4_0(b), o);
                        }
                    }
                    Format::Q4_1 => {
                        for (o, b) in out
                            .iter_mut()
                            .zip(bytes.as_chunks::<{ BlockQ4_1::BYTES }>().0)
                        {
                            dequantize_q4_1(BlockQ4_1(b), o);
                        }
                    }
                    Format::F32 | Format::Int8 => unreachable!("not block formats"),
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

    // ANCHOR: quantize_activations
    /// Quantizes the activation rows `x` (`(seq, cols)`) to the format this matrix's dot
    /// product wants: Q8_1 for Q4_1 weights (its sums), Q8_0 for the others.
    pub fn quantize_activations(&self, k: &dyn Kernels, x: &[f32]) -> Activations {
        // every row is whole blocks, so blocks never straddle rows
        match self.format {
            Format::Q4_1 => {
                let mut a = Vec::with_capacity(x.len() / QK);
                k.quantize_q8_1(x, &mut a);
                Activations::Q8_1(a)
            }
            _ => {
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
        match (&self.data, acts) {
            (Data::Int8 { scales, .. }, Activations::Q8_0(a)) => {
                k.dot_int8_q8_0(w, scales[r], &a[t * nb..(t + 1) * nb])
            }
            (Data::Blocks(_), Activations::Q8_0(a)) if self.format == Format::Q8_0 => {
                k.dot_q8_0_q8_0(w, &a[t * nb..(t + 1) * nb])
            }
            (Data::Blocks(_), Activations::Q8_0(a)) if self.format == Format::Q4_0 => {
                k.dot_q4_0_q8_0(w, &a[t * nb..(t + 1) * nb])
            }
            (Data::Blocks(_), Activations::Q8_1(a)) if self.format == Format::Q4_1 => {
                k.dot_q4_1_q8_1(w, &a[t * nb..(t + 1) * nb])
            }
            _ => panic!(
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
        match (&self.data, acts, self.format) {
            (Data::Blocks(_), Activations::Q8_1(a), Format::Q4_1) => k.dot4_q4_1_q8_1(
                r.map(|r| self.row_bytes(r)),
                t.map(|t| &a[t * nb..(t + 1) * nb]),
            ),
            (Data::Blocks(_), Activations::Q8_0(a), Format::Q8_0) => k.dot4_q8_0_q8_0(
                r.map(|r| self.row_bytes(r)),
                t.map(|t| &a[t * nb..(t + 1) * nb]),
            ),
            (Data::Blocks(_), Activations::Q8_0(a), Format::Q4_0) => k.dot4_q4_0_q8_0(
                r.map(|r| self.row_bytes(r)),
                t.map(|t| &a[t * nb..(t + 1) * nb]),
            ),
            _ => std::array::from_fn(|i| self.dot_row(k, r[i], acts, t[i])),
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

/// Quantizes one row of `w` into `out` (that row's blocks) with the given scale rule.
fn quantize_row(format: Format, rule: ScaleRule, w: &[f32], out: &mut [u8]) {
    let blocks = w.as_chunks::<QK>().0;
    match format {
        Format::Q8_0 => {
            for (x, o) in blocks
                .iter()
                .zip(out.as_chunks_mut::<{ BlockQ8_0::BYTES }>().0)
            {
                let b = match rule {
                    ScaleRule::Absmax => quantize_q8_0(x),
                    ScaleRule::Search => search_q8_0(x),
                };
                b.write(o);
            }
        }
        Format::Q4_0 => {
            for (x, o) in blocks
                .iter()
                .zip(out.as_chunks_mut::<{ BlockQ4_0::BYTES }>().0)
            {
                match rule {
                    ScaleRule::Absmax => quantize_q4_0(x, o),
                    ScaleRule::Search => search_q4_0(x, o),
                }
            }
        }
        Format::Q4_1 => {
            for (x, o) in blocks
                .iter()
                .zip(out.as_chunks_mut::<{ BlockQ4_1::BYTES }>().0)
            {
                match rule {
                    ScaleRule::Absmax => quantize_q4_1(x, o),
                    ScaleRule::Search => search_q4_1(x, o),
                }
            }
        }
        Format::F32 | Format::Int8 => unreachable!("not block formats"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
