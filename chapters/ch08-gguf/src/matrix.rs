//! A weight matrix in whatever format the file holds it: chapter 6's [`QMatrix`] for F32,
//! Q8_0, Q4_0 and Q4_1, or a [`KMatrix`] for Q5_0, Q4_K and Q6_K.

use crate::kquant::{ActQuads, KQuads, Q8_0Wide};
use ch06_quantization::matrix::{Activations, Format};
use ch06_quantization::{Bytes, Kernels, QMatrix};
use rayon::prelude::*;

use crate::kocts::{KOcts, RowsK};
use crate::kquant::{self, BlockQ8K, Q4_K_BYTES, Q5_0_BYTES, Q6_K_BYTES, QK_K};
use crate::ksimd::KKernels;
use crate::octs::{self, ActOcts, Format32, Rows32};

/// The block formats of [`crate::kquant`] (named as llama.cpp names them).
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KFormat {
    Q5_0,
    Q4_K,
    Q6_K,
}

impl KFormat {
    pub fn name(self) -> &'static str {
        match self {
            KFormat::Q5_0 => "Q5_0",
            KFormat::Q4_K => "Q4_K",
            KFormat::Q6_K => "Q6_K",
        }
    }
    /// (values, bytes) per block.
    pub fn block(self) -> (usize, usize) {
        match self {
            KFormat::Q5_0 => (32, Q5_0_BYTES),
            KFormat::Q4_K => (QK_K, Q4_K_BYTES),
            KFormat::Q6_K => (QK_K, Q6_K_BYTES),
        }
    }
}

/// A matrix of Q5_0, Q4_K or Q6_K rows, in place in the file.
pub struct KMatrix {
    pub format: KFormat,
    pub rows: usize,
    pub cols: usize,
    data: Bytes,
}

/// One token's activations, quantized for a format.
pub enum KActs {
    Q8_0(Vec<Q8_0Wide>),
    Q8K(Vec<BlockQ8K>),
}

