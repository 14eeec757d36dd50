//! Q4_0, Q4_1, Q5_0, Q4_K and Q6_K matrices with eight rows' blocks interleaved at load
//! time, so that a kernel finds each of the eight rows in its own lane of a vector without
//! folding them.
//!
//! In the file, row `r`'s blocks lie one after another, and a kernel that takes eight rows
//! at a time reads eight streams and folds eight vectors of partial sums into one vector of
//! eight sums per block (`fold8`, in `kernels/avx2_rows8_q4_q8.rs`). Here a *group* of eight rows is stored
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
//!
//! The K-quants' blocks of 256 are grouped the same way: their f16 fields side by side
//! (Q4_K's `d` and `dmin`, Q6_K's `d`), then everything else in chunks of four bytes a row:
//! Q4_K's 12 bytes of 6-bit scales and mins (three chunks) and 128 of nibbles; Q6_K's
//! scales, `ql` and `qh`, in the order its kernel reads them ([`GroupLayout::chunk_of`]).

use ch06_quantization::blocks::QK;
use ch06_quantization::matrix::{ActFormat, Activations, Bytes, Format, KQuant, Packable, Q32};
use ch06_quantization::{Kernels, QMatrix};
use rayon::prelude::*;
use std::sync::Arc;

use crate::huge::{Arena, Piece};
use crate::layout::eights::{Block32, Rows32};
use crate::layout::kquant;
use ch06_quantization::f16::f16_to_f32_fast as f16;

/// Rows in a group.
pub const GROUP: usize = 8;

/// The low nibble of each of sixteen bytes.
const LOW_NIBBLES: u128 = 0x0f0f_0f0f_0f0f_0f0f_0f0f_0f0f_0f0f_0f0f;

/// For each byte `b` of Q5_0's fifth bits, eight bytes, byte `k` holding 16 if bit `k` of
/// `b` is set: the bits ORed onto eight quants at once.
const SPREAD: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut b = 0;
    while b < 256 {
        let mut k = 0;
        while k < 8 {
            if b >> k & 1 == 1 {
                t[b] |= 16 << (8 * k);
            }
            k += 1;
        }
        b += 1;
    }
    t
};

/// Where each field of a format's block lies in a group of eight rows (see the module's
/// comment): for the formats [`can_pack`] says yes to, chapter 6's [`Packable`].
pub trait GroupLayout: Copy {
    /// Whether the format is one of llama.cpp's K-quants (blocks of 256, Q8_K activations).
    fn is_k(self) -> bool;
    /// The fields of a row's block that a group keeps side by side in its head.
    fn fields(self) -> &'static [(usize, usize)];
    /// The rest of a row's block, stored in chunks of four bytes a row, as (offset, bytes).
    fn chunked(self) -> (usize, usize);
    /// Bytes of one block's fields for eight rows, before the chunks.
    fn head_bytes(self) -> usize;
    /// Bytes of one block of a group: eight rows' blocks.
    fn group_block_bytes(self) -> usize;
    /// Where field `f` of lane `r` lies in a group's block, and in a row's block.
    fn field_at(self, f: usize, r: usize) -> (usize, usize);
    /// Lane `r`'s place in a group's block.
    fn lane(self, r: usize) -> Lane;
    /// Which four bytes of a row's chunked run a group stores as its chunk `c`.
    fn chunk_of(self, c: usize) -> usize;
}

/// Whether matrices of `format` can be packed: Q4_0, Q4_1, Q5_0, Q4_K and Q6_K.
pub fn can_pack(format: Format) -> bool {
    format.packable().is_some()
}

