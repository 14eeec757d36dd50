//! A matrix of Q5_0, Q4_K or Q6_K rows, used in place in the file, and its product: chapter
//! 6's split by tokens in a prefill, with this chapter's multi-token kernels.

use ch06_quantization::matrix::{Packable, Q32};
use ch06_quantization::{Bytes, Format, Kernels};

use super::bands::{prefill_bands, rows_in_fours};
use super::prefill;
use ch07_simd_parallel::kernels::ManyTokens;
use ch07_simd_parallel::layout::eights::Eights;
use ch07_simd_parallel::layout::eights_k::{EightsK, RowsK};
use ch07_simd_parallel::layout::kquant::{self, BlockQ8K, Q8_0Wide};
use ch07_simd_parallel::layout::packed_dot::PackedToken;
use ch07_simd_parallel::layout::quads::{ActQuads, KQuads};

/// Four tokens' activations interleaved for a prefill kernel.
enum Interleaved {
    Q8_0(ActQuads),
    Q8K(KQuads),
}

/// The formats a [`KMatrix`] holds: chapter 8's, which chapter 6 does not. Its products are
/// chosen by this, so a match names these three and no others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(non_camel_case_types)] // llama.cpp's names
pub enum KFormat {
    Q5_0,
    Q4_K,
    Q6_K,
}

impl KFormat {
    const ALL: [KFormat; 3] = [KFormat::Q5_0, KFormat::Q4_K, KFormat::Q6_K];

    /// Its [`Format`].
    pub fn format(self) -> Format {
        match self {
            KFormat::Q5_0 => Format::Q5_0,
            KFormat::Q4_K => Format::Q4_K,
            KFormat::Q6_K => Format::Q6_K,
        }
    }

    /// The `KFormat` that `format` is, if a [`KMatrix`] holds it.
    pub fn of(format: Format) -> Option<KFormat> {
        KFormat::ALL.into_iter().find(|k| k.format() == format)
    }
}

/// A matrix of Q5_0, Q4_K or Q6_K rows, in place in the file.
pub struct KMatrix {
    pub format: Format,
    /// The same format, as the type its products are chosen by.
    kind: KFormat,
    pub rows: usize,
    pub cols: usize,
    data: Bytes,
}

/// One token's activations, quantized for a format.
pub enum KActs {
    Q8_0(Vec<Q8_0Wide>),
    Q8K(Vec<BlockQ8K>),
}

impl KActs {
    /// These activations as a packed matrix of `layout` takes them (a Q5_0 or K-quant
    /// matrix's: packed Q4_0 and Q4_1 matrices take chapter 6's kinds).
    pub fn packed(&self, layout: Packable) -> PackedToken<'_> {
        match layout {
            Packable::Q32(Q32::Q5_0) => PackedToken::Q5_0(self.q8_0()),
            Packable::K(kquant) => PackedToken::K(self.q8_k(), kquant),
            Packable::Q32(Q32::Q4_0 | Q32::Q4_1) => {
                unreachable!("packed Q4_0 and Q4_1 matrices take chapter 6's activations")
            }
        }
    }
    /// The wide Q8_0 blocks of a Q5_0 matrix's activations.
    pub fn q8_0(&self) -> &[Q8_0Wide] {
        match self {
            KActs::Q8_0(a) => a,
            KActs::Q8K(_) => unreachable!("Q5_0 takes Q8_0 activations"),
        }
    }
    /// The Q8_K blocks of a K-quant matrix's activations.
    pub fn q8_k(&self) -> &[BlockQ8K] {
        match self {
            KActs::Q8K(a) => a,
            KActs::Q8_0(_) => unreachable!("the K-quants take Q8_K activations"),
        }
    }
}

