//! A weight matrix in whatever format the file holds it: chapter 6's
//! [`QMatrix`](ch06_quantization::QMatrix) for F32, Q8_0, Q4_0 and Q4_1, a [`KMatrix`] for
//! Q5_0, Q4_K and Q6_K, or, on both x86 SIMD levels ([`policy::packs`]), a [`Packed`] matrix
//! of any of those five formats but F32 and Q8_0: its rows interleaved eight at a time at load.
//!
//! The top level of the kernel layer: the drivers that tile a product over rows, tokens and
//! threads, calling chapter 7's kernels (which call nothing above them). Inside it, too, the
//! arrows point down: a file uses only those below it, and this one, which picks a
//! product's path, uses them all.
//!
//! ```text
//! matrix.rs                 Matrix::matmul and matmul_group: the one place that picks a path
//! matrix/packed_prefill.rs  a packed matrix in a prefill
//! matrix/group.rs           several products of one input in one parallel pass, by rows
//! matrix/few.rs             a few tokens: every token per block of rows; packed groups
//! matrix/types.rs           Matrix and its activations, and what it is asked before a product
//! matrix/kmatrix.rs         KMatrix: Q5_0, Q4_K and Q6_K rows in place, and their prefill
//! matrix/prefill.rs         a prefill: bands of tokens, tiles of rows, eight tokens a register
//! matrix/bands.rs           the loops they share: rows in fours, a prefill's bands
//! matrix/policy.rs          which layouts a machine takes (packing, the prefill layout)
//! ```

// A match over a format names every format, so that adding one makes the compiler list
// every place that must handle it (no `_ =>` that quietly sends it down another's path).
// The crate's other enums (GGUF values, architectures) are not formats: the rule is here.
#![deny(clippy::wildcard_enum_match_arm)]

mod bands;
mod few;
mod group;
mod kmatrix;
mod packed_prefill;
pub mod policy;
pub mod prefill;
mod types;

pub use ch07_simd_parallel::layout::packed::{self, GroupLayout, Packed};
pub use ch07_simd_parallel::layout::packed_dot::PackedToken;
pub use few::FEW;
pub use kmatrix::{KActs, KFormat, KMatrix};
use types::ActKind;
pub use types::{Acts, Matrix};

use ch06_quantization::Kernels;
use ch07_simd_parallel::kernels::ManyTokens;
use rayon::prelude::*;

impl Matrix {
    // ANCHOR: choose
    /// `out (seq, rows) = x (seq, cols) · Wᵀ`, the one place that picks how: with few tokens
    /// a thread ([`FEW`]), split by rows (`group::split_by_rows`); else, in a prefill,
    /// split by tokens, Q4_0, Q4_1 and Q8_0 through `prefill::q4_prefill`'s multi-token
    /// kernels, the K-quants through [`KMatrix::prefill`]'s, a [`Packed`] matrix through
    /// `packed_prefill::packed_prefill`, and the rest through chapter 6's product. Every
    /// path gives every output the scalar kernel's bits.
    pub fn matmul(
        &self,
        k: &dyn Kernels,
        kk: &dyn ManyTokens,
        out: &mut [f32],
        x: &[f32],
        seq: usize,
    ) {
        if self.by_rows(kk, seq) {
            return group::split_by_rows(k, kk, vec![(self, out)], x, seq);
        }
        let acts = self.prefill_kind(kk).map(|_| self.quantize_tokens(k, x));
        self.prefill(k, kk, out, x, seq, acts.as_ref());
    }

    /// [`Matrix::matmul`] in a prefill, with `x` quantized for it (`acts`, from
    /// [`Matrix::quantize_tokens`], where [`Matrix::prefill_kind`] says it takes them).
    fn prefill(
        &self,
        k: &dyn Kernels,
        kk: &dyn ManyTokens,
        out: &mut [f32],
        x: &[f32],
        seq: usize,
        acts: Option<&Acts>,
    ) {
        let acts = || acts.expect("the prefill's activations, quantized by the caller");
        match self {
            Matrix::Q(m) if self.has_prefill_kernel(kk) => match acts() {
                Acts::Q(a) => prefill::q4_prefill(m, k, kk, out, a, seq),
                Acts::K(_) | Acts::Sums(..) => unreachable!("a QMatrix takes chapter 6's blocks"),
            },
            Matrix::Q(m) => m.matmul_with(k, out, x, seq),
            Matrix::K(m) => match acts() {
                Acts::K(a) => m.prefill(kk, out, a, seq),
                Acts::Q(_) | Acts::Sums(..) => unreachable!("a KMatrix takes KActs"),
            },
            Matrix::P(p) => packed_prefill::packed_prefill(self, p, k, kk, out, acts(), x, seq),
        }
    }
    // ANCHOR_END: choose
}

// ANCHOR: matmul_group
/// Several products of the same input `x` (`(seq, cols)`), `outs[i] = x · mats[i]ᵀ`: Q, K
/// and V, or gate and up. In a prefill each is an ordinary [`Matrix::matmul`] on the input
/// quantized once per kind of activation (Q, K and V of one format quantize it once, not
/// three times); the matrices with too few tokens a thread for their prefill kernel share
/// one parallel pass split by rows (`group::split_by_rows`), their input quantized there.
pub fn matmul_group(
    k: &dyn Kernels,
    kk: &dyn ManyTokens,
    mats: &[&Matrix],
    outs: &mut [&mut [f32]],
    x: &[f32],
    seq: usize,
) {
    assert_eq!(mats.len(), outs.len(), "one output per matrix");
    let mut few: Vec<(&Matrix, &mut [f32])> = Vec::new();
    let mut shared: Vec<(ActKind, Acts)> = Vec::new(); // one quantization of x per kind
    for (m, out) in mats.iter().zip(outs.iter_mut()) {
        if m.by_rows(kk, seq) {
            few.push((m, out));
            continue;
        }
        let at = m.prefill_kind(kk).map(|kind| {
            shared
                .iter()
                .position(|(k, _)| *k == kind)
                .unwrap_or_else(|| {
                    shared.push((kind, m.quantize_tokens(k, x)));
                    shared.len() - 1
                })
        });
        m.prefill(k, kk, out, x, seq, at.map(|i| &shared[i].1));
    }
    group::split_by_rows(k, kk, few, x, seq);
}
// ANCHOR_END: matmul_group

// ANCHOR: matmul_pair_then
/// Two products of the same input whose outputs meet value by value (gate and up), and
/// `then(first, second)` on each token's row of them: `outs[0]` takes `then`'s result. With
/// few tokens a thread, each task computes one block of rows of both matrices and finishes
/// that block itself (`group::pair_by_rows`); otherwise the products run as
/// [`matmul_group`] runs them and `then` follows on the threads, token by token. `then` sees
/// the same numbers either way, so its results are the same bits.
pub fn matmul_pair_then(
    k: &dyn Kernels,
    kk: &dyn ManyTokens,
    mats: [&Matrix; 2],
    outs: [&mut [f32]; 2],
    x: &[f32],
    seq: usize,
    then: &(dyn Fn(&mut [f32], &[f32]) + Sync),
) {
    if group::can_pair(kk, mats, seq) {
        return group::pair_by_rows(k, kk, mats, outs, (x, seq), then);
    }
    let [first, second] = outs;
    matmul_group(k, kk, &mats, &mut [&mut *first, &mut *second], x, seq);
    let rows = mats[0].rows();
    first
        .par_chunks_mut(rows)
        .zip(second.par_chunks(rows))
        .for_each(|(f, s)| then(f, s));
}
// ANCHOR_END: matmul_pair_then