impl GroupLayout for Packable {
    /// Whether the format is one of llama.cpp's K-quants (blocks of 256, Q8_K activations).
    fn is_k(self) -> bool {
        matches!(self, Packable::K(_))
    }
    /// The fields of a row's block that a group keeps side by side in its head, as (offset
    /// in the row's block, bytes): `d`, then Q4_1's `m`, Q5_0's 32-bit `qh` or Q4_K's
    /// `dmin`; Q6_K's `d` comes last in its block.
    fn fields(self) -> &'static [(usize, usize)] {
        match self {
            Packable::Q32(Q32::Q4_0) => &[(0, 2)],
            Packable::Q32(Q32::Q4_1) | Packable::K(KQuant::Q4_K) => &[(0, 2), (2, 2)],
            Packable::Q32(Q32::Q5_0) => &[(0, 2), (2, 4)],
            Packable::K(KQuant::Q6_K) => &[(208, 2)],
        }
    }
    /// The rest of a row's block, which a group stores in chunks of four bytes a row, as
    /// (offset, bytes): the 16 bytes of nibbles; Q4_K's 12 bytes of sub-block scales and
    /// its 128 of nibbles; Q6_K's 128 bytes of low nibbles, 64 of high bits and 16 scales.
    fn chunked(self) -> (usize, usize) {
        match self {
            Packable::Q32(Q32::Q4_0) => (2, QK / 2),
            Packable::Q32(Q32::Q4_1) => (4, QK / 2),
            Packable::Q32(Q32::Q5_0) => (6, QK / 2),
            Packable::K(KQuant::Q4_K) => (4, 12 + kquant::QK_K / 2),
            Packable::K(KQuant::Q6_K) => (0, 208),
        }
    }
    /// Bytes of one block's fields for eight rows, before the chunks.
    fn head_bytes(self) -> usize {
        GROUP * self.fields().iter().map(|f| f.1).sum::<usize>()
    }
    /// Bytes of one block of a group: eight rows' blocks.
    fn group_block_bytes(self) -> usize {
        GROUP * self.format().block_bytes()
    }
    /// Where field `f` of lane `r` lies in a group's block, and in a row's block.
    fn field_at(self, f: usize, r: usize) -> (usize, usize) {
        let before: usize = self.fields()[..f].iter().map(|f| f.1).sum();
        let (from, size) = self.fields()[f];
        (GROUP * before + size * r, from)
    }
    /// Where lane `r`'s block lies in a group's block, for the copies between the two: each
    /// field's (offset in the group's block, offset in a row's block, bytes), and the offset
    /// in a row's block of each of the group's chunks, whose four bytes for lane `r` lie at
    /// `head_bytes + 32c + 4r`.
    fn lane(self, r: usize) -> Lane {
        let fields = (0..self.fields().len())
            .map(|f| {
                let (at, from) = self.field_at(f, r);
                (at, from, self.fields()[f].1)
            })
            .collect();
        let (from, len) = self.chunked();
        let chunks = (0..len / 4).map(|c| from + 4 * self.chunk_of(c)).collect();
        Lane {
            fields,
            chunks,
            at: self.head_bytes() + 4 * r,
        }
    }
    // ANCHOR: chunk_of
    /// Which four bytes of a row's chunked run (`4k..4k + 4`: `k`) a group stores as its
    /// chunk `c`: the next the kernel reads. Q6_K's kernel reads a block's scales first,
    /// then, for each half `h` and `k` in 0..8, chunk `k` of the half's first 32 bytes of
    /// `ql`, of its next 32, and of its 32 of `qh`: stored in that order, a group is read
    /// front to back, which the memory's prefetchers follow.
    fn chunk_of(self, c: usize) -> usize {
        match self {
            Packable::K(KQuant::Q6_K) if c < 4 => 48 + c,
            Packable::K(KQuant::Q6_K) => {
                let (h, k, part) = ((c - 4) / 24, (c - 4) % 24 / 3, (c - 4) % 3);
                [16 * h + k, 16 * h + 8 + k, 32 + 8 * h + k][part]
            }
            Packable::Q32(Q32::Q4_0 | Q32::Q4_1 | Q32::Q5_0) | Packable::K(KQuant::Q4_K) => c,
        }
    }
    // ANCHOR_END: chunk_of
}

/// One lane's place in a group's block ([`GroupLayout::lane`]).
pub struct Lane {
    fields: Vec<(usize, usize, usize)>,
    chunks: Vec<usize>,
    at: usize,
}

impl Lane {
    /// The lane's block out of a group's block (`blk`) into a row's block (`row`).
    pub(crate) fn take(&self, blk: &[u8], row: &mut [u8]) {
        for &(at, to, n) in &self.fields {
            row[to..to + n].copy_from_slice(&blk[at..at + n]);
        }
        let quads = blk[self.at..].chunks(32);
        for (&to, q) in self.chunks.iter().zip(quads) {
            row[to..to + 4].copy_from_slice(&q[..4]);
        }
    }
    /// A row's block into the lane of a group's block.
    fn put(&self, row: &[u8], blk: &mut [u8]) {
        for &(at, from, n) in &self.fields {
            blk[at..at + n].copy_from_slice(&row[from..from + n]);
        }
        let quads = blk[self.at..].chunks_mut(32);
        for (&from, q) in self.chunks.iter().zip(quads) {
            q[..4].copy_from_slice(&row[from..from + 4]);
        }
    }
}

