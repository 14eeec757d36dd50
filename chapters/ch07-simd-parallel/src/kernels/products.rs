//! The quantized products of every format the engine runs, by shape, for every level: the
//! contract the drivers of chapter 8 call and each instruction-set level fills in.
//!
//! - [`OneToken`]: rows against one token's activations (a decode step): chapter 6's products
//!   (its [`Kernels`]), and those of Q5_0 and the K-quants, one, four or eight rows at a time;
//! - [`ManyTokens`]: rows against several tokens' (a prefill, a batch): four tokens a row,
//!   eight tokens a row in registers (the layouts of [`crate::layout::eights`]), Q8_0's rows
//!   against eights, and the packed groups of [`crate::layout::packed`].
//!
//! Every default method is the scalar reference (the plain Rust of [`crate::layout`]), so a
//! level overrides what it has a kernel for and inherits the rest. Each kernel adds the blocks'
//! f32 contributions in block order, and each block's contribution is computed from exact
//! integer sums with the same float operations as the scalar code, so every level returns
//! the same bits.

use std::ops::Range;

use ch06_quantization::blocks::{BlockQ8_0, BlockQ8_1};
use ch06_quantization::matrix::{Packable, Q32};
use ch06_quantization::{Kernels, Scalar, dot};

use crate::layout::eights::{self, Block32, Eights, Rows32};
use crate::layout::eights_k::{self, EightsK, RowsK};
use crate::layout::kquant::{self, BlockQ8K, KQuant, Q4_K_BYTES, Q5_0_BYTES, Q6_K_BYTES, Q8_0Wide};
use crate::layout::packed::Packed;
use crate::layout::packed_dot::PackedToken;
use crate::layout::quads::{ActQuads, KQuads};

// ANCHOR: one_token
/// Products of rows with one token's activations, for every format: chapter 6's through
/// [`Kernels`], Q5_0's and the K-quants' here.
pub trait OneToken: Kernels {
    /// A Q4_K row (whole blocks of 144 bytes) with its Q8_K activations.
    fn dot_q4_k(&self, w: &[u8], a: &[BlockQ8K]) -> f32 {
        w.chunks_exact(Q4_K_BYTES)
            .zip(a)
            .fold(0.0, |acc, (b, a)| acc + kquant::dot_q4_k_q8_k(b, a))
    }
    /// A Q6_K row (blocks of 210 bytes) with its Q8_K activations.
    fn dot_q6_k(&self, w: &[u8], a: &[BlockQ8K]) -> f32 {
        w.chunks_exact(Q6_K_BYTES)
            .zip(a)
            .fold(0.0, |acc, (b, a)| acc + kquant::dot_q6_k_q8_k(b, a))
    }
    /// A Q5_0 row (blocks of 22 bytes) with its Q8_0 activations.
    fn dot_q5_0(&self, w: &[u8], a: &[Q8_0Wide]) -> f32 {
        w.chunks_exact(Q5_0_BYTES)
            .zip(a)
            .fold(0.0, |acc, (b, a)| acc + kquant::dot_q5_0_q8_0(b, a))
    }
    /// Four rows with one token's activations (a decode step): four `dot_*` results.
    fn rows4_q4_k(&self, w: [&[u8]; 4], a: &[BlockQ8K]) -> [f32; 4] {
        w.map(|w| self.dot_q4_k(w, a))
    }
    fn rows4_q6_k(&self, w: [&[u8]; 4], a: &[BlockQ8K]) -> [f32; 4] {
        w.map(|w| self.dot_q6_k(w, a))
    }
    fn rows4_q5_0(&self, w: [&[u8]; 4], a: &[Q8_0Wide]) -> [f32; 4] {
        w.map(|w| self.dot_q5_0(w, a))
    }
    /// Eight consecutive Q8_0 rows (`w`, their bytes back to back) with one token's
    /// activations (a decode step's LM head): eight of chapter 6's `dot_q8_0_q8_0`.
    fn rows8_q8_0(&self, w: &[u8], a: &[BlockQ8_0]) -> [f32; 8] {
        let row_len = w.len() / 8;
        std::array::from_fn(|r| dot::dot_q8_0_q8_0(&w[r * row_len..(r + 1) * row_len], a))
    }
    /// Eight consecutive Q4_0 rows with one token's Q8_0 activations: eight of chapter 6's
    /// `dot_q4_0_q8_0`.
    fn rows8_q4_0(&self, w: &[u8], a: &[BlockQ8_0]) -> [f32; 8] {
        let row_len = w.len() / 8;
        std::array::from_fn(|r| dot::dot_q4_0_q8_0(&w[r * row_len..(r + 1) * row_len], a))
    }
    /// Eight consecutive Q4_1 rows with one token's Q8_1 activations: eight of chapter 6's
    /// `dot_q4_1_q8_1`.
    fn rows8_q4_1(&self, w: &[u8], a: &[BlockQ8_1]) -> [f32; 8] {
        let row_len = w.len() / 8;
        std::array::from_fn(|r| dot::dot_q4_1_q8_1(&w[r * row_len..(r + 1) * row_len], a))
    }
}
// ANCHOR_END: one_token

