//! The keys and values of every block, and one sequence's view of them through its block
//! table, as a chapter 5 [`KvStore`] — so chapter 8's `attend` reads a sequence of the
//! batch exactly as it reads chapter 9's ring cache.
//!
//! ```text
//! k, v    (n_layers, n_kv_heads, n_blocks, block_size, head_dim)
//! ```
//!
//! The blocks are the third axis, not the first: one layer's keys for one KV head are one
//! plane, so the blocks a sequence took one after another (the pool hands them out in
//! order) lie side by side in it, and attention reads them as one stream, as it reads
//! chapter 9's ring cache. With the blocks first, each block's share of a layer and head
//! (4 KB for SmolLM2) lay 368 640 bytes from the next block's, and a
//! sequence's attention read short scattered pieces.
//!
//! Chapter 5's [`ch05_kv_cache::paged::PagedCache`] kept the tables inside the cache and
//! handed out one sequence's view at a time (`&mut`). A batch step reads many sequences at
//! once, on several threads, so here the storage is one value shared read-only by all the
//! views, and the step writes every row's keys and values first ([`KvBlocks::write`]),
//! before any row attends.

use ch05_kv_cache::{Error, KvLayout, KvStore};
use ch06_quantization::f16::f32_to_f16;

/// How keys and values are stored: f32 (chapters 5 to 9), or f16 (llama.cpp's default),
/// half the memory, each value rounded to f16 as it is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvPrecision {
    F32,
    F16,
}

impl KvPrecision {
    pub fn bytes(self) -> usize {
        match self {
            KvPrecision::F32 => 4,
            KvPrecision::F16 => 2,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            KvPrecision::F32 => "f32",
            KvPrecision::F16 => "f16",
        }
    }
}

/// The keys and values, each `(n_layers, n_kv_heads, n_blocks, block_size, head_dim)`.
#[derive(Debug)]
pub(crate) enum Data {
    F32 {
        k: Vec<f32>,
        v: Vec<f32>,
    },
    /// IEEE half-precision bits.
    F16 {
        k: Vec<u16>,
        v: Vec<u16>,
    },
}

// ANCHOR: blocks
/// K/V storage for `n_blocks` blocks of `block_size` positions.
#[derive(Debug)]
pub struct KvBlocks {
    layout: KvLayout,
    block_size: usize,
    n_blocks: usize,
    pub(crate) data: Data,
}

impl KvBlocks {
    /// Values of K (or of V) in one block.
    pub fn values_per_block(layout: KvLayout, block_size: usize) -> usize {
        layout.n_layers * layout.n_kv_heads * block_size * layout.head_dim
    }

    /// Bytes of K and V in one block.
    pub fn bytes_per_block(layout: KvLayout, block_size: usize, precision: KvPrecision) -> usize {
        2 * KvBlocks::values_per_block(layout, block_size) * precision.bytes()
    }

    /// Zeroed storage. The caller has checked `n_blocks` against the user's budget.
    pub fn new(
        layout: KvLayout,
        block_size: usize,
        n_blocks: usize,
        precision: KvPrecision,
    ) -> KvBlocks {
        let n = n_blocks * KvBlocks::values_per_block(layout, block_size);
        let data = match precision {
            KvPrecision::F32 => Data::F32 {
                k: vec![0.0; n],
                v: vec![0.0; n],
            },
            KvPrecision::F16 => Data::F16 {
                k: vec![0; n],
                v: vec![0; n],
            },
        };
        KvBlocks {
            layout,
            block_size,
            n_blocks,
            data,
        }
    }

    /// Where the `head_dim` values of (block, layer, kv_head, slot) start.
    pub(crate) fn offset(&self, block: usize, layer: usize, kv_head: usize, slot: usize) -> usize {
        let l = &self.layout;
        (((layer * l.n_kv_heads + kv_head) * self.n_blocks + block) * self.block_size + slot)
            * l.head_dim
    }

