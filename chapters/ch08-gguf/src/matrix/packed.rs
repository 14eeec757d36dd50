//! Q4_0 and Q4_1 matrices with eight rows' blocks interleaved at load time, so that a
//! kernel finds each of the eight rows in its own lane of a vector without folding them.
//!
//! In the file, row `r`'s blocks lie one after another, and a kernel that takes eight rows
//! at a time reads eight streams and folds eight vectors of partial sums into one vector of
//! eight sums per block ([`crate::ksimd`]'s `fold8`). Here a *group* of eight rows is stored
//! block by block: for block `b`, the eight rows' scales side by side (Q4_1: then their
//! minimums), then their 16 bytes of nibbles in four chunks of 32 bytes, chunk `c` holding
//! bytes `4c..4c + 4` of row 0, then of row 1, ... row 7:
//!
//! ```text
//! group g, block b:  d0 d1 .. d7 | (m0 .. m7) | r0[0..4] r1[0..4] .. r7[0..4] | r0[4..8] .. | r0[8..12] .. | r0[12..16] .. r7[12..16]
//! ```
//!
//! A 32-bit lane of a chunk is then four bytes of one row: the low nibbles are four of its
//! elements, the high nibbles the four 16 further on, and one broadcast of the token's
//! matching four quants multiplies all eight rows at once. The same bytes as the file, in
//! another order: the matrix takes no more memory than before.

use ch06_quantization::blocks::{BlockQ4_0, BlockQ4_1, BlockQ8_0, BlockQ8_1, QK};
use ch06_quantization::f16::f16_to_f32_fast;
use ch06_quantization::matrix::{Bytes, Format};
use ch06_quantization::{Kernels, QMatrix};
use rayon::prelude::*;

/// Rows in a group.
pub const GROUP: usize = 8;

/// A Q4_0 or Q4_1 matrix whose rows are stored eight at a time, interleaved (see the
/// module's comment). Its products give every output the bits chapter 6's scalar kernel
/// gives it.
pub struct Packed {
    pub format: Format,
    pub rows: usize,
    pub cols: usize,
    data: Vec<u8>,
}

/// One token's activations for a packed product: Q4_0's Q8_0 blocks with each block's
/// integer sum `Σ a` (the kernels take `8 · Σ a` off each row's `Σ q · a`), or Q4_1's Q8_1
/// blocks (which carry `d · Σ a`).
#[derive(Clone, Copy)]
pub enum PackedToken<'a> {
    Q4_0(&'a [BlockQ8_0], &'a [i32]),
    Q4_1(&'a [BlockQ8_1]),
}

impl PackedToken<'_> {
    /// The weights' format these activations go with.
    pub fn format(&self) -> Format {
        match self {
            PackedToken::Q4_0(..) => Format::Q4_0,
            PackedToken::Q4_1(_) => Format::Q4_1,
        }
    }
    /// Activation blocks.
    pub fn blocks(&self) -> usize {
        match self {
            PackedToken::Q4_0(a, s) => a.len().min(s.len()),
            PackedToken::Q4_1(a) => a.len(),
        }
    }
}

/// Bytes of one block's scales (and Q4_1's minimums) for eight rows.
pub fn head_bytes(format: Format) -> usize {
    match format {
        Format::Q4_1 => 4 * GROUP,
        _ => 2 * GROUP,
    }
}

/// Bytes of one block of a group: eight rows' blocks.
pub fn group_block_bytes(format: Format) -> usize {
    head_bytes(format) + GROUP * QK / 2
}

