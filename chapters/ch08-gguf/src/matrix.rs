//! A weight matrix in whatever format the file holds it: chapter 6's [`QMatrix`] for F32,
//! Q8_0, Q4_0 and Q4_1, a [`KMatrix`] for Q5_0, Q4_K and Q6_K, or, on CPUs with AVX2 and no
//! AVX-512, a [`Packed`] matrix of any of those five formats but F32 and Q8_0: its rows
//! interleaved eight at a time at load.

//!
//! The top level of the kernel layer: the drivers that tile a product over rows, tokens and
//! threads, calling chapter 7's kernels (which call nothing above them).
//!
//! ```text
//! matrix.rs          Matrix: the one place that picks a product's path
//! matrix/few.rs      a few tokens: split by rows, every token per block of rows; packed groups
//! matrix/group.rs    several products of one input in one parallel pass
//! matrix/prefill.rs  a prefill: bands of tokens, tiles of rows, eight tokens a register
//! matrix/kmatrix.rs  KMatrix: Q5_0, Q4_K and Q6_K rows in place, and their prefill
//! matrix/policy.rs   which layouts a machine takes (packing, the prefill layout)
//! ```

// A match over a format names every format, so that adding one makes the compiler list
// every place that must handle it (no `_ =>` that quietly sends it down another's path).
// The crate's other enums (GGUF values, architectures) are not formats: the rule is here.
#![deny(clippy::wildcard_enum_match_arm)]

mod few;
mod group;
mod kmatrix;
pub mod policy;
pub mod prefill;

pub use ch07_simd_parallel::layout::packed::{self, GroupLayout, Packed};
pub use ch07_simd_parallel::layout::packed_dot::PackedToken;
pub use few::FEW;
pub use group::{matmul_group, matmul_pair_then};
pub use kmatrix::{KActs, KMatrix};

use ch06_quantization::matrix::{ActFormat, Activations, KQuant, Packable, Q32, QBlocks};
use ch06_quantization::{Kernels, QMatrix};
use ch07_simd_parallel::layout::kquant::{self, Q8_0Wide};
use ch07_simd_parallel::layout::quads::{ActQuads, KQuads};
use rayon::prelude::*;

use ch07_simd_parallel::kernels::ManyTokens;

/// `out[i]` = row `r0 + i`'s output: four rows at a time (`four(r)` gives rows `r..r + 4`),
/// the last one to three alone (`one(r)`).
fn rows_in_fours(
    out: &mut [f32],
    r0: usize,
    four: impl Fn(usize) -> [f32; 4],
    one: impl Fn(usize) -> f32,
) {
    let mut quads = out.chunks_exact_mut(4);
    for (q, o4) in (&mut quads).enumerate() {
        o4.copy_from_slice(&four(r0 + 4 * q));
    }
    let done = out.len() / 4 * 4;
    for (i, o) in out[done..].iter_mut().enumerate() {
        *o = one(r0 + done + i);
    }
}

// ANCHOR: prefill_bands
/// The prefill split of chapter 6, for every matrix kind here: each thread takes a band of
/// at least four tokens and walks the weights in blocks of 64 rows that stay in cache while
/// the band's tokens meet them, four tokens at a time (`dot4(row, first token, prepared)`,
/// where `prepare(first token)` is made once per four tokens of the band), the band's last
/// one to three tokens one at a time (`dot(row, token)`).
pub(super) fn prefill_bands<P: Send>(
    out: &mut [f32],
    rows: usize,
    seq: usize,
    prepare: impl Fn(usize) -> Option<P> + Sync,
    dot4: impl Fn(usize, usize, Option<&P>) -> [f32; 4] + Sync,
    dot: impl Fn(usize, usize) -> f32 + Sync,
) {
    let band = seq.div_ceil(rayon::current_num_threads());
    out.par_chunks_mut(band * rows)
        .enumerate()
        .for_each(|(b, out_band)| {
            let (t0, n) = (b * band, out_band.len() / rows);
            let prepared: Vec<Option<P>> = (0..n / 4).map(|g| prepare(t0 + 4 * g)).collect();
            for r0 in (0..rows).step_by(64) {
                for r in r0..(r0 + 64).min(rows) {
                    for (g, p) in prepared.iter().enumerate() {
                        for (j, v) in dot4(r, t0 + 4 * g, p.as_ref()).into_iter().enumerate() {
                            out_band[(4 * g + j) * rows + r] = v;
                        }
                    }
                    for i in n / 4 * 4..n {
                        out_band[i * rows + r] = dot(r, t0 + i);
                    }
                }
            }
        });
}
// ANCHOR_END: prefill_bands