    /// Stores one token's key row and value row (each `(n_kv_heads * head_dim)`) of `layer`
    /// at `slot` of `block`.
    pub fn write(&mut self, block: usize, slot: usize, layer: usize, k: &[f32], v: &[f32]) {
        let d = self.layout.head_dim;
        self.layout.check_row(k, v);
        for h in 0..self.layout.n_kv_heads {
            let at = self.offset(block, layer, h, slot);
            let (kh, vh) = (&k[h * d..(h + 1) * d], &v[h * d..(h + 1) * d]);
            match &mut self.data {
                Data::F32 { k, v } => {
                    k[at..at + d].copy_from_slice(kh);
                    v[at..at + d].copy_from_slice(vh);
                }
                Data::F16 { k, v } => {
                    k[at..at + d]
                        .iter_mut()
                        .zip(kh)
                        .for_each(|(o, x)| *o = f32_to_f16(*x));
                    v[at..at + d]
                        .iter_mut()
                        .zip(vh)
                        .for_each(|(o, x)| *o = f32_to_f16(*x));
                }
            }
        }
    }
    // ANCHOR_END: blocks

    /// Copies everything `from` holds into `to` (copy on write of a shared block).
    pub fn copy_block(&mut self, from: usize, to: usize) {
        let n = self.block_size * self.layout.head_dim; // one layer and head of a block
        for layer in 0..self.layout.n_layers {
            for h in 0..self.layout.n_kv_heads {
                let at = self.offset(from, layer, h, 0);
                let (src, dst) = (at..at + n, self.offset(to, layer, h, 0));
                match &mut self.data {
                    Data::F32 { k, v } => {
                        k.copy_within(src.clone(), dst);
                        v.copy_within(src, dst);
                    }
                    Data::F16 { k, v } => {
                        k.copy_within(src.clone(), dst);
                        v.copy_within(src, dst);
                    }
                }
            }
        }
    }

    pub fn layout(&self) -> KvLayout {
        self.layout
    }

    pub fn block_size(&self) -> usize {
        self.block_size
    }

    pub fn precision(&self) -> KvPrecision {
        match self.data {
            Data::F32 { .. } => KvPrecision::F32,
            Data::F16 { .. } => KvPrecision::F16,
        }
    }

    /// The f32 keys and values, `None` for f16 storage (read through [`crate::gather`]).
    fn f32s(&self) -> Option<(&[f32], &[f32])> {
        match &self.data {
            Data::F32 { k, v } => Some((k, v)),
            Data::F16 { .. } => None,
        }
    }
}

// ANCHOR: view
/// One sequence's positions `0..len`, read through its block table: `table[i]` holds
/// positions `i * block_size .. (i + 1) * block_size`.
#[derive(Clone, Copy, Debug)]
pub struct SeqKv<'a> {
    pub blocks: &'a KvBlocks,
    pub table: &'a [usize],
    /// The model's context: the most positions any sequence reaches.
    pub max_pos: usize,
}

impl SeqKv<'_> {
    /// Panics on f16 blocks: a caller bug (the batch step reads those through
    /// [`crate::gather`]).
    fn f32s(&self) -> (&[f32], &[f32]) {
        self.blocks
            .f32s()
            .expect("SeqKv reads f32 blocks; f16 ones go through gather")
    }

    fn locate(&self, layer: usize, kv_head: usize, pos: usize) -> usize {
        let bs = self.blocks.block_size;
        self.blocks
            .offset(self.table[pos / bs], layer, kv_head, pos % bs)
    }
}

