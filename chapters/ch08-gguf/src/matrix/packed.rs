//! Q4_0, Q4_1 and Q5_0 matrices with eight rows' blocks interleaved at load time, so that
//! a kernel finds each of the eight rows in its own lane of a vector without folding them.
//!
//! In the file, row `r`'s blocks lie one after another, and a kernel that takes eight rows
//! at a time reads eight streams and folds eight vectors of partial sums into one vector of
//! eight sums per block ([`crate::ksimd`]'s `fold8`). Here a *group* of eight rows is stored
//! block by block: for block `b`, the eight rows' scales side by side (then Q4_1's eight
//! minimums, or Q5_0's eight 32-bit masks of fifth bits), then their 16 bytes of nibbles in
//! four chunks of 32 bytes, chunk `c` holding bytes `4c..4c + 4` of row 0, then of row 1,
//! ... row 7:
//!
//! ```text
//! group g, block b:  d0 d1 .. d7 | (m0 .. m7 or qh0 .. qh7) | r0[0..4] r1[0..4] .. r7[0..4] | r0[4..8] .. | r0[8..12] .. | r0[12..16] .. r7[12..16]
//! ```
//!
//! A 32-bit lane of a chunk is then four bytes of one row: the low nibbles are four of its
//! elements, the high nibbles the four 16 further on, and one broadcast of the token's
//! matching four quants multiplies all eight rows at once. The same bytes as the file, in
//! another order: the matrix takes no more memory than before.

use ch06_quantization::blocks::{BlockQ8_0, BlockQ8_1, QK};
use ch06_quantization::f16::f16_to_f32_fast;
use ch06_quantization::matrix::{Activations, Bytes, Format};
use ch06_quantization::{Kernels, QMatrix};
use rayon::prelude::*;

use crate::kquant::{self, Q8_0Wide};

/// Rows in a group.
pub const GROUP: usize = 8;

/// The formats a [`Packed`] matrix holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PackedFormat {
    Q4_0,
    Q4_1,
    Q5_0,
}

impl PackedFormat {
    /// The name the format goes by elsewhere in the engine (chapter 6's, or chapter 8's
    /// `KFormat`'s).
    pub fn name(self) -> &'static str {
        match self {
            PackedFormat::Q4_0 => "q4_0",
            PackedFormat::Q4_1 => "q4_1",
            PackedFormat::Q5_0 => "Q5_0",
        }
    }
    /// The format as chapter 8's eight-token kernels name it.
    pub fn format32(self) -> crate::octs::Format32 {
        use crate::octs::Format32;
        match self {
            PackedFormat::Q4_0 => Format32::Q4_0,
            PackedFormat::Q4_1 => Format32::Q4_1,
            PackedFormat::Q5_0 => Format32::Q5_0,
        }
    }
    /// The sizes of a block's fields before its 16 bytes of nibbles: `d`, then Q4_1's `m`
    /// or Q5_0's 32-bit `qh`.
    fn fields(self) -> &'static [usize] {
        match self {
            PackedFormat::Q4_0 => &[2],
            PackedFormat::Q4_1 => &[2, 2],
            PackedFormat::Q5_0 => &[2, 4],
        }
    }
    /// Bytes of one row's block in the file.
    pub fn block_bytes(self) -> usize {
        self.fields().iter().sum::<usize>() + QK / 2
    }
    /// Bytes of one block's fields for eight rows, before the nibbles.
    pub fn head_bytes(self) -> usize {
        GROUP * self.fields().iter().sum::<usize>()
    }
    /// Bytes of one block of a group: eight rows' blocks.
    pub fn group_block_bytes(self) -> usize {
        GROUP * self.block_bytes()
    }
    /// Where field `f` of lane `r` lies in a group's block, and in a row's block.
    fn field_at(self, f: usize, r: usize) -> (usize, usize) {
        let before: usize = self.fields()[..f].iter().sum();
        (GROUP * before + self.fields()[f] * r, before)
    }
}

/// A Q4_0, Q4_1 or Q5_0 matrix whose rows are stored eight at a time, interleaved (see
/// the module's comment). Its products give every output the bits chapter 6's (Q5_0:
/// chapter 8's) scalar kernel gives it.
pub struct Packed {
    pub format: PackedFormat,
    pub rows: usize,
    pub cols: usize,
    data: Vec<u8>,
}

