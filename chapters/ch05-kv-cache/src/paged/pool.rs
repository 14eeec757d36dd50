//! The storage of a paged cache: one pool of blocks for all sequences, and the view of one
//! sequence that reads through its block table.
//!
//! ```text
//! k, v    (n_blocks, n_layers, n_kv_heads, block_size, head_dim)
//! ```
//!
//! A block holds `block_size` consecutive positions of one sequence, for every layer and
//! KV head. Inside a block the layout is the contiguous cache's, so a head's keys for the
//! block's 16 positions are still one contiguous run of `16 × head_dim` floats.

use crate::Error;
use crate::paged::alloc::{BlockAllocator, BlockTable};
use crate::store::{KvLayout, KvStore, check_capacity};

/// A sequence in a [`PagedCache`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqId(pub usize);

// ANCHOR: paged_cache
/// A pool of K/V blocks shared by any number of sequences.
#[derive(Debug)]
pub struct PagedCache {
    layout: KvLayout,
    /// Longest sequence allowed (the model's context length).
    max_pos: usize,
    alloc: BlockAllocator,
    /// One table per sequence slot; `None` once the sequence is freed.
    tables: Vec<Option<BlockTable>>,
    /// `(n_blocks, n_layers, n_kv_heads, block_size, head_dim)`
    k: Vec<f32>,
    /// `(n_blocks, n_layers, n_kv_heads, block_size, head_dim)`
    v: Vec<f32>,
}

impl PagedCache {
    /// A pool of `n_blocks` blocks of `block_size` positions; sequences may grow to `max_pos`.
    pub fn new(layout: KvLayout, n_blocks: usize, block_size: usize, max_pos: usize) -> PagedCache {
        let n = n_blocks * layout.n_layers * layout.n_kv_heads * block_size * layout.head_dim;
        PagedCache {
            layout,
            max_pos,
            alloc: BlockAllocator::new(n_blocks, block_size),
            tables: Vec::new(),
            k: vec![0.0; n],
            v: vec![0.0; n],
        }
    }

    /// Starts a sequence with an empty block table.
    pub fn new_seq(&mut self) -> SeqId {
        self.tables.push(Some(BlockTable::default()));
        SeqId(self.tables.len() - 1)
    }

    /// Ends a sequence: its blocks go back to the free list.
    pub fn free_seq(&mut self, id: SeqId) {
        if let Some(mut table) = self.tables[id.0].take() {
            table.shrink(0, &mut self.alloc);
        }
    }

    /// The view of one sequence, which is what attention and the forward pass use.
    pub fn seq(&mut self, id: SeqId) -> PagedSeq<'_> {
        assert!(self.tables[id.0].is_some(), "sequence {} was freed", id.0);
        PagedSeq {
            cache: self,
            id: id.0,
        }
    }

    /// The block table of a sequence.
    pub fn table(&self, id: SeqId) -> &BlockTable {
        self.tables[id.0].as_ref().expect("sequence was freed")
    }

    /// Blocks in use over all sequences.
    pub fn blocks_used(&self) -> usize {
        self.alloc.n_used()
    }

    /// Where the `head_dim` floats of (block, layer, kv_head, slot) start.
    fn offset(&self, block: usize, layer: usize, kv_head: usize, slot: usize) -> usize {
        let l = &self.layout;
        let bs = self.alloc.block_size();
        (((block * l.n_layers + layer) * l.n_kv_heads + kv_head) * bs + slot) * l.head_dim
    }
}
// ANCHOR_END: paged_cache

/// One sequence of a [`PagedCache`], seen as a [`KvStore`].
#[derive(Debug)]
pub struct PagedSeq<'a> {
    cache: &'a mut PagedCache,
    id: usize,
}

impl PagedSeq<'_> {
    fn table(&self) -> &BlockTable {
        self.cache.tables[self.id]
            .as_ref()
            .expect("checked in PagedCache::seq")
    }

    // ANCHOR: paged_lookup
    /// Position `pos` of this sequence → the start of its floats in the pool.
    fn locate(&self, layer: usize, kv_head: usize, pos: usize) -> usize {
        let (block, slot) = self.table().locate(pos, self.cache.alloc.block_size());
        self.cache.offset(block, layer, kv_head, slot)
    }
    // ANCHOR_END: paged_lookup
}