// ANCHOR_END: view
impl KvStore for SeqKv<'_> {
    fn layout(&self) -> KvLayout {
        self.blocks.layout
    }

    fn max_positions(&self) -> usize {
        self.max_pos
    }

    /// The engine allocates blocks before a step; here it is only checked.
    fn reserve(&mut self, len: usize) -> Result<(), Error> {
        if len > self.max_pos {
            return Err(Error::ContextFull {
                limit: self.max_pos,
                needed: len,
            });
        }
        if len > self.table.len() * self.blocks.block_size {
            return Err(Error::OutOfBlocks {
                blocks: self.table.len(),
                block_size: self.blocks.block_size,
            });
        }
        Ok(())
    }

    fn rewind(&mut self, _from: usize, _len: usize) -> Result<(), Error> {
        Ok(()) // positions past the sequence's length are never read
    }

    /// Panics: the view is read-only, and a caller writing through it is a bug. The batch
    /// step writes every row through [`KvBlocks::write`] before any row attends.
    fn write(&mut self, _layer: usize, _pos: usize, _k: &[f32], _v: &[f32]) {
        panic!("SeqKv is a read-only view: write through KvBlocks::write");
    }

    fn key(&self, layer: usize, kv_head: usize, pos: usize) -> &[f32] {
        let at = self.locate(layer, kv_head, pos);
        &self.f32s().0[at..at + self.blocks.layout.head_dim]
    }

    fn value(&self, layer: usize, kv_head: usize, pos: usize) -> &[f32] {
        let at = self.locate(layer, kv_head, pos);
        &self.f32s().1[at..at + self.blocks.layout.head_dim]
    }

    fn reserved_bytes(&self) -> usize {
        let (l, bs, p) = (
            self.blocks.layout,
            self.blocks.block_size,
            self.blocks.precision(),
        );
        self.table.len() * KvBlocks::bytes_per_block(l, bs, p)
    }

    // ANCHOR: runs
    /// A run exists when `positions` lie in one block: a head's keys of one block are side
    /// by side.
    fn runs(
        &self,
        layer: usize,
        kv_head: usize,
        positions: std::ops::Range<usize>,
    ) -> Option<(&[f32], &[f32])> {
        let bs = self.blocks.block_size;
        if positions.is_empty() || positions.start / bs != (positions.end - 1) / bs {
            return None;
        }
        let at = self.locate(layer, kv_head, positions.start);
        let span = at..at + positions.len() * self.blocks.layout.head_dim;
        let (k, v) = self.f32s();
        Some((&k[span.clone()], &v[span]))
    }
    // ANCHOR_END: runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_view_reads_back_through_its_table_and_runs_stay_inside_a_block() {
        let layout = KvLayout {
            n_layers: 2,
            n_kv_heads: 2,
            head_dim: 3,
        };
        let mut kv = KvBlocks::new(layout, 4, 3, KvPrecision::F32);
        let table = [2, 0]; // positions 0..4 in block 2, 4..8 in block 0
        for pos in 0..8 {
            let k: Vec<f32> = (0..6).map(|i| (pos * 10 + i) as f32).collect();
            let v: Vec<f32> = k.iter().map(|x| -x).collect();
            kv.write(table[pos / 4], pos % 4, 1, &k, &v);
        }
        let s = SeqKv {
            blocks: &kv,
            table: &table,
            max_pos: 8,
        };
        assert_eq!(s.key(1, 1, 5), &[53.0, 54.0, 55.0]);
        assert_eq!(s.value(1, 0, 2), &[-20.0, -21.0, -22.0]);
        let (ks, _) = s.runs(1, 0, 4..7).expect("4..7 lie in one block");
        assert_eq!(ks[3..6], [50.0, 51.0, 52.0]);
        assert!(s.runs(1, 0, 2..6).is_none(), "2..6 cross a block boundary");
        kv.copy_block(2, 1);
        let s = SeqKv {
            blocks: &kv,
            table: &[1, 0],
            max_pos: 8,
        };
        assert_eq!(
            s.key(1, 1, 1),
            &[13.0, 14.0, 15.0],
            "block 1 is a copy of 2"
        );
        let mut s = s;
        assert!(s.reserve(9).is_err() && s.reserve(8).is_ok());
    }
}