/// One token's activations for a packed product: Q4_0's Q8_0 blocks with each block's
/// integer sum `Σ a` (the kernels take `8 · Σ a` off each row's `Σ q · a`), Q4_1's Q8_1
/// blocks (which carry `d · Σ a`), or Q5_0's wide Q8_0 blocks (which carry `Σ a`).
#[derive(Clone, Copy)]
pub enum PackedToken<'a> {
    Q4_0(&'a [BlockQ8_0], &'a [i32]),
    Q4_1(&'a [BlockQ8_1]),
    Q5_0(&'a [Q8_0Wide]),
}

impl PackedToken<'_> {
    /// The weights' format these activations go with.
    pub fn format(&self) -> PackedFormat {
        match self {
            PackedToken::Q4_0(..) => PackedFormat::Q4_0,
            PackedToken::Q4_1(_) => PackedFormat::Q4_1,
            PackedToken::Q5_0(_) => PackedFormat::Q5_0,
        }
    }
    /// Activation blocks.
    pub fn blocks(&self) -> usize {
        match self {
            PackedToken::Q4_0(a, s) => a.len().min(s.len()),
            PackedToken::Q4_1(a) => a.len(),
            PackedToken::Q5_0(a) => a.len(),
        }
    }
    /// Block `b`'s 32 quants.
    fn quants(&self, b: usize) -> &[i8; QK] {
        match self {
            PackedToken::Q4_0(a, _) => &a[b].qs,
            PackedToken::Q4_1(a) => &a[b].qs,
            PackedToken::Q5_0(a) => &a[b].qs,
        }
    }
}

impl Packed {
    /// `rows` rows of `cols` weights as the file stores them (`src`), interleaved eight at
    /// a time; `None` for rows that are not whole groups of eight (those matrices stay as
    /// stored) or bytes that are not the rows.
    pub fn new(format: PackedFormat, rows: usize, cols: usize, src: &[u8]) -> Option<Packed> {
        let block = format.block_bytes();
        let nb = cols / QK;
        if rows == 0 || !rows.is_multiple_of(GROUP) || cols != nb * QK {
            return None;
        }
        let row_len = nb * block;
        if rows.checked_mul(row_len) != Some(src.len()) {
            return None;
        }
        let head = format.head_bytes();
        let quants = block - QK / 2; // the fields come first
        let mut data = vec![0u8; src.len()];
        // the groups on every thread: a 7B file's are four gigabytes
        let groups = data.par_chunks_exact_mut(GROUP * row_len);
        groups
            .zip(src.par_chunks_exact(GROUP * row_len))
            .for_each(|(out, rows)| {
                for (b, o) in out.chunks_exact_mut(GROUP * block).enumerate() {
                    for r in 0..GROUP {
                        let blk = &rows[r * row_len + b * block..][..block];
                        // each field of row r in lane r of the head
                        for (f, &size) in format.fields().iter().enumerate() {
                            let (at, from) = format.field_at(f, r);
                            o[at..at + size].copy_from_slice(&blk[from..from + size]);
                        }
                        for c in 0..4 {
                            o[head + 32 * c + 4 * r..][..4]
                                .copy_from_slice(&blk[quants + 4 * c..][..4]);
                        }
                    }
                }
            });
        Some(Packed {
            format,
            rows,
            cols,
            data,
        })
    }

    /// Bytes of weights.
    pub fn bytes(&self) -> usize {
        self.data.len()
    }

    /// Group `g`'s bytes: rows `8g..8g + 8`, block after block.
    pub fn group(&self, g: usize) -> &[u8] {
        let len = self.data.len() / (self.rows / GROUP);
        &self.data[g * len..(g + 1) * len]
    }

    /// Row `r` as the file stored it (its blocks, taken back out of the interleaving).
    pub fn row_bytes(&self, r: usize) -> Vec<u8> {
        let mut row = Vec::new();
        self.rows_into(r..r + 1, &mut row);
        row
    }

    /// Rows `rows` as the file stored them, back to back in `out` (a prefill's tile of
    /// rows, taken out of the groups for the eight-token kernels, which unpack them).
    pub fn rows_into(&self, rows: std::ops::Range<usize>, out: &mut Vec<u8>) {
        let f = self.format;
        let (bb, head, nb) = (f.block_bytes(), f.head_bytes(), self.cols / QK);
        out.clear();
        out.resize(rows.len() * nb * bb, 0);
        for (r, row) in rows.zip(out.chunks_exact_mut(nb * bb)) {
            let lane = r % GROUP;
            let blocks = self.group(r / GROUP).chunks_exact(f.group_block_bytes());
            for (blk, o) in blocks.zip(row.chunks_exact_mut(bb)) {
                for (i, &size) in f.fields().iter().enumerate() {
                    let (at, to) = f.field_at(i, lane);
                    o[to..to + size].copy_from_slice(&blk[at..at + size]);
                }
                let quants = &mut o[bb - QK / 2..];
                for (c, q) in quants.chunks_exact_mut(4).enumerate() {
                    q.copy_from_slice(&blk[head + 32 * c + 4 * lane..][..4]);
                }
            }
        }
    }

