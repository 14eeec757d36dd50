//! A matrix of any format the engine runs ([`Matrix`]), the activations it multiplies with
//! ([`Acts`]), and what it is asked before a product: its kernels on a level, its kind of
//! activations. Which path a product takes is decided above, in `matrix.rs`.

use ch06_quantization::matrix::{ActFormat, Activations, KQuant, Packable, Q32, QBlocks};
use ch06_quantization::{Kernels, QMatrix};
use ch07_simd_parallel::kernels::ManyTokens;
use ch07_simd_parallel::layout::kquant::{self, Q8_0Wide};
use ch07_simd_parallel::layout::packed::{GroupLayout, Packed};
use rayon::prelude::*;

use super::kmatrix::{KActs, KMatrix};
use super::prefill;

/// How a matrix holds its quantized activations ([`Matrix::act_kind`]): two matrices with
/// the same kind can share one quantization of the same input.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum ActKind {
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
    /// Whether this matrix has a multi-token prefill kernel on `kk`'s level (beyond chapter
    /// 6's four-token dot): the eight-token kernels, or VNNI's interleaved four-token ones.
    pub(super) fn has_prefill_kernel(&self, kk: &dyn ManyTokens) -> bool {
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

    /// For a matrix with a prefill kernel ([`Matrix::has_prefill_kernel`]): whether its
    /// prefill cuts the tokens as [`super::policy::prefill_split`] says (at most four bands
    /// of 32 tokens or more, each band's rows shared by the other threads:
    /// [`super::prefill::prefill`], the eight-token kernels) rather than into a band a thread
    /// ([`super::bands::prefill_bands`]: VNNI's four-token kernels, where they were asked
    /// for).
    pub(super) fn prefill_is_banded(&self, kk: &dyn ManyTokens) -> bool {
        use crate::matrix::policy::use_eights;
        match self {
            // Q4_0 and Q8_0 take the eights even where the quads were asked for
            Matrix::Q(m) => m.format().qblocks() != Some(QBlocks::Q4_1) || use_eights(kk),
            Matrix::K(_) => use_eights(kk),
            Matrix::P(_) => true, // packed_prefill
        }
    }

    /// Which activations the matrix multiplies with: two matrices with the same kind can
    /// share one quantization of the same input. `None` where the products go through
    /// chapter 6's own (f32 and INT8 weights).
    pub(super) fn act_kind(&self) -> Option<ActKind> {
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

    /// The kind of activations [`Matrix::matmul`]'s prefill path takes from its caller
    /// ([`Matrix::quantize_tokens`]); `None` where that path quantizes for itself (chapter
    /// 6's product, for a QMatrix without a prefill kernel on this level).
    pub(super) fn prefill_kind(&self, kk: &dyn ManyTokens) -> Option<ActKind> {
        match self {
            Matrix::Q(_) if !self.has_prefill_kernel(kk) => None,
            Matrix::Q(_) | Matrix::K(_) | Matrix::P(_) => self.act_kind(),
        }
    }

    /// [`Matrix::quantize`] of a prefill's tokens, each token's row on the threads: the
    /// same blocks.
    pub(super) fn quantize_tokens(&self, k: &dyn Kernels, x: &[f32]) -> Acts {
        match self {
            Matrix::Q(m) => {
                let q8_1 = m.format().activation() == Some(ActFormat::Q8_1);
                let quantize = |row: &[f32]| m.quantize_activations(k, row);
                Acts::Q(prefill::quantize_tokens(x, m.cols(), q8_1, quantize))
            }
            Matrix::K(_) | Matrix::P(_) => self.quantize(k, x),
        }
    }

    pub(super) fn quantize(&self, k: &dyn Kernels, x: &[f32]) -> Acts {
        match self {
            Matrix::Q(m) => Acts::Q(m.quantize_activations(k, x)),
            Matrix::K(m) if x.len() == m.cols => Acts::K(vec![m.quantize(k, x)]),
            Matrix::K(m) => Acts::K(
                x.par_chunks_exact(m.cols)
                    .map(|t| m.quantize(k, t))
                    .collect(),
            ),
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
                        let sum = |b: &ch06_quantization::blocks::BlockQ8_0| {
                            b.qs.iter().map(|&q| i32::from(q)).sum()
                        };
                        let sums = if x.len() == m.cols {
                            a.iter().map(sum).collect() // a decode step's one token
                        } else {
                            a.par_iter().map(sum).collect() // on the threads, as the blocks were made
                        };
                        Acts::Sums(a, sums)
                    }
                    q8_1 => Acts::Q(q8_1),
                }
            }
        }
    }
}