impl KMatrix {
    /// `bytes` must hold exactly `rows` rows of `cols` values.
    pub fn new(format: KFormat, rows: usize, cols: usize, data: Bytes) -> Result<KMatrix, String> {
        let (bv, bb) = format.block();
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
            rows,
            cols,
            data,
        })
    }

    #[inline]
    pub fn row_len(&self) -> usize {
        let (bv, bb) = self.format.block();
        self.cols / bv * bb
    }

    #[inline]
    pub fn row_bytes(&self, r: usize) -> &[u8] {
        let n = self.row_len();
        &self.data.as_slice()[r * n..(r + 1) * n]
    }

    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let w = self.row_bytes(r);
        let (bv, bb) = self.format.block();
        for (b, o) in w.chunks_exact(bb).zip(out.chunks_exact_mut(bv)) {
            match self.format {
                KFormat::Q5_0 => kquant::dequantize_q5_0(b, o.try_into().expect("32")),
                KFormat::Q4_K => kquant::dequantize_q4_k(b, o.try_into().expect("256")),
                KFormat::Q6_K => kquant::dequantize_q6_k(b, o.try_into().expect("256")),
            }
        }
    }

    /// One token's activations (`cols` values) in the format this matrix multiplies with.
    pub fn quantize(&self, k: &dyn Kernels, x: &[f32]) -> KActs {
        match self.format {
            KFormat::Q5_0 => {
                let mut out = Vec::new();
                k.quantize_q8_0(x, &mut out);
                KActs::Q8_0(out.iter().map(Q8_0Wide::from).collect())
            }
            _ => KActs::Q8K(
                x.chunks_exact(QK_K)
                    .map(|c| kquant::quantize_q8_k(c.try_into().expect("256")))
                    .collect(),
            ),
        }
    }

    pub fn dot(&self, kk: &dyn KKernels, r: usize, a: &KActs) -> f32 {
        let w = self.row_bytes(r);
        match (self.format, a) {
            (KFormat::Q5_0, KActs::Q8_0(a)) => kk.dot_q5_0(w, a),
            (KFormat::Q4_K, KActs::Q8K(a)) => kk.dot_q4_k(w, a),
            (KFormat::Q6_K, KActs::Q8K(a)) => kk.dot_q6_k(w, a),
            _ => unreachable!("quantize made the activations for this format"),
        }
    }

    /// Row `r` against four tokens' activations: four `dot`s, bit for bit, with each weight
    /// block unpacked once.
    pub fn dot4(&self, kk: &dyn KKernels, r: usize, a: [&KActs; 4]) -> [f32; 4] {
        let w = self.row_bytes(r);
        match (self.format, a) {
            (
                KFormat::Q5_0,
                [
                    KActs::Q8_0(a0),
                    KActs::Q8_0(a1),
                    KActs::Q8_0(a2),
                    KActs::Q8_0(a3),
                ],
            ) => kk.dot4_q5_0(w, [a0, a1, a2, a3]),
            (
                KFormat::Q4_K,
                [
                    KActs::Q8K(a0),
                    KActs::Q8K(a1),
                    KActs::Q8K(a2),
                    KActs::Q8K(a3),
                ],
            ) => kk.dot4_q4_k(w, [a0, a1, a2, a3]),
            (
                KFormat::Q6_K,
                [
                    KActs::Q8K(a0),
                    KActs::Q8K(a1),
                    KActs::Q8K(a2),
                    KActs::Q8K(a3),
                ],
            ) => kk.dot4_q6_k(w, [a0, a1, a2, a3]),
            _ => unreachable!("quantize made the activations for this format"),
        }
    }

    /// Rows `r0..r0 + out.len()` against one token's activations, four at a time.
    fn rows_into(&self, kk: &dyn KKernels, a: &KActs, r0: usize, out: &mut [f32]) {
        rows_in_fours(out, r0, |r| self.rows4(kk, r, a), |r| self.dot(kk, r, a));
    }

    /// Rows `r..r + 4` against one token: four `dot`s, bit for bit.
    pub fn rows4(&self, kk: &dyn KKernels, r: usize, a: &KActs) -> [f32; 4] {
        let w: [&[u8]; 4] = std::array::from_fn(|i| self.row_bytes(r + i));
        match (self.format, a) {
            (KFormat::Q5_0, KActs::Q8_0(a)) => kk.rows4_q5_0(w, a),
            (KFormat::Q4_K, KActs::Q8K(a)) => kk.rows4_q4_k(w, a),
            (KFormat::Q6_K, KActs::Q8K(a)) => kk.rows4_q6_k(w, a),
            _ => unreachable!("quantize made the activations for this format"),
        }
    }

    // ANCHOR: kmatmul
    /// `out (seq, rows) = x (seq, cols) · Wᵀ`, split like chapter 6's: bands of at least
    /// four tokens per thread in a prefill (four tokens per weight row at a time), blocks
    /// of 64 rows in a decode step. Each output equals one `dot` whatever the split.
    pub fn matmul(
        &self,
        k: &dyn Kernels,
        kk: &dyn KKernels,
        out: &mut [f32],
        x: &[f32],
        seq: usize,
    ) {
        let (rows, cols) = (self.rows, self.cols);
        let threads = rayon::current_num_threads();
        let acts: Vec<KActs> = if seq >= 4 * threads {
            x.par_chunks_exact(cols)
                .map(|t| self.quantize(k, t))
                .collect()
        } else {
            // a decode step: one token is quicker to quantize than to hand to another thread
            x.chunks_exact(cols).map(|t| self.quantize(k, t)).collect()
        };
        if seq >= 4 * threads {
            let q8_0 = |t: usize| match &acts[t] {
                KActs::Q8_0(a) => &a[..],
                KActs::Q8K(_) => unreachable!("Q5_0 takes Q8_0 activations"),
            };
            let q8k = |t: usize| match &acts[t] {
                KActs::Q8K(a) => &a[..],
                KActs::Q8_0(_) => unreachable!("the K-quants take Q8_K activations"),
            };
            if self.format == KFormat::Q5_0 && kk.wants_octs() {
                return octs::prefill32(
                    kk,
                    Format32::Q5_0,
                    out,
                    rows,
                    seq,
                    |r| self.row_bytes(r),
                    |t| ActOcts::from_q8_0(std::array::from_fn(|j| q8_0(t + j))),
                    |r, t| self.dot4(kk, r, std::array::from_fn(|j| &acts[t + j])),
                    |r, t| self.dot(kk, r, &acts[t]),
                );
            }
            if matches!(self.format, KFormat::Q4_K | KFormat::Q6_K) && kk.wants_octs() {
                let q6_k = self.format == KFormat::Q6_K;
                return octs::prefill(
                    out,
                    rows,
                    seq,
                    octs::tile_rows(cols / QK_K * 280), // 256 quants, 16 scales, d, dmin
                    |t| KOcts::new(std::array::from_fn(|j| q8k(t + j))),
                    |rs, u: &mut RowsK| {
                        let rs: Vec<&[u8]> = rs.map(|r| self.row_bytes(r)).collect();
                        kk.unpack_rows_k(q6_k, &rs, u);
                    },
                    |u, i, a| {
                        if q6_k {
                            kk.dot8_q6_k(u, i, a)
                        } else {
                            kk.dot8_q4_k(u, i, a)
                        }
                    },
                    |r, t| self.dot4(kk, r, std::array::from_fn(|j| &acts[t + j])),
                    |r, t| self.dot(kk, r, &acts[t]),
                );
            }
            let wants = kk.wants_quads();
            prefill_bands(
                out,
                rows,
                seq,
                // on a kernel that wants them, four tokens' activations interleaved once for
                // all the rows
                |t| match self.format {
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
                    _ => None,
                },
                |r, t, q| {
                    let w = self.row_bytes(r);
                    let fast = match q {
                        Some(Interleaved::Q8_0(q)) => {
                            Some(kk.dot4_q5_0_quads(w, q, std::array::from_fn(|j| q8_0(t + j))))
                        }
                        Some(Interleaved::Q8K(q)) => {
                            kk.dot4_q4_k_quads(w, q, std::array::from_fn(|j| q8k(t + j)))
                        }
                        None => None,
                    };
                    fast.unwrap_or_else(|| self.dot4(kk, r, std::array::from_fn(|j| &acts[t + j])))
                },
                |r, t| self.dot(kk, r, &acts[t]),
            );
        } else {
            for (t, out_t) in out.chunks_exact_mut(rows).enumerate() {
                out_t
                    .par_chunks_mut(GROUP_ROWS)
                    .enumerate()
                    .for_each(|(c, o)| self.rows_into(kk, &acts[t], c * GROUP_ROWS, o));
            }
        }
    }
    // ANCHOR_END: kmatmul
}

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
fn prefill_bands<P: Send>(
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

/// Activations quantized for a [`Matrix`]/// Activations quantized for a [`Matrix`]: chapter 6's kinds or this chapter's, one
/// token's worth per entry of `K`.
pub enum Acts {
    Q(Activations),
    K(Vec<KActs>),
}

/// Every eight tokens' activations interleaved for an eight-token kernel ([`crate::octs`]).
enum Eights {
    Q32(Vec<ActOcts>),
    K(Vec<KOcts>),
}

/// Which eight-token kernel a matrix has on a kernel level.
#[derive(Clone, Copy)]
enum EightKernel {
    Q32(Format32),
    K { q6_k: bool },
}

/// Rows a task of a grouped product computes.
const GROUP_ROWS: usize = 64;

/// Tokens a thread must have before a product is split by tokens (a prefill: each thread
/// reads every weight for its band of tokens) rather than by rows ([`matmul_group`]: each
/// weight read once for all the tokens, eight at a time where the matrix has an
/// eight-token kernel), for a matrix with a multi-token prefill kernel. On the book's AMD
/// EPYC (two threads), 16 to 24 tokens went up to 1.8× faster split by rows, and from 32 the
/// two splits were level. A matrix without such a kernel stays split by rows twice as
/// long.
pub const FEW: usize = 16;

/// A matrix of any format the engine runs.
/// A matrix of any format the engine runs.
pub enum Matrix {
    Q(QMatrix),
    K(KMatrix),
}

impl Matrix {
    pub fn rows(&self) -> usize {
        match self {
            Matrix::Q(m) => m.rows(),
            Matrix::K(m) => m.rows,
        }
    }
    pub fn cols(&self) -> usize {
        match self {
            Matrix::Q(m) => m.cols(),
            Matrix::K(m) => m.cols,
        }
    }
    pub fn format_name(&self) -> &'static str {
        match self {
            Matrix::Q(m) => m.format().name(),
            Matrix::K(m) => m.format.name(),
        }
    }
    /// Bytes of weights.
    pub fn bytes(&self) -> usize {
        match self {
            Matrix::Q(m) => m.bytes(),
            Matrix::K(m) => m.rows * m.row_len(),
        }
    }
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        match self {
            Matrix::Q(m) => m.dequantize_row(r, out),
            Matrix::K(m) => m.dequantize_row(r, out),
        }
    }
    // ANCHOR: choose
    /// `out (seq, rows) = x (seq, cols) · Wᵀ`, the one place that picks how: with few tokens
    /// a thread ([`FEW`]), split by rows ([`matmul_group`]); else, in a prefill, split by tokens,
    /// Q4_0 and Q4_1 through [`q4_prefill`]'s multi-token kernels, the K-quants through
    /// [`KMatrix::matmul`]'s, and the rest through chapter 6's product. Every path gives
    /// every output the scalar kernel's bits.
    pub fn matmul(
        &self,
        k: &dyn Kernels,
        kk: &dyn KKernels,
        out: &mut [f32],
        x: &[f32],
        seq: usize,
    ) {
        match self {
            _ if self.by_rows(kk, seq) => matmul_group(k, kk, &[self], &mut [out], x, seq),
            Matrix::Q(m)
                if match m.format() {
                    Format::Q4_1 => kk.wants_quads() || kk.wants_octs(),
                    Format::Q4_0 => kk.has_octs(),
                    _ => false,
                } =>
            {
                q4_prefill(m, k, kk, out, x, seq)
            }
            Matrix::Q(m) => m.matmul_with(k, out, x, seq),
            Matrix::K(m) => m.matmul(k, kk, out, x, seq),
        }
    }
    // ANCHOR_END: choose

    /// The eight-token kernel this matrix has on `kk`'s level, if any.
    fn eight_kernel(&self, kk: &dyn KKernels) -> Option<EightKernel> {
        match self {
            Matrix::Q(m) => match m.format() {
                Format::Q4_0 if kk.has_octs() => Some(EightKernel::Q32(Format32::Q4_0)),
                Format::Q4_1 if kk.wants_octs() => Some(EightKernel::Q32(Format32::Q4_1)),
                _ => None,
            },
            Matrix::K(m) if kk.wants_octs() => Some(match m.format {
                KFormat::Q5_0 => EightKernel::Q32(Format32::Q5_0),
                KFormat::Q4_K => EightKernel::K { q6_k: false },
                KFormat::Q6_K => EightKernel::K { q6_k: true },
            }),
            Matrix::K(_) => None,
        }
    }

    /// Every whole eight of the `seq` tokens' activations interleaved for this matrix's
    /// eight-token kernel: built once per product, shared by every block of rows.
    fn eights(&self, kk: &dyn KKernels, acts: &Acts, seq: usize) -> Option<Eights> {
        let kernel = self.eight_kernel(kk)?;
        let groups = seq / 8;
        if groups == 0 {
            return None;
        }
        Some(match (kernel, acts) {
            (EightKernel::Q32(_), Acts::Q(a)) => {
                let nb = self.cols() / 32;
                Eights::Q32(
                    (0..groups)
                        .map(|g| match a {
                            Activations::Q8_0(a) => {
                                ActOcts::from_q8_0_blocks(std::array::from_fn(|j| {
                                    &a[(8 * g + j) * nb..][..nb]
                                }))
                            }
                            Activations::Q8_1(a) => ActOcts::from_q8_1(std::array::from_fn(|j| {
                                &a[(8 * g + j) * nb..][..nb]
                            })),
                        })
                        .collect(),
                )
            }
            (EightKernel::Q32(_), Acts::K(a)) => Eights::Q32(
                (0..groups)
                    .map(|g| {
                        ActOcts::from_q8_0(std::array::from_fn(|j| match &a[8 * g + j] {
                            KActs::Q8_0(a) => &a[..],
                            KActs::Q8K(_) => unreachable!("Q5_0 takes Q8_0 activations"),
                        }))
                    })
                    .collect(),
            ),
            (EightKernel::K { .. }, Acts::K(a)) => Eights::K(
                (0..groups)
                    .map(|g| {
                        KOcts::new(std::array::from_fn(|j| match &a[8 * g + j] {
                            KActs::Q8K(a) => &a[..],
                            KActs::Q8_0(_) => unreachable!("the K-quants take Q8_K activations"),
                        }))
                    })
                    .collect(),
            ),
            (EightKernel::K { .. }, Acts::Q(_)) => unreachable!("K-quants take K activations"),
        })
    }

    /// Rows `r0..r0 + n` unpacked once, against every eight tokens of `eights`: `out[t][i]`
    /// for the first `8 · groups` tokens.
    fn block_of_rows_by_eights(
        &self,
        kk: &dyn KKernels,
        eights: &Eights,
        r0: usize,
        out: &mut [&mut [f32]],
    ) {
        let n = out[0].len();
        let bytes: Vec<&[u8]> = (r0..r0 + n)
            .map(|r| match self {
                Matrix::Q(m) => m.row_bytes(r),
                Matrix::K(m) => m.row_bytes(r),
            })
            .collect();
        let mut put = |g: usize, i: usize, v: [f32; 8]| {
            for (j, v) in v.into_iter().enumerate() {
                out[8 * g + j][i] = v;
            }
        };
        match (self.eight_kernel(kk), eights) {
            (Some(EightKernel::Q32(f)), Eights::Q32(groups)) => {
                let mut rows = Rows32::default();
                kk.unpack_rows32(f, &bytes, &mut rows);
                for (g, a) in groups.iter().enumerate() {
                    for i in 0..n {
                        put(g, i, kk.dot8_row32(f, rows.row(i), a));
                    }
                }
            }
            (Some(EightKernel::K { q6_k }), Eights::K(groups)) => {
                let mut rows = RowsK::default();
                kk.unpack_rows_k(q6_k, &bytes, &mut rows);
                for (g, a) in groups.iter().enumerate() {
                    for i in 0..n {
                        put(
                            g,
                            i,
                            if q6_k {
                                kk.dot8_q6_k(&rows, i, a)
                            } else {
                                kk.dot8_q4_k(&rows, i, a)
                            },
                        );
                    }
                }
            }
            _ => unreachable!("eights were built for this matrix's kernel"),
        }
    }

    /// Whether a product of `seq` tokens is split by rows: too few tokens per thread for
    /// this matrix's prefill kernel to pay for reading every weight on every thread.
    fn by_rows(&self, kk: &dyn KKernels, seq: usize) -> bool {
        let wide = match self {
            Matrix::Q(m) => match m.format() {
                Format::Q4_0 => kk.has_octs(),
                Format::Q4_1 => kk.wants_octs() || kk.wants_quads(),
                _ => false,
            },
            Matrix::K(m) => match m.format {
                KFormat::Q6_K => kk.wants_octs(),
                _ => kk.wants_octs() || kk.wants_quads(),
            },
        };
        let per_thread = if wide { FEW } else { 2 * FEW };
        self.act_kind().is_some() && seq < per_thread * rayon::current_num_threads()
    }

    /// Which activations the matrix multiplies with: two matrices with the same kind can
    /// share one quantization of the same input. `None` for f32 weights (no quantization).
    fn act_kind(&self) -> Option<&'static str> {
        match self {
            Matrix::Q(m) if matches!(m.format(), Format::F32 | Format::Int8) => None,
            Matrix::Q(m) if m.format() == Format::Q4_1 => Some("q8_1"),
            Matrix::Q(_) => Some("q8_0"),
            Matrix::K(m) if m.format == KFormat::Q5_0 => Some("q8_0 wide"),
            Matrix::K(_) => Some("q8_k"),
        }
    }

    fn quantize(&self, k: &dyn Kernels, x: &[f32]) -> Acts {
        match self {
            Matrix::Q(m) => Acts::Q(m.quantize_activations(k, x)),
            Matrix::K(m) => Acts::K(x.chunks_exact(m.cols).map(|t| m.quantize(k, t)).collect()),
        }
    }

    /// Rows `r0..r0 + n` against every token, `out[t]` token `t`'s `n` outputs: eight tokens
    /// at a time where the matrix has an eight-token kernel (`eights`), then four at a time
    /// against each row (its blocks unpacked once for the four), then the last one to three
    /// tokens four rows at a time. The same numbers as [`Matrix::matmul`].
    fn block_of_rows(
        &self,
        k: &dyn Kernels,
        kk: &dyn KKernels,
        (acts, eights): (&Acts, Option<&Eights>),
        r0: usize,
        out: &mut [&mut [f32]],
    ) {
        let seq = out.len();
        let mut t = 0;
        if let Some(e) = eights {
            self.block_of_rows_by_eights(kk, e, r0, out);
            t = seq / 8 * 8;
        }
        while t + 4 <= seq {
            for i in 0..out[t].len() {
                let r = r0 + i;
                let v = match (self, acts) {
                    (Matrix::K(m), Acts::K(a)) => m.dot4(kk, r, std::array::from_fn(|j| &a[t + j])),
                    (Matrix::Q(m), Acts::Q(a)) => {
                        m.dot_rows4(k, [r; 4], a, [t, t + 1, t + 2, t + 3])
                    }
                    _ => unreachable!("quantize made the activations for this matrix"),
                };
                for (j, v) in v.into_iter().enumerate() {
                    out[t + j][i] = v;
                }
            }
            t += 4;
        }
        for (t, o) in out.iter_mut().enumerate().skip(t) {
            self.rows_into(k, kk, acts, t, r0, o);
        }
    }

    /// Rows `r0..r0 + out.len()` for token `t`, four at a time: the same numbers as
    /// [`Matrix::matmul`] gives them.
    fn rows_into(
        &self,
        k: &dyn Kernels,
        kk: &dyn KKernels,
        acts: &Acts,
        t: usize,
        r0: usize,
        out: &mut [f32],
    ) {
        let (m, a) = match (self, acts) {
            (Matrix::K(m), Acts::K(a)) => return m.rows_into(kk, &a[t], r0, out),
            (Matrix::Q(m), Acts::Q(a)) => (m, a),
            _ => unreachable!("quantize made the activations for this matrix"),
        };
        rows_in_fours(
            out,
            r0,
            |r| m.dot_rows4(k, [r, r + 1, r + 2, r + 3], a, [t; 4]),
            |r| m.dot_row(k, r, a, t),
        );
    }
}

