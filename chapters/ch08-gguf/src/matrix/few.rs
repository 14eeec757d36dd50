//! A product of a few tokens (a decode step, or a batch of a few sequences): split by rows,
//! each task a block of rows against every token, so the weights are read once for the
//! batch; eight tokens at a time through the eight-token kernels where the matrix has one;
//! a packed matrix's block of groups ([`packed_rows`]).

use ch06_quantization::Kernels;
use ch06_quantization::matrix::{Activations, Format, Packable, Q32, QBlocks};

use super::bands::rows_in_fours;
use super::policy::{self, TASK_BYTES, task_bytes};
use super::types::{Acts, Matrix};
use ch07_simd_parallel::kernels::{ByToken, ManyTokens};
use ch07_simd_parallel::layout::eights::{Eights, Rows32};
use ch07_simd_parallel::layout::eights_k::{EightsK, RowsK};
use ch07_simd_parallel::layout::kquant::KQuant;
use ch07_simd_parallel::layout::packed::{self, Packed};
use ch07_simd_parallel::layout::packed_dot::PackedToken;
use ch07_simd_parallel::team;

/// Tokens a band of a prefill (a thread, up to four threads; [`policy::few_parts`]) must
/// have before a product is split by tokens (a prefill: every weight read once a band, for
/// the band's tokens) rather than by rows ([`super::matmul_group`]: each weight read once
/// for all the tokens, eight at a time where the matrix has an eight-token kernel), for a
/// matrix with a multi-token prefill kernel: below it, reading each weight once for all the
/// tokens beats reading it once a band. A matrix without such a kernel stays split by rows
/// twice as long.
pub const FEW: usize = 16;

/// Up to this many eights of tokens, a block of rows is unpacked in registers again for
/// each eight ([`ManyTokens::dot8_raw32`]), which costs less than once into memory while
/// the eights are few. Three eights is every batch two threads split by rows.
const RAW_GROUPS: usize = 3;

/// Rows a task of a grouped product computes, at the least.
const GROUP_ROWS: usize = 64;

/// A decode step's product of at least this many bytes of weights (an LM head) is cut into
/// two tasks a thread, so that a thread the host slows can hand its second task over; a
/// smaller one into one task a thread, since every further task costs a hand-over and a
/// prefetch stream that starts cold ([`decode_tasks_per_thread`]).
const LONG_PRODUCT: usize = 4 << 20;

/// Tasks a thread takes of a decode step's product of `bytes` bytes of weights.
pub(super) fn decode_tasks_per_thread(bytes: usize) -> usize {
    if bytes >= LONG_PRODUCT { 2 } else { 1 }
}

// ANCHOR: decode_task_count
/// How many tasks a decode step's product of `bytes` bytes of weights is cut into:
/// [`decode_tasks_per_thread`] a thread of those a decode region may use
/// ([`team::decode_threads`]), but none under [`task_bytes`] ([`TASK_BYTES`] unless told).
pub(super) fn decode_task_count(bytes: usize) -> usize {
    let most = decode_tasks_per_thread(bytes) * team::decode_threads();
    let floor = task_bytes().unwrap_or(TASK_BYTES);
    most.min(bytes.div_ceil(floor)).max(1)
}
// ANCHOR_END: decode_task_count

/// Rows a task computes in a product of `seq` tokens: [`GROUP_ROWS`], whose weights stay in
/// cache while every token meets them; or, for one token (a decode step), the matrix cut
/// into [`decode_tasks_per_thread`] tasks a thread of whole eights of rows, so that each
/// task walks a long run of consecutive rows that the decode kernels' prefetch streams in
/// order, and the threads' shares come out even (SmolLM2's 576-row matrices in tasks of 64
/// rows would be nine: five for one thread, four for the other).
pub(super) fn task_rows(m: &Matrix, seq: usize) -> usize {
    let rows = m.rows();
    if let (Matrix::P(_), true) = (m, seq > 1) {
        // a group's eight rows stay in cache while every token meets them, so the tasks
        // can be small: eight a thread or more, to even out the threads' shares
        let share = rows / (8 * rayon::current_num_threads());
        return share.max(packed::GROUP) / packed::GROUP * packed::GROUP;
    }
    if seq > 1 {
        return GROUP_ROWS;
    }
    let tasks = decode_task_count(m.bytes());
    rows.div_ceil(tasks).div_ceil(packed::GROUP) * packed::GROUP
}

/// Every eight tokens' activations interleaved for an eight-token kernel ([`crate::eights`]).
pub(super) enum TokenEights {
    Q32(Vec<Eights>),
    K(Vec<EightsK>),
}