impl KMatrix {
    /// Every row's bytes, back to back, as the file stores them.
    pub fn bytes_all(&self) -> &[u8] {
        self.data.as_slice()
    }
    /// `bytes` must hold exactly `rows` rows of `cols` values.
    pub fn new(format: Format, rows: usize, cols: usize, data: Bytes) -> Result<KMatrix, String> {
        let Some(kind) = KFormat::of(format) else {
            return Err(format!(
                "a KMatrix holds Q5_0, Q4_K or Q6_K, not {}",
                format.name()
            ));
        };
        let (bv, bb) = (format.block_values(), format.block_bytes());
        if !cols.is_multiple_of(bv) {
            return Err(format!(
                "{} rows must be whole blocks of {bv}, not {cols}",
                format.name()
            ));
        }
        let need = rows.checked_mul(cols / bv * bb);
        if need != Some(data.as_slice().len()) {
            return Err(format!(
                "a ({rows}, {cols}) {} matrix takes {need:?} bytes, not {}",
                format.name(),
                data.as_slice().len()
            ));
        }
        Ok(KMatrix {
            format,
            kind,
            rows,
            cols,
            data,
        })
    }

    #[inline]
    pub fn row_len(&self) -> usize {
        let (bv, bb) = (self.format.block_values(), self.format.block_bytes());
        self.cols / bv * bb
    }