/// Chapter 6's product for a Q4_0 or Q4_1 matrix in a prefill, the same numbers bit for
/// bit, with this chapter's eight-token kernel (or, for Q4_1 with VNNI, the interleaved
/// four-token one) doing the tokens of a row together.
fn q4_prefill(
    m: &QMatrix,
    k: &dyn Kernels,
    kk: &dyn KKernels,
    out: &mut [f32],
    x: &[f32],
    seq: usize,
) {
    assert_eq!(x.len(), seq * m.cols(), "matmul: x is not (seq, cols)");
    assert_eq!(out.len(), seq * m.rows(), "matmul: out is not (seq, rows)");
    // each token's row quantized on the threads: the same blocks as one call over all of x
    let per_token: Vec<Activations> = x
        .par_chunks(m.cols())
        .map(|row| m.quantize_activations(k, row))
        .collect();
    let acts = match m.format() {
        Format::Q4_1 => Activations::Q8_1(
            per_token
                .into_iter()
                .flat_map(|a| match a {
                    Activations::Q8_1(a) => a,
                    _ => unreachable!("Q4_1 takes Q8_1 activations"),
                })
                .collect(),
        ),
        _ => Activations::Q8_0(
            per_token
                .into_iter()
                .flat_map(|a| match a {
                    Activations::Q8_0(a) => a,
                    _ => unreachable!("Q4_0 takes Q8_0 activations"),
                })
                .collect(),
        ),
    };
    let nb = m.cols() / 32;
    let dot4 = |r: usize, t: usize| m.dot_rows4(k, [r; 4], &acts, [t, t + 1, t + 2, t + 3]);
    let dot = |r: usize, t: usize| m.dot_row(k, r, &acts, t);
    match &acts {
        Activations::Q8_0(a) => octs::prefill32(
            kk,
            Format32::Q4_0,
            out,
            m.rows(),
            seq,
            |r| m.row_bytes(r),
            |t| ActOcts::from_q8_0_blocks(std::array::from_fn(|j| &a[(t + j) * nb..][..nb])),
            dot4,
            dot,
        ),
        Activations::Q8_1(a) if kk.wants_octs() => octs::prefill32(
            kk,
            Format32::Q4_1,
            out,
            m.rows(),
            seq,
            |r| m.row_bytes(r),
            |t| ActOcts::from_q8_1(std::array::from_fn(|j| &a[(t + j) * nb..][..nb])),
            dot4,
            dot,
        ),
        Activations::Q8_1(a) => prefill_bands(
            out,
            m.rows(),
            seq,
            |t| {
                let a4 = std::array::from_fn(|j| &a[(t + j) * nb..][..nb]);
                Some(ActQuads::from_q8_1(a4))
            },
            |r, t, q| {
                let a4 = std::array::from_fn(|j| &a[(t + j) * nb..][..nb]);
                q.and_then(|q| kk.dot4_q4_1_quads(m.row_bytes(r), q, a4))
                    .unwrap_or_else(|| dot4(r, t))
            },
            dot,
        ),
    }
}