    /// Row `r` as f32: chapter 6's (Q5_0: chapter 8's) dequantization of the row's blocks.
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let row = self.row_bytes(r);
        let format = match self.format {
            PackedFormat::Q5_0 => {
                let blocks = row.chunks_exact(self.format.block_bytes());
                for (o, b) in out.chunks_exact_mut(QK).zip(blocks) {
                    kquant::dequantize_q5_0(b, o.try_into().expect("32 values"));
                }
                return;
            }
            PackedFormat::Q4_0 => Format::Q4_0,
            PackedFormat::Q4_1 => Format::Q4_1,
        };
        let one = QMatrix::from_blocks(format, 1, self.cols, Bytes::from_vec(row))
            .expect("a row of whole blocks");
        one.dequantize_row(0, out);
    }

    /// One token's activations for this matrix, as chapter 6 (Q5_0: chapter 8) quantizes
    /// them for its format.
    pub fn quantize(&self, k: &dyn Kernels, x: &[f32]) -> Activations {
        if self.format == PackedFormat::Q4_1 {
            let mut a = Vec::with_capacity(x.len() / QK);
            k.quantize_q8_1(x, &mut a);
            Activations::Q8_1(a)
        } else {
            let mut a = Vec::with_capacity(x.len() / QK);
            k.quantize_q8_0(x, &mut a);
            Activations::Q8_0(a)
        }
    }
}

// ANCHOR: packed8_scalar
/// Eight rows of a group (`group`: its blocks) against one or more tokens, `out[t][r]` row
/// `r`'s sum for token `t`: each row's integer sum per block, then the scalar kernel's float
/// step in its order, so every output has the bits of chapter 6's `dot_q4_0_q8_0` and
/// `dot_q4_1_q8_1`, or chapter 8's `dot_q5_0_q8_0`.
pub fn packed8_scalar(group: &[u8], tokens: &[PackedToken], out: &mut [[f32; 8]]) {
    let Some(first) = tokens.first() else { return };
    let format = first.format();
    let (head, bb) = (format.head_bytes(), format.group_block_bytes());
    let f16 = |b: &[u8], at: usize| f16_to_f32_fast(u16::from_le_bytes([b[at], b[at + 1]]));
    for (tok, o) in tokens.iter().zip(out.iter_mut()) {
        assert!(
            tok.format() == format && tok.blocks() * bb == group.len(),
            "a group's blocks, one per activation block, one format"
        );
        *o = [0.0; 8];
        for (b, blk) in group.chunks_exact(bb).enumerate() {
            let qs = tok.quants(b);
            for (r, sum) in o.iter_mut().enumerate() {
                // Q5_0's fifth bits: bit j of row r's qh belongs to element j
                let qh = match format {
                    PackedFormat::Q5_0 => {
                        let (at, _) = format.field_at(1, r);
                        u32::from_le_bytes(blk[at..at + 4].try_into().expect("4 bytes"))
                    }
                    _ => 0,
                };
                let fifth = |j: usize| (((qh >> j) & 1) << 4) as i32;
                let mut sumi = 0i32;
                for c in 0..4 {
                    for k in 0..4 {
                        let byte = blk[head + 32 * c + 4 * r + k];
                        let j = 4 * c + k; // element j (low nibble) and j + 16 (high)
                        sumi += (i32::from(byte & 0x0f) | fifth(j)) * i32::from(qs[j])
                            + (i32::from(byte >> 4) | fifth(j + 16)) * i32::from(qs[j + QK / 2]);
                    }
                }
                let d = f16(blk, 2 * r);
                *sum += match tok {
                    PackedToken::Q4_0(a, s) => (sumi - 8 * s[b]) as f32 * (d * a[b].scale()),
                    PackedToken::Q4_1(a) => {
                        let m = f16(blk, format.field_at(1, r).0);
                        (d * a[b].scale()) * sumi as f32 + m * a[b].sum()
                    }
                    PackedToken::Q5_0(a) => d * a[b].d * (sumi - 16 * a[b].sum) as f32,
                };
            }
        }
    }
}
// ANCHOR_END: packed8_scalar