/// Four tokens' activations interleaved for a prefill kernel.
enum Interleaved {
    Q8_0(ActQuads),
    Q8K(KQuads),
}

/// How a matrix holds its quantized activations ([`Matrix::act_kind`]): two matrices with
/// the same kind can share one quantization of the same input.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum ActKind {
    /// Chapter 6's blocks, [`Acts::Q`] (a [`QMatrix`]'s, and a packed Q4_1 matrix's).
    Q(ActFormat),
    /// One [`KActs`] a token, [`Acts::K`] (a [`KMatrix`]'s, and a packed Q5_0 or K-quant
    /// matrix's).
    K(ActFormat),
    /// Q8_0 blocks and each block's `Σ a` beside them (a packed Q4_0 matrix, [`Acts::Sums`]).
    Q8_0Sums,
}

/// Activations quantized for a [`Matrix`]: chapter 6's kinds or this chapter's, one
/// token's worth per entry of `K`.
pub enum Acts {
    Q(Activations),
    K(Vec<KActs>),
    /// A packed Q4_0 matrix's: Q8_0 blocks, and each block's `Σ a`.
    Sums(Vec<ch06_quantization::blocks::BlockQ8_0>, Vec<i32>),
}

/// A matrix of any format the engine runs.
pub enum Matrix {
    Q(QMatrix),
    K(KMatrix),
    P(Packed),
}