    #[inline]
    pub fn row_bytes(&self, r: usize) -> &[u8] {
        let n = self.row_len();
        &self.data.as_slice()[r * n..(r + 1) * n]
    }

    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let w = self.row_bytes(r);
        let (bv, bb) = (self.format.block_values(), self.format.block_bytes());
        for (b, o) in w.chunks_exact(bb).zip(out.chunks_exact_mut(bv)) {
            match self.kind {
                KFormat::Q5_0 => kquant::dequantize_q5_0(b, o.try_into().expect("32")),
                KFormat::Q4_K => kquant::dequantize_q4_k(b, o.try_into().expect("256")),
                KFormat::Q6_K => kquant::dequantize_q6_k(b, o.try_into().expect("256")),
            }
        }
    }

    /// One token's activations (`cols` values) in the format this matrix multiplies with.
    pub fn quantize(&self, k: &dyn Kernels, x: &[f32]) -> KActs {
        match self.kind {
            KFormat::Q5_0 => {
                let mut out = Vec::new();
                k.quantize_q8_0(x, &mut out);
                KActs::Q8_0(out.iter().map(Q8_0Wide::from).collect())
            }
            KFormat::Q4_K | KFormat::Q6_K => KActs::Q8K(kquant::quantize_q8_k_row(x)),
        }
    }

    /// Row `r` against one token's activations. The product is chosen by the matrix's
    /// format; the activations only hand over their blocks (and say so if they are another
    /// kind: [`KMatrix::quantize`] made them for this format).
    pub fn dot(&self, kk: &dyn ManyTokens, r: usize, a: &KActs) -> f32 {
        let w = self.row_bytes(r);
        match self.kind {
            KFormat::Q5_0 => kk.dot_q5_0(w, a.q8_0()),
            KFormat::Q4_K => kk.dot_q4_k(w, a.q8_k()),
            KFormat::Q6_K => kk.dot_q6_k(w, a.q8_k()),
        }
    }

    /// Row `r` against four tokens' activations: four `dot`s, bit for bit, with each weight
    /// block unpacked once.
    pub fn dot4(&self, kk: &dyn ManyTokens, r: usize, a: [&KActs; 4]) -> [f32; 4] {
        let w = self.row_bytes(r);
        match self.kind {
            KFormat::Q5_0 => kk.tokens4_q5_0(w, a.map(KActs::q8_0)),
            KFormat::Q4_K => kk.tokens4_q4_k(w, a.map(KActs::q8_k)),
            KFormat::Q6_K => kk.tokens4_q6_k(w, a.map(KActs::q8_k)),
        }
    }

    /// Rows `r0..r0 + out.len()` against one token's activations, four at a time.
    pub(super) fn rows_into(&self, kk: &dyn ManyTokens, a: &KActs, r0: usize, out: &mut [f32]) {
        rows_in_fours(out, r0, |r| self.rows4(kk, r, a), |r| self.dot(kk, r, a));
    }

    /// Rows `r..r + 4` against one token: four `dot`s, bit for bit.
    pub fn rows4(&self, kk: &dyn ManyTokens, r: usize, a: &KActs) -> [f32; 4] {
        let w: [&[u8]; 4] = std::array::from_fn(|i| self.row_bytes(r + i));
        match self.kind {
            KFormat::Q5_0 => kk.rows4_q5_0(w, a.q8_0()),
            KFormat::Q4_K => kk.rows4_q4_k(w, a.q8_k()),
            KFormat::Q6_K => kk.rows4_q6_k(w, a.q8_k()),
        }
    }

    // ANCHOR: kmatmul
    /// `out (seq, rows) = x (seq, cols) · Wᵀ` in a prefill (a decode step or a few tokens
    /// go through [`super::matmul_group`], as [`super::Matrix::matmul`] decides), on the
    /// tokens' activations quantized already (`acts`, one a token: Q, K and V of one kind
    /// share them), split like chapter 6's: each thread a band of tokens, several tokens per
    /// weight row at a time. Each output equals one `dot` whatever the split.
    pub fn prefill(&self, kk: &dyn ManyTokens, out: &mut [f32], acts: &[KActs], seq: usize) {
        let (rows, cols) = (self.rows, self.cols);
        assert_eq!(acts.len(), seq, "prefill: one KActs a token");
        let q8_0 = |t: usize| acts[t].q8_0();
        let q8k = |t: usize| acts[t].q8_k();
        if self.kind == KFormat::Q5_0 && crate::matrix::policy::use_eights(kk) {
            return prefill::prefill32(
                kk,
                Q32::Q5_0,
                out,
                rows,
                seq,
                |r| self.row_bytes(r),
                |t| Eights::from_q8_0(std::array::from_fn(|j| q8_0(t + j))),
                |r, t| self.dot4(kk, r, std::array::from_fn(|j| &acts[t + j])),
                |r, t| self.dot(kk, r, &acts[t]),
            );
        }
        if let (Some(kquant), true) = (self.format.kquant(), crate::matrix::policy::use_eights(kk))
        {
            return prefill::prefill(
                out,
                rows,
                seq,
                prefill::tile_rows_k(cols),
                |t| EightsK::new(std::array::from_fn(|j| q8k(t + j))),
                |rs, u: &mut RowsK| {
                    let rs: Vec<&[u8]> = rs.map(|r| self.row_bytes(r)).collect();
                    kk.unpack_rows_k(kquant, &rs, u);
                },
                |u, i, a, out| prefill::dot16_k(kk, kquant, u, i, a, out),
                |r, t| self.dot4(kk, r, std::array::from_fn(|j| &acts[t + j])),
                |r, t| self.dot(kk, r, &acts[t]),
            );
        }
        let wants = crate::matrix::policy::use_quads(kk);
        prefill_bands(
            out,
            rows,
            seq,
            // on a kernel that wants them, four tokens' activations interleaved once for
            // all the rows
            |t| match self.kind {
                KFormat::Q5_0 if wants => {
                    Some(Interleaved::Q8_0(ActQuads::new(std::array::from_fn(|j| {
                        q8_0(t + j)
                    }))))
                }
                KFormat::Q4_K if wants => {
                    Some(Interleaved::Q8K(KQuads::new(std::array::from_fn(|j| {
                        q8k(t + j)
                    }))))
                }
                KFormat::Q5_0 | KFormat::Q4_K | KFormat::Q6_K => None,
            },
            |r, t, q| {
                let w = self.row_bytes(r);
                let fast = match q {
                    Some(Interleaved::Q8_0(q)) => {
                        Some(kk.tokens4_q5_0_quads(w, q, std::array::from_fn(|j| q8_0(t + j))))
                    }
                    Some(Interleaved::Q8K(q)) => {
                        kk.tokens4_q4_k_quads(w, q, std::array::from_fn(|j| q8k(t + j)))
                    }
                    None => None,
                };
                fast.unwrap_or_else(|| self.dot4(kk, r, std::array::from_fn(|j| &acts[t + j])))
            },
            |r, t| self.dot(kk, r, &acts[t]),
        );
    }
    // ANCHOR_END: kmatmul
}