// ANCHOR: matmul_group
/// Several products of the same input `x` (`(seq, cols)`), `outs[i] = x · mats[i]ᵀ`: Q, K
/// and V, or gate and up. In a prefill each is an ordinary [`Matrix::matmul`]. With too few
/// tokens a thread for its prefill kernel (a decode step, or a batch of a few sequences;
/// [`FEW`]), where each
/// product is a few hundred microseconds, the input is quantized once per kind of
/// activation and every matrix's rows go to the threads in *one* parallel pass: one
/// fork-join instead of three, and no thread idles while the smallest matrix finishes. A
/// task is a block of [`GROUP_ROWS`] rows against every token, so the block's weights come
/// from memory once however many tokens there are. Each output is the same `dot` as in
/// `matmul`, so the numbers are the same bits.
pub fn matmul_group(
    k: &dyn Kernels,
    kk: &dyn KKernels,
    mats: &[&Matrix],
    outs: &mut [&mut [f32]],
    x: &[f32],
    seq: usize,
) {
    assert_eq!(mats.len(), outs.len(), "one output per matrix");
    let mut few: Vec<(&Matrix, &mut [f32])> = Vec::new();
    for (m, out) in mats.iter().zip(outs.iter_mut()) {
        if m.by_rows(kk, seq) {
            few.push((m, out));
        } else {
            m.matmul(k, kk, out, x, seq);
        }
    }
    // One quantization per kind, shared by the matrices that take it.
    let mut acts: Vec<(&'static str, Acts)> = Vec::new();
    for (m, _) in &few {
        let kind = m.act_kind().expect("by_rows checked");
        if !acts.iter().any(|(k, _)| *k == kind) {
            acts.push((kind, m.quantize(k, x)));
        }
    }
    let acts_of = |m: &Matrix| {
        let kind = m.act_kind().expect("by_rows checked");
        &acts
            .iter()
            .find(|(k, _)| *k == kind)
            .expect("quantized above")
            .1
    };
    // Every eight tokens interleaved once per matrix that has an eight-token kernel.
    let eights: Vec<Option<Eights>> = few
        .iter()
        .map(|(m, _)| m.eights(kk, acts_of(m), seq))
        .collect();
    // (matrix, its eights, first row, each token's outputs for the block's rows)
    let mut tasks: Vec<(&Matrix, Option<&Eights>, usize, Vec<&mut [f32]>)> = Vec::new();
    for ((m, out), e) in few.into_iter().zip(&eights) {
        assert_eq!(
            out.len(),
            seq * m.rows(),
            "matmul_group: output is not (seq, rows)"
        );
        let first = tasks.len();
        for (t, out_t) in out.chunks_exact_mut(m.rows()).enumerate() {
            for (c, o) in out_t.chunks_mut(GROUP_ROWS).enumerate() {
                if t == 0 {
                    tasks.push((m, e.as_ref(), c * GROUP_ROWS, Vec::with_capacity(seq)));
                }
                tasks[first + c].3.push(o);
            }
        }
    }
    tasks
        .into_par_iter()
        .for_each(|(m, e, r0, mut o)| m.block_of_rows(k, kk, (acts_of(m), e), r0, &mut o));
}
// ANCHOR_END: matmul_group