impl Packed {
    /// `rows` rows of `cols` weights as the file stores them (`src`), interleaved eight at
    /// a time; `None` for a format other than Q4_0 and Q4_1, or rows that are not whole
    /// groups of eight (those matrices stay as stored).
    pub fn new(format: Format, rows: usize, cols: usize, src: &[u8]) -> Option<Packed> {
        let block = match format {
            Format::Q4_0 => BlockQ4_0::BYTES,
            Format::Q4_1 => BlockQ4_1::BYTES,
            _ => return None,
        };
        let nb = cols / QK;
        if rows == 0 || !rows.is_multiple_of(GROUP) || cols != nb * QK {
            return None;
        }
        let row_len = nb * block;
        if rows.checked_mul(row_len) != Some(src.len()) {
            return None;
        }
        let head = head_bytes(format);
        let quants = block - QK / 2; // the scale (and Q4_1's minimum) come first
        let mut data = vec![0u8; src.len()];
        // the groups on every thread: a 7B file's are four gigabytes
        let groups = data.par_chunks_exact_mut(GROUP * row_len);
        groups
            .zip(src.par_chunks_exact(GROUP * row_len))
            .for_each(|(out, rows)| {
                for (b, o) in out.chunks_exact_mut(GROUP * block).enumerate() {
                    for r in 0..GROUP {
                        let blk = &rows[r * row_len + b * block..][..block];
                        // d (and Q4_1's m) of row r in lane r of the head
                        for (k, pair) in blk[..quants].chunks_exact(2).enumerate() {
                            o[k * 2 * GROUP + 2 * r..][..2].copy_from_slice(pair);
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
        let (head, nb) = (head_bytes(self.format), self.cols / QK);
        let scale_bytes = head / GROUP;
        let (g, lane) = (r / GROUP, r % GROUP);
        let mut row = Vec::with_capacity(nb * (scale_bytes + QK / 2));
        for blk in self.group(g).chunks_exact(group_block_bytes(self.format)) {
            for k in 0..scale_bytes / 2 {
                row.extend_from_slice(&blk[k * 2 * GROUP + 2 * lane..][..2]);
            }
            for c in 0..4 {
                row.extend_from_slice(&blk[head + 32 * c + 4 * lane..][..4]);
            }
        }
        row
    }

    /// Row `r` as f32: chapter 6's dequantization of the row's blocks.
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let one = QMatrix::from_blocks(
            self.format,
            1,
            self.cols,
            Bytes::from_vec(self.row_bytes(r)),
        )
        .expect("a row of whole blocks");
        one.dequantize_row(0, out);
    }

    /// Activations for this matrix, as chapter 6 quantizes them for its format.
    pub fn quantize(&self, k: &dyn Kernels, x: &[f32]) -> ch06_quantization::matrix::Activations {
        use ch06_quantization::matrix::Activations;
        let blocks = x.len() / QK;
        match self.format {
            Format::Q4_1 => {
                let mut a = Vec::with_capacity(blocks);
                k.quantize_q8_1(x, &mut a);
                Activations::Q8_1(a)
            }
            _ => {
                let mut a = Vec::with_capacity(blocks);
                k.quantize_q8_0(x, &mut a);
                Activations::Q8_0(a)
            }
        }
    }
}

// ANCHOR: packed8_scalar
/// Eight rows of a group (`group`: its blocks) against one to four tokens, `out[t][r]` row
/// `r`'s sum for token `t`: each row's integer sum per block, then chapter 6's float step
/// in its order, so every output has the bits of `dot_q4_0_q8_0` / `dot_q4_1_q8_1`.
pub fn packed8_scalar(group: &[u8], tokens: &[PackedToken], out: &mut [[f32; 8]]) {
    let Some(first) = tokens.first() else { return };
    let format = first.format();
    let (head, bb) = (head_bytes(format), group_block_bytes(format));
    let f16 = |b: &[u8], i: usize| f16_to_f32_fast(u16::from_le_bytes([b[2 * i], b[2 * i + 1]]));
    for (tok, o) in tokens.iter().zip(out.iter_mut()) {
        assert!(
            tok.format() == format && tok.blocks() * bb == group.len(),
            "a group's blocks, one per activation block, one format"
        );
        *o = [0.0; 8];
        for (b, blk) in group.chunks_exact(bb).enumerate() {
            let qs = match tok {
                PackedToken::Q4_0(a, _) => &a[b].qs,
                PackedToken::Q4_1(a) => &a[b].qs,
            };
            for (r, sum) in o.iter_mut().enumerate() {
                let mut sumi = 0i32;
                for c in 0..4 {
                    for k in 0..4 {
                        let byte = blk[head + 32 * c + 4 * r + k];
                        let j = 4 * c + k; // element j (low nibble) and j + 16 (high)
                        sumi += i32::from(byte & 0x0f) * i32::from(qs[j])
                            + i32::from(byte >> 4) * i32::from(qs[j + QK / 2]);
                    }
                }
                let d = f16(blk, r);
                *sum += match tok {
                    PackedToken::Q4_0(a, s) => (sumi - 8 * s[b]) as f32 * (d * a[b].scale()),
                    PackedToken::Q4_1(a) => {
                        (d * a[b].scale()) * sumi as f32 + f16(blk, GROUP + r) * a[b].sum()
                    }
                };
            }
        }
    }
}
// ANCHOR_END: packed8_scalar