impl TokenEights {
    /// Tokens the eights cover, a padded last eight's empty lanes included.
    fn tokens(&self) -> usize {
        8 * match self {
            TokenEights::Q32(g) => g.len(),
            TokenEights::K(g) => g.len(),
        }
    }
}

/// Which eight-token kernel a matrix has on a kernel level.
#[derive(Clone, Copy)]
pub(super) enum EightKernel {
    Q32(Q32),
    /// Q8_0's, on the rows as they lie in the file (nothing to unpack).
    Q8_0,
    K(KQuant),
}

impl Matrix {
    /// The eight-token kernel this matrix has on `kk`'s level, if any.
    pub(super) fn eight_kernel(&self, kk: &dyn ManyTokens) -> Option<EightKernel> {
        use crate::matrix::policy::use_eights;
        let packable = |p: Packable| match p {
            Packable::Q32(q32) => EightKernel::Q32(q32),
            Packable::K(kquant) => EightKernel::K(kquant),
        };
        match self {
            Matrix::Q(m) => match m.format().qblocks() {
                Some(QBlocks::Q4_0) if kk.has_eights() => Some(EightKernel::Q32(Q32::Q4_0)),
                Some(QBlocks::Q4_1) if use_eights(kk) => Some(EightKernel::Q32(Q32::Q4_1)),
                Some(QBlocks::Q8_0) if kk.has_eights() => Some(EightKernel::Q8_0),
                Some(QBlocks::Q4_0 | QBlocks::Q4_1 | QBlocks::Q8_0) | None => None,
            },
            Matrix::K(m) if use_eights(kk) => m.format.packable().map(packable),
            Matrix::K(_) => None,
            // for a prefill (packed_prefill), on the file's rows taken back out of the groups
            Matrix::P(p) if self.has_prefill_kernel(kk) => Some(packable(p.layout)),
            Matrix::P(_) => None,
        }
    }

    /// Every whole eight of the `seq` tokens' activations interleaved for this matrix's
    /// eight-token kernel: built once per kind of activation, shared by every block of rows
    /// of every matrix of that kind.
    pub(super) fn eights(
        &self,
        kk: &dyn ManyTokens,
        acts: &Acts,
        seq: usize,
    ) -> Option<TokenEights> {
        if let Matrix::P(_) = self {
            return None; // its eight-token kernels are for a prefill; a few tokens take packed8
        }
        let kernel = self.eight_kernel(kk)?;
        // Q8_0's kernel has nothing to unpack: a last, partial eight is cheaper in it, its
        // empty lanes holding copies of the last token, than four tokens at a time
        let pad = matches!(kernel, EightKernel::Q8_0) && seq % 8 >= kk.q8_0_pad_from();
        let groups = seq / 8 + usize::from(pad);
        if groups == 0 {
            return None;
        }
        let token = |g: usize, j: usize| (8 * g + j).min(seq - 1);
        Some(match (kernel, acts) {
            (EightKernel::Q32(_) | EightKernel::Q8_0, Acts::Q(a)) => {
                let nb = self.cols() / 32;
                TokenEights::Q32(
                    (0..groups)
                        .map(|g| match a {
                            Activations::Q8_0(a) => {
                                Eights::from_q8_0_blocks(std::array::from_fn(|j| {
                                    &a[token(g, j) * nb..][..nb]
                                }))
                            }
                            Activations::Q8_1(a) => Eights::from_q8_1(std::array::from_fn(|j| {
                                &a[token(g, j) * nb..][..nb]
                            })),
                        })
                        .collect(),
                )
            }
            (EightKernel::Q32(_), Acts::K(a)) => TokenEights::Q32(
                (0..groups)
                    .map(|g| Eights::from_q8_0(std::array::from_fn(|j| a[token(g, j)].q8_0())))
                    .collect(),
            ),
            (EightKernel::K(_), Acts::K(a)) => TokenEights::K(
                (0..groups)
                    .map(|g| EightsK::new(std::array::from_fn(|j| a[token(g, j)].q8_k())))
                    .collect(),
            ),
            (EightKernel::K(_), Acts::Q(_)) => unreachable!("K-quants take K activations"),
            (EightKernel::Q8_0, Acts::K(_)) => unreachable!("Q8_0 takes chapter 6's activations"),
            (EightKernel::Q32(_) | EightKernel::Q8_0 | EightKernel::K(_), Acts::Sums(..)) => {
                unreachable!("only a packed matrix takes sums")
            }
        })
    }