/// A Q4_0, Q4_1, Q5_0, Q4_K or Q6_K matrix whose rows are stored eight at a time,
/// interleaved (see the module's comment). Its products give every output the bits chapter
/// 6's (the others: chapter 8's) scalar kernel gives it.
pub struct Packed {
    pub format: Format,
    /// The same format, as the type the packed layouts and kernels take.
    pub layout: Packable,
    pub rows: usize,
    pub cols: usize,
    data: Store,
    /// Each lane's place in a group's block, for taking rows back out ([`Packed::rows_into`]).
    lanes: Vec<Lane>,
}

/// Where a packed matrix keeps its bytes: on the heap, or in a piece of the model's arena of
/// huge pages ([`crate::huge`]).
enum Store {
    Heap(Vec<u8>),
    Huge(Piece),
}

impl Store {
    fn bytes(&self) -> &[u8] {
        match self {
            Store::Heap(v) => v,
            Store::Huge(p) => p.as_ref(),
        }
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Store::Heap(v) => v,
            Store::Huge(p) => p.as_mut_slice(),
        }
    }
}

impl Packed {
    /// `rows` rows of `cols` weights as the file stores them (`src`), interleaved eight at
    /// a time; `None` for a format that is not packed, rows that are not whole groups of
    /// eight (those matrices stay as stored) or bytes that are not the rows.
    pub fn new(format: Format, rows: usize, cols: usize, src: &[u8]) -> Option<Packed> {
        Self::new_in(format, rows, cols, src, None)
    }

    /// [`Packed::new`], the bytes in a piece of `arena` if it has room for them.
    pub fn new_in(
        format: Format,
        rows: usize,
        cols: usize,
        src: &[u8],
        arena: Option<&Arc<Arena>>,
    ) -> Option<Packed> {
        let layout = format.packable()?;
        let block = format.block_bytes();
        let nb = cols / format.block_values();
        if rows == 0 || !rows.is_multiple_of(GROUP) || cols != nb * format.block_values() {
            return None;
        }
        let row_len = nb * block;
        if rows.checked_mul(row_len) != Some(src.len()) {
            return None;
        }
        let lanes: Vec<Lane> = (0..GROUP).map(|r| layout.lane(r)).collect();
        let mut data = match arena.and_then(|a| a.take(src.len())) {
            Some(piece) => Store::Huge(piece),
            None => Store::Heap(vec![0u8; src.len()]),
        };
        // the groups on every thread: a 7B file's are four gigabytes
        let groups = data.bytes_mut().par_chunks_exact_mut(GROUP * row_len);
        groups
            .zip(src.par_chunks_exact(GROUP * row_len))
            .for_each(|(out, rows)| {
                for (b, o) in out.chunks_exact_mut(GROUP * block).enumerate() {
                    for (r, lane) in lanes.iter().enumerate() {
                        lane.put(&rows[r * row_len + b * block..][..block], o);
                    }
                }
            });
        Some(Packed {
            format,
            layout,
            rows,
            cols,
            data,
            lanes,
        })
    }

    /// Bytes of weights.
    pub fn bytes(&self) -> usize {
        self.data.bytes().len()
    }

    /// Group `g`'s bytes: rows `8g..8g + 8`, block after block.
    pub fn group(&self, g: usize) -> &[u8] {
        let data = self.data.bytes();
        let len = data.len() / (self.rows / GROUP);
        &data[g * len..(g + 1) * len]
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
        let f = self.layout;
        let (bb, nb) = (
            self.format.block_bytes(),
            self.cols / self.format.block_values(),
        );
        out.clear();
        out.resize(rows.len() * nb * bb, 0);
        for (r, row) in rows.zip(out.chunks_exact_mut(nb * bb)) {
            let blocks = self.group(r / GROUP).chunks_exact(f.group_block_bytes());
            for (blk, o) in blocks.zip(row.chunks_exact_mut(bb)) {
                self.lanes[r % GROUP].take(blk, o);
            }
        }
    }