// ANCHOR: many_tokens
/// Products of rows with several tokens' activations, for every format.
pub trait ManyTokens: OneToken {
    /// Whether this level has SIMD eight-token kernels ([`ManyTokens::dot8_row32`] and the
    /// rest): worth unpacking rows and interleaving eight tokens for.
    fn has_eights(&self) -> bool {
        false
    }
    /// Whether this level has kernels of its own for four tokens' interleaved activations
    /// ([`ManyTokens::tokens4_q5_0_quads`] and the rest: VNNI).
    fn has_quads(&self) -> bool {
        false
    }
    /// One row with four tokens' activations: four `dot_q4_k` results, bit for bit. SIMD
    /// kernels unpack each weight block once for the four.
    fn tokens4_q4_k(&self, w: &[u8], a: [&[BlockQ8K]; 4]) -> [f32; 4] {
        a.map(|a| self.dot_q4_k(w, a))
    }
    fn tokens4_q6_k(&self, w: &[u8], a: [&[BlockQ8K]; 4]) -> [f32; 4] {
        a.map(|a| self.dot_q6_k(w, a))
    }
    fn tokens4_q5_0(&self, w: &[u8], a: [&[Q8_0Wide]; 4]) -> [f32; 4] {
        a.map(|a| self.dot_q5_0(w, a))
    }
    /// `tokens4_q5_0`, bit for bit, given also the same activations interleaved
    /// ([`ActQuads`]); kernels without a use for them ignore them.
    fn tokens4_q5_0_quads(&self, w: &[u8], quads: &ActQuads, a: [&[Q8_0Wide]; 4]) -> [f32; 4] {
        let _ = quads;
        self.tokens4_q5_0(w, a)
    }
    /// `tokens4_q4_k`, bit for bit, given also the activations interleaved ([`KQuads`]);
    /// `None` when this level has no such kernel.
    fn tokens4_q4_k_quads(
        &self,
        w: &[u8],
        quads: &KQuads,
        a: [&[BlockQ8K]; 4],
    ) -> Option<[f32; 4]> {
        let _ = (w, quads, a);
        None
    }
    /// Chapter 7's `dot4_q4_1_q8_1` for one Q4_1 row against four tokens, bit for bit, given
    /// the activations interleaved too; `None` when this level has no such kernel.
    fn tokens4_q4_1_quads(
        &self,
        w: &[u8],
        quads: &ActQuads,
        a: [&[BlockQ8_1]; 4],
    ) -> Option<[f32; 4]> {
        let _ = (w, quads, a);
        None
    }
    /// Q4_0, Q5_0 or Q4_1 rows unpacked for [`ManyTokens::dot8_row32`].
    fn unpack_rows32(&self, format: Q32, rows: &[&[u8]], out: &mut Rows32) {
        out.unpack(format.format().block_bytes(), rows, |b| {
            eights::unpack_block(format, b)
        });
    }
    /// One unpacked Q4_0, Q5_0 or Q4_1 row against eight tokens: the scalar kernel's eight dots,
    /// bit for bit.
    fn dot8_row32(&self, format: Q32, row: &[Block32], a: &Eights) -> [f32; 8] {
        eights::dot8_row32(format, row, a)
    }
    /// One Q4_0, Q5_0 or Q4_1 row as it lies in the file against eight tokens, each block
    /// unpacked as it is met: [`ManyTokens::dot8_row32`]'s numbers without an unpacked copy.
    fn dot8_raw32(&self, format: Q32, w: &[u8], a: &Eights) -> [f32; 8] {
        let row: Vec<Block32> = w
            .chunks_exact(format.format().block_bytes())
            .map(|b| eights::unpack_block(format, b))
            .collect();
        self.dot8_row32(format, &row, a)
    }
    /// Four unpacked rows against the same eight tokens: [`ManyTokens::dot8_row32`] of each,
    /// bit for bit; SIMD kernels load each step's activations once for the four.
    fn dot8x4_row32(&self, format: Q32, rows: [&[Block32]; 4], a: &Eights) -> [[f32; 8]; 4] {
        rows.map(|row| self.dot8_row32(format, row, a))
    }
    /// Four unpacked rows against two eights of tokens: row `r`'s lanes 0..8 are
    /// [`ManyTokens::dot8x4_row32`]`(format, rows, a[0])[r]`, lanes 8..16 the same for `a[1]`.
    /// Levels with 512-bit registers take both eights in one.
    fn dot16x4_row32(&self, format: Q32, rows: [&[Block32]; 4], a: [&Eights; 2]) -> [[f32; 16]; 4] {
        row32_by_eights(self, format, rows, a)
    }
    /// Eight unpacked rows against two eights of tokens: [`ManyTokens::dot16x4_row32`] of
    /// rows 0..4 and 4..8, bit for bit. Levels with 512-bit registers and VNNI take the
    /// eight rows together (eight multiply-add chains in flight, each activation load shared
    /// by eight rows).
    fn dot16x8_row32(&self, format: Q32, rows: [&[Block32]; 8], a: [&Eights; 2]) -> [[f32; 16]; 8] {
        row32_by_fours(self, format, rows, a)
    }
    /// Q4_K (or Q6_K) rows unpacked for [`ManyTokens::dot8_q4_k`] (`dot8_q6_k`).
    fn unpack_rows_k(&self, format: KQuant, rows: &[&[u8]], out: &mut RowsK) {
        match format {
            KQuant::Q4_K => out.unpack(Q4_K_BYTES, rows, eights_k::unpack_q4_k),
            KQuant::Q6_K => out.unpack(Q6_K_BYTES, rows, eights_k::unpack_q6_k),
        }
    }
    /// Rows `rows` of a packed Q4_0, Q4_1 or Q5_0 matrix unpacked for
    /// [`ManyTokens::dot8_row32`]: [`Packed::unpack_rows32`]'s blocks, which this default
    /// returns. SIMD levels gather each row's bytes out of the groups.
    fn unpack_packed32(&self, p: &Packed, rows: Range<usize>, out: &mut Rows32) {
        p.unpack_rows32(rows, out);
    }
    /// Rows `rows` of a packed Q4_K or Q6_K matrix unpacked for [`ManyTokens::dot8_q4_k`]
    /// (`dot8_q6_k`): [`ManyTokens::unpack_rows_k`] of the rows [`Packed::tile`] takes back
    /// out of the groups, which is how this default makes them. SIMD levels gather each
    /// row's bytes out of the groups as they unpack it, without the copy in between.
    fn unpack_packed_k(&self, p: &Packed, rows: Range<usize>, out: &mut RowsK) {
        let Packable::K(kquant) = p.layout else {
            panic!("unpack_packed_k: {} is not Q4_K or Q6_K", p.format.name())
        };
        let mut tile = Vec::new();
        self.unpack_rows_k(kquant, &p.tile(rows, &mut tile), out);
    }
    /// Row `i` of unpacked Q4_K rows against eight tokens: eight `dot_q4_k`s, bit for bit.
    fn dot8_q4_k(&self, rows: &RowsK, i: usize, a: &EightsK) -> [f32; 8] {
        eights_k::dot8_q4_k(rows, i, a)
    }
    /// Row `i` of unpacked Q6_K rows against eight tokens: eight `dot_q6_k`s, bit for bit.
    fn dot8_q6_k(&self, rows: &RowsK, i: usize, a: &EightsK) -> [f32; 8] {
        eights_k::dot8_q6_k(rows, i, a)
    }
    /// Rows `i..i + 4` against the same eight tokens: [`ManyTokens::dot8_q4_k`] of each, bit
    /// for bit; SIMD kernels load each step's activations once for the four.
    fn dot8x4_q4_k(&self, rows: &RowsK, i: usize, a: &EightsK) -> [[f32; 8]; 4] {
        std::array::from_fn(|j| self.dot8_q4_k(rows, i + j, a))
    }
    /// Rows `i..i + 4`: [`ManyTokens::dot8_q6_k`] of each, bit for bit.
    fn dot8x4_q6_k(&self, rows: &RowsK, i: usize, a: &EightsK) -> [[f32; 8]; 4] {
        std::array::from_fn(|j| self.dot8_q6_k(rows, i + j, a))
    }
    /// Rows `i..i + 4` of unpacked Q4_K (or Q6_K) rows against two eights of tokens:
    /// lanes 0..8 of row `r` are [`ManyTokens::dot8x4_q4_k`]'s (`dot8x4_q6_k`'s) for `a[0]`,
    /// lanes 8..16 for `a[1]`. Levels with 512-bit registers take both eights in one.
    fn dot16x4_k(
        &self,
        format: KQuant,
        rows: &RowsK,
        i: usize,
        a: [&EightsK; 2],
    ) -> [[f32; 16]; 4] {
        k_by_eights(self, format, rows, i, a)
    }
    /// One Q8_0 row (its bytes as in the file) against eight tokens: eight of chapter 6's
    /// `dot_q8_0_q8_0`, bit for bit ([`crate::layout::eights_q8_0`]).
    fn dot8_q8_0(&self, w: &[u8], a: &Eights) -> [f32; 8] {
        crate::layout::eights_q8_0::dot8_q8_0(w, a)
    }
    /// Two eights of tokens against one Q8_0 row: [`ManyTokens::dot8_q8_0`] of each, the
    /// first eight's in lanes 0..8. Levels with wider registers take both eights per step.
    fn dot16_q8_0(&self, w: &[u8], a: [&Eights; 2]) -> [f32; 16] {
        two_eights(self.dot8_q8_0(w, a[0]), self.dot8_q8_0(w, a[1]))
    }
    /// Asks the caches for the row after the next one, where rows lie one after another as
    /// `row` does with its neighbours (the rows of a matrix in the file): the few-token Q8_0
    /// products meet each row once, and a row's bytes then arrive before its turn. Nothing
    /// on levels without a prefetch instruction; a prefetch never faults, wherever it points.
    fn fetch_row_after_next(&self, row: &[u8]) {
        let _ = row;
    }
    /// Two Q8_0 rows against the first four tokens of an eight: lanes 0..4 row 0's, 4..8
    /// row 1's, each [`ManyTokens::dot8_q8_0`]'s for its token, bit for bit.
    fn dot2x4_q8_0(&self, w: [&[u8]; 2], a: &Eights) -> [f32; 8] {
        let (x, y) = (self.dot8_q8_0(w[0], a), self.dot8_q8_0(w[1], a));
        std::array::from_fn(|l| if l < 4 { x[l] } else { y[l - 4] })
    }
    /// Q8_0 rows (their bytes as in the file) against eights of tokens, row `i`'s lanes for
    /// eight `g` put into `out` ([`ByToken::put`]): [`ManyTokens::dot8_q8_0`] of each, bit for
    /// bit, here through `q8_0_rows_with_half`. `tokens` is how many are real: a last
    /// eight padded past them may get anything in its lanes for the others.
    fn q8_0_rows_by_eights(
        &self,
        rows: &[&[u8]],
        groups: &[Eights],
        tokens: usize,
        out: &mut ByToken,
    ) {
        q8_0_rows_with_half(self, rows, groups, tokens, out);
    }
    /// From this many tokens past a whole eight, a Q8_0 matrix (an LM head) takes them in one
    /// more eight, padded with copies of the last token, rather than four at a time and then
    /// one by one: a padded eight costs as much as eight tokens, so it pays from about half
    /// an eight (the CHANGELOG has the measurement behind four).
    fn q8_0_pad_from(&self) -> usize {
        4
    }
    /// A group of eight interleaved rows ([`crate::layout::packed::Packed`]) against
    /// one or more tokens: `out[t][r]` is chapter 6's dot of row `r` and token `t`.
    fn packed8(&self, group: &[u8], tokens: &[PackedToken], out: &mut [[f32; 8]]) {
        crate::layout::packed_dot::packed8_scalar(group, tokens, out)
    }
}
// ANCHOR_END: many_tokens