    /// Rows `r0..r0 + n` unpacked once, against every eight tokens of `eights`: `out[t][i]`
    /// for the first `8 · groups` tokens.
    fn block_of_rows_by_eights(
        &self,
        kk: &dyn ManyTokens,
        eights: &TokenEights,
        r0: usize,
        out: &mut [&mut [f32]],
    ) {
        let n = out[0].len();
        let bytes: Vec<&[u8]> = (r0..r0 + n)
            .map(|r| match self {
                Matrix::Q(m) => m.row_bytes(r),
                Matrix::K(m) => m.row_bytes(r),
                Matrix::P(_) => unreachable!("a packed matrix's few tokens take packed8"),
            })
            .collect();
        let tokens = out.len();
        let mut out = ByToken::new(out);
        match (self.eight_kernel(kk), eights) {
            (Some(EightKernel::Q32(f)), TokenEights::Q32(groups)) if groups.len() <= RAW_GROUPS => {
                for (g, a) in groups.iter().enumerate() {
                    for (i, w) in bytes.iter().enumerate() {
                        out.put(g, i, kk.dot8_raw32(f, w, a));
                    }
                }
            }
            (Some(EightKernel::Q32(f)), TokenEights::Q32(groups)) => {
                let mut rows = Rows32::default();
                kk.unpack_rows32(f, &bytes, &mut rows);
                for (g, a) in groups.iter().enumerate() {
                    for i in 0..n {
                        out.put(g, i, kk.dot8_row32(f, rows.row(i), a));
                    }
                }
            }
            (Some(EightKernel::Q8_0), TokenEights::Q32(groups)) => {
                kk.q8_0_rows_by_eights(&bytes, groups, tokens, &mut out);
            }
            (Some(EightKernel::K(kquant)), TokenEights::K(groups)) => {
                let mut rows = RowsK::default();
                kk.unpack_rows_k(kquant, &bytes, &mut rows);
                for (g, a) in groups.iter().enumerate() {
                    for i in 0..n {
                        out.put(
                            g,
                            i,
                            match kquant {
                                KQuant::Q4_K => kk.dot8_q4_k(&rows, i, a),
                                KQuant::Q6_K => kk.dot8_q6_k(&rows, i, a),
                            },
                        );
                    }
                }
            }
            (None, TokenEights::Q32(_) | TokenEights::K(_))
            | (Some(EightKernel::Q32(_) | EightKernel::Q8_0), TokenEights::K(_))
            | (Some(EightKernel::K(_)), TokenEights::Q32(_)) => {
                unreachable!("eights were built for this matrix's kernel")
            }
        }
    }

    /// Whether a product of `seq` tokens is split by rows: too few tokens a band of its
    /// prefill (a thread, up to four threads; [`policy::few_parts`]) for this matrix's
    /// prefill kernel to pay for reading every weight once a band.
    pub(super) fn by_rows(&self, kk: &dyn ManyTokens, seq: usize) -> bool {
        let kernel = self.has_prefill_kernel(kk);
        let banded = kernel && self.prefill_is_banded(kk);
        let parts = policy::few_parts(banded, seq, rayon::current_num_threads());
        if let Matrix::P(_) = self {
            // it has no product of its own to split by tokens without a prefill kernel
            return !kernel || seq < FEW * parts;
        }
        let per_part = if kernel { FEW } else { 2 * FEW };
        self.act_kind().is_some() && seq < per_part * parts
    }