impl Matrix {
    pub fn rows(&self) -> usize {
        match self {
            Matrix::Q(m) => m.rows(),
            Matrix::K(m) => m.rows,
            Matrix::P(m) => m.rows,
        }
    }
    pub fn cols(&self) -> usize {
        match self {
            Matrix::Q(m) => m.cols(),
            Matrix::K(m) => m.cols,
            Matrix::P(m) => m.cols,
        }
    }
    pub fn format_name(&self) -> &'static str {
        match self {
            Matrix::Q(m) => m.format().name(),
            Matrix::K(m) => m.format.name(),
            Matrix::P(m) => m.format.name(),
        }
    }
    /// Bytes of weights.
    pub fn bytes(&self) -> usize {
        match self {
            Matrix::Q(m) => m.bytes(),
            Matrix::K(m) => m.rows * m.row_len(),
            Matrix::P(m) => m.bytes(),
        }
    }
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        match self {
            Matrix::Q(m) => m.dequantize_row(r, out),
            Matrix::K(m) => m.dequantize_row(r, out),
            Matrix::P(m) => m.dequantize_row(r, out),
        }
    }
    // ANCHOR: choose
    /// `out (seq, rows) = x (seq, cols) · Wᵀ`, the one place that picks how: with few tokens
    /// a thread ([`FEW`]), split by rows ([`matmul_group`]); else, in a prefill, split by tokens,
    /// Q4_0, Q4_1 and Q8_0 through [`q4_prefill`]'s multi-token kernels, the K-quants through
    /// [`KMatrix::matmul`]'s, a [`Packed`] matrix through [`packed_prefill`], and the rest
    /// through chapter 6's product. Every path gives every output the scalar kernel's bits.
    pub fn matmul(
        &self,
        k: &dyn Kernels,
        kk: &dyn ManyTokens,
        out: &mut [f32],
        x: &[f32],
        seq: usize,
    ) {
        match self {
            _ if self.by_rows(kk, seq) => matmul_group(k, kk, &[self], &mut [out], x, seq),
            Matrix::Q(m) if self.has_prefill_kernel(kk) => {
                prefill::q4_prefill(m, k, kk, out, x, seq)
            }
            Matrix::Q(m) => m.matmul_with(k, out, x, seq),
            Matrix::K(m) => m.matmul(k, kk, out, x, seq),
            Matrix::P(p) => prefill::packed_prefill(self, p, k, kk, out, x, seq),
        }
    }
    // ANCHOR_END: choose

    /// Whether this matrix has a multi-token prefill kernel on `kk`'s level (beyond chapter
    /// 6's four-token dot): the eight-token kernels, or VNNI's interleaved four-token ones.
    fn has_prefill_kernel(&self, kk: &dyn ManyTokens) -> bool {
        use crate::matrix::policy::{use_eights, use_quads};
        match self {
            Matrix::Q(m) => match m.format().qblocks() {
                Some(QBlocks::Q4_0 | QBlocks::Q8_0) => kk.has_eights(),
                Some(QBlocks::Q4_1) => use_eights(kk) || use_quads(kk),
                None => false, // F32 and INT8
            },
            Matrix::K(m) => match m.format.packable() {
                Some(Packable::K(KQuant::Q6_K)) => use_eights(kk),
                Some(Packable::Q32(Q32::Q5_0) | Packable::K(KQuant::Q4_K)) => {
                    use_eights(kk) || use_quads(kk)
                }
                // chapter 6's (never a KMatrix's), and the formats without shared kernels
                Some(Packable::Q32(Q32::Q4_0 | Q32::Q4_1)) | None => false,
            },
            // chapter 8's eight-token kernels, on the rows taken out of the groups
            Matrix::P(p) => match p.layout {
                Packable::Q32(Q32::Q4_0) => kk.has_eights(),
                Packable::Q32(Q32::Q4_1 | Q32::Q5_0) | Packable::K(KQuant::Q4_K | KQuant::Q6_K) => {
                    use_eights(kk)
                }
            },
        }
    }

    /// Which activations the matrix multiplies with: two matrices with the same kind can
    /// share one quantization of the same input. `None` where the products go through
    /// chapter 6's own (f32 and INT8 weights).
    fn act_kind(&self) -> Option<ActKind> {
        Some(match self {
            Matrix::Q(m) => ActKind::Q(m.format().qblocks()?.format().activation()?),
            Matrix::K(m) => ActKind::K(m.format.activation()?),
            // as the same rows unpacked would take them, but for Q4_0's sums
            Matrix::P(p) => match p.layout {
                Packable::Q32(Q32::Q4_0) => ActKind::Q8_0Sums,
                Packable::Q32(Q32::Q4_1) => ActKind::Q(p.format.activation()?),
                Packable::Q32(Q32::Q5_0) | Packable::K(KQuant::Q4_K | KQuant::Q6_K) => {
                    ActKind::K(p.format.activation()?)
                }
            },
        })
    }

    fn quantize(&self, k: &dyn Kernels, x: &[f32]) -> Acts {
        match self {
            Matrix::Q(m) => Acts::Q(m.quantize_activations(k, x)),
            Matrix::K(m) => Acts::K(x.chunks_exact(m.cols).map(|t| m.quantize(k, t)).collect()),
            Matrix::P(m) if m.layout.is_k() => Acts::K(
                x.par_chunks_exact(m.cols)
                    .map(|t| KActs::Q8K(kquant::quantize_q8_k_row(t)))
                    .collect(),
            ),
            Matrix::P(m) => {
                let q8_1 = m.format.activation() == Some(ActFormat::Q8_1);
                match prefill::quantize_tokens(x, m.cols, q8_1, |t| m.quantize(k, t)) {
                    // chapter 8's wide blocks, one token's an entry, as a KMatrix's
                    Activations::Q8_0(a) if m.layout == Packable::Q32(Q32::Q5_0) => Acts::K(
                        a.chunks_exact(m.cols / 32)
                            .map(|t| KActs::Q8_0(t.iter().map(Q8_0Wide::from).collect()))
                            .collect(),
                    ),
                    Activations::Q8_0(a) => {
                        let sums = a.iter().map(|b| b.qs.iter().map(|&q| i32::from(q)).sum());
                        let sums = sums.collect();
                        Acts::Sums(a, sums)
                    }
                    q8_1 => Acts::Q(q8_1),
                }
            }
        }
    }
}