    // ANCHOR: unpack_rows32
    /// Rows `rows` of a Q4_0, Q4_1 or Q5_0 matrix unpacked for the eight-token kernels
    /// straight out of the groups: the blocks [`crate::layout::eights::unpack_block`] makes of
    /// the rows [`Packed::rows_into`] would give, without that copy in between. A row's 16
    /// bytes of nibbles (four bytes in each of the four chunks) are read as one 128-bit word,
    /// whose low nibbles are quants 0..16 and high nibbles quants 16..32; Q5_0's fifth bits
    /// are spread over the bytes eight at a time by a table (`SPREAD`).
    pub fn unpack_rows32(&self, rows: std::ops::Range<usize>, out: &mut Rows32) {
        let Packable::Q32(q32) = self.layout else {
            panic!(
                "unpack_rows32: {} is not Q4_0, Q4_1 or Q5_0",
                self.format.name()
            )
        };
        let f = self.layout;
        let (nb, gbb, head) = (self.cols / QK, f.group_block_bytes(), f.head_bytes());
        out.blocks = nb;
        out.data.clear();
        let word =
            |blk: &[u8], at: usize| u32::from_le_bytes(blk[at..at + 4].try_into().expect("4"));
        for r in rows {
            let (group, lane) = (self.group(r / GROUP), r % GROUP);
            let at_d = f.field_at(0, lane).0;
            let at_second = (f.fields().len() > 1).then(|| f.field_at(1, lane).0);
            let nibbles = head + 4 * lane;
            out.data.extend(group.chunks_exact(gbb).map(|blk| {
                let nib = (0..4).fold(0u128, |n, c| {
                    n | u128::from(word(blk, nibbles + 32 * c)) << (32 * c)
                });
                let (low, high) = (nib & LOW_NIBBLES, (nib >> 4) & LOW_NIBBLES);
                let mut q = [0u8; 32];
                q[..16].copy_from_slice(&low.to_le_bytes());
                q[16..].copy_from_slice(&high.to_le_bytes());
                let second = at_second.map_or(0, |at| word(blk, at));
                let m = if q32.has_min() {
                    f16(second as u16)
                } else {
                    0.0
                };
                if q32 == Q32::Q5_0 {
                    for (k, q) in q.chunks_exact_mut(8).enumerate() {
                        let bits = SPREAD[(second >> (8 * k)) as u8 as usize];
                        let eight = u64::from_le_bytes(q.try_into().expect("8")) | bits;
                        q.copy_from_slice(&eight.to_le_bytes());
                    }
                }
                Block32 {
                    q,
                    d: f16(word(blk, at_d) as u16),
                    m,
                }
            }));
        }
    }
    // ANCHOR_END: unpack_rows32

    /// Rows `rows` as the file stored them ([`Packed::rows_into`] `tile`), one slice a row.
    pub fn tile<'t>(&self, rows: std::ops::Range<usize>, tile: &'t mut Vec<u8>) -> Vec<&'t [u8]> {
        self.rows_into(rows, tile);
        let row_len = self.cols / self.format.block_values() * self.format.block_bytes();
        tile.chunks_exact(row_len).collect()
    }

    /// Row `r` as f32: chapter 6's (Q5_0: chapter 8's) dequantization of the row's blocks.
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let row = self.row_bytes(r);
        let (bb, n) = (self.format.block_bytes(), self.format.block_values());
        let blocks = out.chunks_exact_mut(n).zip(row.chunks_exact(bb));
        match self.layout {
            Packable::Q32(Q32::Q5_0) => {
                blocks.for_each(|(o, b)| kquant::dequantize_q5_0(b, o.try_into().expect("32")));
                return;
            }
            Packable::K(KQuant::Q4_K) => {
                blocks.for_each(|(o, b)| kquant::dequantize_q4_k(b, o.try_into().expect("256")));
                return;
            }
            Packable::K(KQuant::Q6_K) => {
                blocks.for_each(|(o, b)| kquant::dequantize_q6_k(b, o.try_into().expect("256")));
                return;
            }
            Packable::Q32(Q32::Q4_0 | Q32::Q4_1) => {} // chapter 6's
        }
        let one = QMatrix::from_blocks(self.format, 1, self.cols, Bytes::from_vec(row))
            .expect("a row of whole blocks");
        one.dequantize_row(0, out);
    }

    /// One token's activations for this matrix, as chapter 6 (Q5_0: chapter 8) quantizes
    /// them for its format.
    pub fn quantize(&self, k: &dyn Kernels, x: &[f32]) -> Activations {
        if self.format.activation() == Some(ActFormat::Q8_1) {
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