impl KvStore for PagedSeq<'_> {
    fn layout(&self) -> KvLayout {
        self.cache.layout
    }

    fn max_positions(&self) -> usize {
        self.cache.max_pos
    }

    fn reserve(&mut self, len: usize) -> Result<(), Error> {
        check_capacity(len, self.cache.max_pos)?;
        let cache = &mut *self.cache;
        let table = cache.tables[self.id]
            .as_mut()
            .expect("checked in PagedCache::seq");
        table.grow(len, &mut cache.alloc)
    }

    fn rewind(&mut self, _from: usize, len: usize) -> Result<(), Error> {
        let cache = &mut *self.cache;
        let table = cache.tables[self.id]
            .as_mut()
            .expect("checked in PagedCache::seq");
        table.shrink(len, &mut cache.alloc);
        Ok(())
    }

    fn write(&mut self, layer: usize, pos: usize, k: &[f32], v: &[f32]) {
        let d = self.cache.layout.head_dim;
        self.cache.layout.check_row(k, v);
        for h in 0..self.cache.layout.n_kv_heads {
            let at = self.locate(layer, h, pos);
            self.cache.k[at..at + d].copy_from_slice(&k[h * d..(h + 1) * d]);
            self.cache.v[at..at + d].copy_from_slice(&v[h * d..(h + 1) * d]);
        }
    }

    fn key(&self, layer: usize, kv_head: usize, pos: usize) -> &[f32] {
        let at = self.locate(layer, kv_head, pos);
        &self.cache.k[at..at + self.cache.layout.head_dim]
    }

    fn value(&self, layer: usize, kv_head: usize, pos: usize) -> &[f32] {
        let at = self.locate(layer, kv_head, pos);
        &self.cache.v[at..at + self.cache.layout.head_dim]
    }

    fn reserved_bytes(&self) -> usize {
        let block_bytes = self.cache.alloc.block_size() * self.cache.layout.bytes_per_token();
        self.table().blocks.len() * block_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contiguous::KvCache;

    fn layout() -> KvLayout {
        KvLayout {
            n_layers: 2,
            n_kv_heads: 2,
            head_dim: 3,
        }
    }

    fn row(seed: usize) -> Vec<f32> {
        (0..6).map(|i| (seed * 10 + i) as f32).collect()
    }

    #[test]
    fn two_interleaved_sequences_read_back_what_they_wrote() {
        let mut pool = PagedCache::new(layout(), 8, 4, 32);
        let (a, b) = (pool.new_seq(), pool.new_seq());
        let mut reference = [KvCache::new(layout(), 32), KvCache::new(layout(), 32)];
        // Grow both sequences a token at a time, so their blocks alternate in the pool.
        for pos in 0..10 {
            for (n, id) in [a, b].into_iter().enumerate() {
                let mut seq = pool.seq(id);
                seq.reserve(pos + 1).unwrap();
                for layer in 0..2 {
                    let (k, v) = (row(pos + 100 * n + layer), row(pos + 1000 + layer));
                    seq.write(layer, pos, &k, &v);
                    reference[n].write(layer, pos, &k, &v);
                }
            }
        }
        assert_eq!(pool.table(a).blocks, [0, 2, 4], "a got every other block");
        assert_eq!(pool.table(b).blocks, [1, 3, 5]);
        for (n, id) in [a, b].into_iter().enumerate() {
            let seq = pool.seq(id);
            for (layer, h, pos) in [(0, 0, 0), (1, 1, 9), (0, 1, 4), (1, 0, 7)] {
                assert_eq!(seq.key(layer, h, pos), reference[n].key(layer, h, pos));
                assert_eq!(seq.value(layer, h, pos), reference[n].value(layer, h, pos));
            }
        }
    }

    #[test]
    fn freeing_a_sequence_returns_its_blocks() {
        let mut pool = PagedCache::new(layout(), 4, 4, 16);
        let a = pool.new_seq();
        pool.seq(a).reserve(9).unwrap();
        assert_eq!(pool.blocks_used(), 3);
        assert_eq!(
            pool.seq(a).reserved_bytes(),
            3 * 4 * layout().bytes_per_token()
        );
        pool.free_seq(a);
        assert_eq!(pool.blocks_used(), 0);
    }

    #[test]
    fn the_context_limit_comes_before_the_pool_limit() {
        let mut pool = PagedCache::new(layout(), 100, 4, 16);
        let a = pool.new_seq();
        let err = pool.seq(a).reserve(17).unwrap_err();
        assert!(
            matches!(
                err,
                Error::ContextFull {
                    limit: 16,
                    needed: 17
                }
            ),
            "{err}"
        );
    }
}