    /// Rows `r0..r0 + n` against every token, `out[t]` token `t`'s `n` outputs: eight tokens
    /// at a time where the matrix has an eight-token kernel (`eights`), then four at a time
    /// against each row (its blocks unpacked once for the four), then the last one to three
    /// tokens four rows at a time. The same numbers as [`Matrix::matmul`].
    pub(super) fn block_of_rows(
        &self,
        k: &dyn Kernels,
        kk: &dyn ManyTokens,
        (acts, eights): (&Acts, Option<&TokenEights>),
        r0: usize,
        out: &mut [&mut [f32]],
    ) {
        let seq = out.len();
        if let Matrix::P(p) = self {
            return packed_rows(p, kk, acts, 0, r0, out);
        }
        let mut t = 0;
        if let Some(e) = eights {
            self.block_of_rows_by_eights(kk, e, r0, out);
            t = e.tokens().min(seq);
        }
        while t + 4 <= seq {
            for i in 0..out[t].len() {
                let r = r0 + i;
                let v = match (self, acts) {
                    (Matrix::K(m), Acts::K(a)) => m.dot4(kk, r, std::array::from_fn(|j| &a[t + j])),
                    (Matrix::Q(m), Acts::Q(a)) => {
                        m.dot_rows4(k, [r; 4], a, [t, t + 1, t + 2, t + 3])
                    }
                    (Matrix::P(_), Acts::Q(_) | Acts::K(_) | Acts::Sums(..)) => {
                        unreachable!("packed rows returned above")
                    }
                    (Matrix::K(_), Acts::Q(_) | Acts::Sums(..))
                    | (Matrix::Q(_), Acts::K(_) | Acts::Sums(..)) => {
                        unreachable!("quantize made the activations for this matrix")
                    }
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
        kk: &dyn ManyTokens,
        acts: &Acts,
        t: usize,
        r0: usize,
        out: &mut [f32],
    ) {
        let (m, a) = match (self, acts) {
            (Matrix::K(m), Acts::K(a)) => return m.rows_into(kk, &a[t], r0, out),
            (Matrix::Q(m), Acts::Q(a)) => (m, a),
            (Matrix::P(p), Acts::Q(_) | Acts::K(_) | Acts::Sums(..)) => {
                return packed_rows(p, kk, acts, t, r0, &mut [out]);
            }
            (Matrix::K(_), Acts::Q(_) | Acts::Sums(..))
            | (Matrix::Q(_), Acts::K(_) | Acts::Sums(..)) => {
                unreachable!("quantize made the activations for this matrix")
            }
        };
        // eight rows at a time where the format has an eight-row kernel
        let (nb, eights) = (m.cols() / 32, out.len() / 8 * 8);
        let mut by_eights = |kernel: &dyn Fn(&[u8]) -> [f32; 8]| {
            for (i, o8) in out[..eights].chunks_exact_mut(8).enumerate() {
                o8.copy_from_slice(&kernel(m.rows_bytes(r0 + 8 * i, 8)));
            }
            eights
        };
        let done = match (m.format(), a) {
            (Format::Q8_0, Activations::Q8_0(a)) => {
                by_eights(&|w| kk.rows8_q8_0(w, &a[t * nb..(t + 1) * nb]))
            }
            (Format::Q4_1, Activations::Q8_1(a)) => {
                by_eights(&|w| kk.rows8_q4_1(w, &a[t * nb..(t + 1) * nb]))
            }
            (Format::Q4_0, Activations::Q8_0(a)) => {
                by_eights(&|w| kk.rows8_q4_0(w, &a[t * nb..(t + 1) * nb]))
            }
            // no eight-row kernel for this format (or these activations): four rows at a time
            (
                Format::F32 | Format::Int8 | Format::Q5_0 | Format::Q4_K | Format::Q6_K,
                Activations::Q8_0(_) | Activations::Q8_1(_),
            )
            | (Format::Q8_0 | Format::Q4_0, Activations::Q8_1(_))
            | (Format::Q4_1, Activations::Q8_0(_)) => 0,
        };
        let (r0, out) = (r0 + done, &mut out[done..]);
        rows_in_fours(
            out,
            r0,
            |r| m.dot_rows4(k, [r, r + 1, r + 2, r + 3], a, [t; 4]),
            |r| m.dot_row(k, r, a, t),
        );
    }
}

// ANCHOR: packed_rows
/// Rows `r0..r0 + n` of a packed matrix against tokens `t0..`, `out[i]` token `t0 + i`'s
/// `n` outputs (`n` whole groups of eight): each group meets all the tokens while its bytes
/// are in cache, four tokens at a time ([`ManyTokens::packed8`]).
pub(super) fn packed_rows(
    p: &Packed,
    kk: &dyn ManyTokens,
    acts: &Acts,
    t0: usize,
    r0: usize,
    out: &mut [&mut [f32]],
) {
    if out.is_empty() {
        return;
    }
    let nb = p.cols / 32;
    let tokens: Vec<PackedToken> = (t0..t0 + out.len())
        .map(|t| match acts {
            Acts::Sums(a, s) => PackedToken::Q4_0(&a[t * nb..][..nb], &s[t * nb..][..nb]),
            Acts::Q(Activations::Q8_1(a)) => PackedToken::Q4_1(&a[t * nb..][..nb]),
            Acts::K(a) => a[t].packed(p.layout),
            Acts::Q(Activations::Q8_0(_)) => {
                unreachable!("quantize made the activations for this matrix")
            }
        })
        .collect();
    let mut sums = vec![[0.0f32; 8]; tokens.len()];
    assert!(r0.is_multiple_of(packed::GROUP), "tasks take whole groups");
    for g in 0..out[0].len() / packed::GROUP {
        kk.packed8(p.group(r0 / packed::GROUP + g), &tokens, &mut sums);
        for (o, v) in out.iter_mut().zip(&sums) {
            o[packed::GROUP * g..][..packed::GROUP].copy_from_slice(v);
        }
    }
}
// ANCHOR_END: packed_rows
