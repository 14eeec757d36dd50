//! The bookkeeping of a paged cache: which blocks are free, and which blocks each sequence
//! owns, in order. No keys or values live here, so the same code can simulate thousands of
//! sequences to measure fragmentation without allocating their memory.

use crate::Error;

// ANCHOR: allocator
/// A free list over `n_blocks` block ids.
#[derive(Clone, Debug)]
pub struct BlockAllocator {
    n_blocks: usize,
    block_size: usize,
    /// Ids not in use; the next `alloc` pops from the end.
    free: Vec<usize>,
}

impl BlockAllocator {
    /// All `n_blocks` blocks of `block_size` positions start free.
    pub fn new(n_blocks: usize, block_size: usize) -> BlockAllocator {
        assert!(block_size > 0, "a block must hold at least one position");
        // Reversed, so that blocks are handed out 0, 1, 2, ... while nothing is freed.
        BlockAllocator {
            n_blocks,
            block_size,
            free: (0..n_blocks).rev().collect(),
        }
    }

    /// Takes a free block.
    pub fn alloc(&mut self) -> Result<usize, Error> {
        self.free.pop().ok_or(Error::OutOfBlocks {
            blocks: self.n_blocks,
            block_size: self.block_size,
        })
    }

    /// Gives a block back.
    pub fn release(&mut self, block: usize) {
        debug_assert!(
            block < self.n_blocks && !self.free.contains(&block),
            "double free of {block}"
        );
        self.free.push(block);
    }
    // ANCHOR_END: allocator

    /// Positions per block.
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// Blocks in the pool.
    pub fn n_blocks(&self) -> usize {
        self.n_blocks
    }

    /// Blocks currently owned by some sequence.
    pub fn n_used(&self) -> usize {
        self.n_blocks - self.free.len()
    }
}

// ANCHOR: block_table
/// The blocks one sequence owns: `blocks[i]` holds its positions `i*block_size ..
/// (i+1)*block_size`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlockTable {
    pub blocks: Vec<usize>,
}

impl BlockTable {
    /// Where position `pos` lives: `(physical block, slot inside it)`.
    pub fn locate(&self, pos: usize, block_size: usize) -> (usize, usize) {
        (self.blocks[pos / block_size], pos % block_size)
    }

    /// Allocates blocks until positions `0..len` are covered.
    pub fn grow(&mut self, len: usize, alloc: &mut BlockAllocator) -> Result<(), Error> {
        while self.blocks.len() * alloc.block_size() < len {
            self.blocks.push(alloc.alloc()?);
        }
        Ok(())
    }

    /// Keeps only the blocks that positions `0..len` need, returning the rest.
    pub fn shrink(&mut self, len: usize, alloc: &mut BlockAllocator) {
        let keep = len.div_ceil(alloc.block_size());
        for block in self.blocks.drain(keep.min(self.blocks.len())..) {
            alloc.release(block);
        }
    }
}
// ANCHOR_END: block_table

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_grows_one_block_per_block_size_positions() {
        let mut a = BlockAllocator::new(8, 16);
        let mut t = BlockTable::default();
        t.grow(1, &mut a).unwrap();
        assert_eq!(t.blocks, [0]);
        t.grow(16, &mut a).unwrap();
        assert_eq!(t.blocks, [0], "16 positions fit one block of 16");
        t.grow(17, &mut a).unwrap();
        assert_eq!(t.blocks, [0, 1]);
        assert_eq!(t.locate(16, 16), (1, 0));
        assert_eq!(t.locate(15, 16), (0, 15));
    }

    #[test]
    fn freed_blocks_are_reused_and_tables_interleave() {
        let mut a = BlockAllocator::new(4, 2);
        let (mut x, mut y) = (BlockTable::default(), BlockTable::default());
        x.grow(2, &mut a).unwrap(); // x: [0]
        y.grow(2, &mut a).unwrap(); // y: [1]
        x.grow(4, &mut a).unwrap(); // x: [0, 2]
        assert_eq!(
            (x.blocks.as_slice(), y.blocks.as_slice()),
            (&[0, 2][..], &[1][..])
        );
        x.shrink(0, &mut a);
        assert_eq!(a.n_used(), 1);
        y.grow(6, &mut a).unwrap(); // y reuses x's blocks
        assert_eq!(y.blocks.len(), 3);
        assert_eq!(a.n_used(), 3);
    }

    #[test]
    fn an_empty_pool_says_so() {
        let mut a = BlockAllocator::new(2, 16);
        let mut t = BlockTable::default();
        let err = t.grow(33, &mut a).unwrap_err();
        assert!(
            matches!(
                err,
                Error::OutOfBlocks {
                    blocks: 2,
                    block_size: 16
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn shrink_keeps_the_blocks_the_length_needs() {
        let mut a = BlockAllocator::new(8, 4);
        let mut t = BlockTable::default();
        t.grow(13, &mut a).unwrap();
        assert_eq!(t.blocks.len(), 4);
        t.shrink(5, &mut a);
        assert_eq!(
            t.blocks.len(),
            2,
            "positions 0..5 need blocks for 0..4 and 4..8"
        );
        assert_eq!(a.n_used(), 2);
    }
}