/// Where a product of rows against eights of tokens leaves its results: row `i`'s result
/// for token `t` goes to `rows[t][first + i]`, one output row per token. A padded last
/// eight's lanes past the last token are dropped. A plain type rather than a callback, so
/// that a kernel's every row stores its lanes directly (a `&mut dyn FnMut` here was a call
/// per row and eight tokens: half a million a step for Gemma-3's LM head at sixteen
/// sequences).
pub struct ByToken<'a, 'b> {
    rows: &'a mut [&'b mut [f32]],
    first: usize,
}

impl<'a, 'b> ByToken<'a, 'b> {
    /// Results into `rows`, one output row per token, from index 0.
    pub fn new(rows: &'a mut [&'b mut [f32]]) -> Self {
        ByToken { rows, first: 0 }
    }

    /// The same outputs, row `i` put at `first + i`: a kernel that takes rows from `first` on.
    pub fn from_row(&mut self, first: usize) -> ByToken<'_, 'b> {
        ByToken {
            rows: &mut *self.rows,
            first: self.first + first,
        }
    }

    /// Row `i`'s lanes for eight `g`: lane `l` is token `8g + l`'s.
    #[inline]
    pub fn put(&mut self, g: usize, i: usize, lanes: [f32; 8]) {
        let at = self.first + i;
        for (o, v) in self.rows[8 * g..].iter_mut().zip(lanes) {
            o[at] = v;
        }
    }
}

/// [`ManyTokens::q8_0_rows_by_eights`] a row at a time against two eights at once
/// ([`ManyTokens::dot16_q8_0`]), then against the last eight alone.
pub(crate) fn q8_0_rows_in_pairs<K: ManyTokens + ?Sized>(
    kk: &K,
    rows: &[&[u8]],
    groups: &[Eights],
    out: &mut ByToken,
) {
    let pairs = groups.len() / 2;
    for (p, two) in groups.chunks_exact(2).enumerate() {
        for (i, w) in rows.iter().enumerate() {
            kk.fetch_row_after_next(w);
            let v = kk.dot16_q8_0(w, [&two[0], &two[1]]);
            out.put(2 * p, i, v[..8].try_into().expect("eight lanes"));
            out.put(2 * p + 1, i, v[8..].try_into().expect("eight lanes"));
        }
    }
    if let Some(a) = groups.get(2 * pairs) {
        for (i, w) in rows.iter().enumerate() {
            kk.fetch_row_after_next(w);
            out.put(2 * pairs, i, kk.dot8_q8_0(w, a));
        }
    }
}

/// [`q8_0_rows_in_pairs`], except that a last eight with four real tokens or fewer (of
/// `tokens`) goes two rows at a time through [`ManyTokens::dot2x4_q8_0`], and its lanes past
/// the fourth are zero.
pub(crate) fn q8_0_rows_with_half<K: ManyTokens + ?Sized>(
    kk: &K,
    rows: &[&[u8]],
    groups: &[Eights],
    tokens: usize,
    out: &mut ByToken,
) {
    let last = groups.len().saturating_sub(1);
    if groups.is_empty() || tokens <= 8 * last || tokens - 8 * last > 4 {
        return q8_0_rows_in_pairs(kk, rows, groups, out);
    }
    q8_0_rows_in_pairs(kk, rows, &groups[..last], out);
    let a = &groups[last];
    for (p, two) in rows.chunks_exact(2).enumerate() {
        two.iter().for_each(|w| kk.fetch_row_after_next(w)); // the next pair's rows
        let v = kk.dot2x4_q8_0([two[0], two[1]], a);
        for h in 0..2 {
            // this row's four lanes first, the rest of its eight zero
            let lanes = std::array::from_fn(|l| if l < 4 { v[4 * h + l] } else { 0.0 });
            out.put(last, 2 * p + h, lanes);
        }
    }
    if rows.len() % 2 == 1 {
        out.put(last, rows.len() - 1, kk.dot8_q8_0(rows[rows.len() - 1], a));
    }
}

/// Two eights' lanes as sixteen, the first eight's first.
/// [`ManyTokens::dot16x4_row32`] as two calls of the eight-token kernel.
pub(crate) fn row32_by_eights<K: ManyTokens + ?Sized>(
    k: &K,
    format: Q32,
    rows: [&[Block32]; 4],
    a: [&Eights; 2],
) -> [[f32; 16]; 4] {
    let x = a.map(|a| k.dot8x4_row32(format, rows, a));
    std::array::from_fn(|r| two_eights(x[0][r], x[1][r]))
}

/// [`ManyTokens::dot16x8_row32`] as two calls of the four-row kernel.
pub(crate) fn row32_by_fours<K: ManyTokens + ?Sized>(
    k: &K,
    format: Q32,
    rows: [&[Block32]; 8],
    a: [&Eights; 2],
) -> [[f32; 16]; 8] {
    let [r0, r1, r2, r3, r4, r5, r6, r7] = rows;
    let (lo, hi) = (
        k.dot16x4_row32(format, [r0, r1, r2, r3], a),
        k.dot16x4_row32(format, [r4, r5, r6, r7], a),
    );
    std::array::from_fn(|r| if r < 4 { lo[r] } else { hi[r - 4] })
}

/// [`ManyTokens::dot16x4_k`] as two calls of the eight-token kernel.
pub(crate) fn k_by_eights<K: ManyTokens + ?Sized>(
    k: &K,
    format: KQuant,
    rows: &RowsK,
    i: usize,
    a: [&EightsK; 2],
) -> [[f32; 16]; 4] {
    let x = a.map(|a| match format {
        KQuant::Q4_K => k.dot8x4_q4_k(rows, i, a),
        KQuant::Q6_K => k.dot8x4_q6_k(rows, i, a),
    });
    std::array::from_fn(|r| two_eights(x[0][r], x[1][r]))
}

pub(crate) fn two_eights(x: [f32; 8], y: [f32; 8]) -> [f32; 16] {
    std::array::from_fn(|t| if t < 8 { x[t] } else { y[t - 8] })
}

/// Chapter 6's scalar kernels: every product the plain Rust of [`crate::layout`].
impl OneToken for Scalar {}
impl ManyTokens for Scalar {}

/// The shape of a `dot_f32_rows_many` call, `(n, g)`: `n` rows of `d` floats in `rows`, `g`
/// queries of `d` in `qs`, `g · n` outputs in `out`; `None` when there are no rows. Panics
/// when the three lengths disagree. Every SIMD level checks it here before it picks a
/// kernel by `g`.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) fn rows_many_shape(
    qs: &[f32],
    d: usize,
    rows: &[f32],
    out: &[f32],
) -> Option<(usize, usize)> {
    let n = rows.len() / d.max(1);
    if n == 0 {
        return None;
    }
    let g = out.len() / n;
    assert!(
        n * d == rows.len() && g * d == qs.len() && g * n == out.len(),
        "dot_f32_rows_many: qs is (G, d), rows (n, d), out (G, n)"
    );
    Some((n, g))
}
