//! One pool of KV blocks for every sequence: which blocks are free, and how many sequences
//! hold each of the others.
//!
//! Chapter 5's [`ch05_kv_cache::paged::BlockAllocator`] gave each block one owner. Here a
//! block may be held by several sequences at once (they share a prompt prefix, see
//! [`crate::prefix`]), so each block has a reference count, and it goes back to the free
//! list only when the last holder lets go. The free list is a queue: a block freed long ago
//! is handed out before one freed just now, so a freed block that [`crate::prefix`] still
//! remembers survives as long as possible, and can be taken back by the next request with
//! the same prefix.
//!
//! No keys or values live here ([`crate::seq::KvBlocks`] holds them): the scheduler's tests
//! and the exercises use this bookkeeping without a model.

use std::collections::VecDeque;

// ANCHOR: pool
/// Reference counts and a free list over `n_blocks` blocks.
#[derive(Clone, Debug)]
pub struct BlockPool {
    /// `(n_blocks)`: how many sequences hold each block; 0 for a free block.
    refs: Vec<u32>,
    /// Free block ids, least recently freed first.
    free: VecDeque<usize>,
}

impl BlockPool {
    /// All `n_blocks` blocks start free, handed out 0, 1, 2, ...
    pub fn new(n_blocks: usize) -> BlockPool {
        BlockPool {
            refs: vec![0; n_blocks],
            free: (0..n_blocks).collect(),
        }
    }

    /// Takes the least recently freed block, with one reference.
    pub fn alloc(&mut self) -> Option<usize> {
        let b = self.free.pop_front()?;
        self.refs[b] = 1;
        Some(b)
    }

    /// One more sequence holds `block`. A free block (one the prefix index still
    /// remembers) leaves the free list.
    pub fn retain(&mut self, block: usize) {
        if self.refs[block] == 0 {
            let at = self.free.iter().position(|&b| b == block);
            self.free
                .remove(at.expect("a block with no holder is on the free list"));
        }
        self.refs[block] += 1;
    }

    /// One holder lets go of `block`; returns true when that was the last one and the
    /// block is free again.
    pub fn release(&mut self, block: usize) -> bool {
        assert!(
            self.refs[block] > 0,
            "block {block} released more often than held"
        );
        self.refs[block] -= 1;
        if self.refs[block] == 0 {
            self.free.push_back(block);
            return true;
        }
        false
    }
    // ANCHOR_END: pool

    /// How many sequences hold `block`.
    pub fn refs(&self, block: usize) -> u32 {
        self.refs[block]
    }

    /// Blocks in the pool.
    pub fn n_blocks(&self) -> usize {
        self.refs.len()
    }

    /// Blocks on the free list (some may still be remembered by the prefix index).
    pub fn n_free(&self) -> usize {
        self.free.len()
    }

    /// The block the next [`BlockPool::alloc`] would hand out.
    pub fn next_free(&self) -> Option<usize> {
        self.free.front().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_block_is_free_only_after_its_last_holder_lets_go() {
        let mut p = BlockPool::new(3);
        let a = p.alloc().unwrap();
        p.retain(a);
        assert_eq!(p.refs(a), 2);
        assert!(!p.release(a), "one holder is left");
        assert_eq!(p.n_free(), 2);
        assert!(p.release(a));
        assert_eq!(p.n_free(), 3);
    }

    #[test]
    fn freed_blocks_queue_behind_the_older_free_ones_and_can_be_taken_back() {
        let mut p = BlockPool::new(3);
        let (a, b) = (p.alloc().unwrap(), p.alloc().unwrap());
        assert_eq!((a, b), (0, 1));
        p.release(a);
        assert_eq!(p.next_free(), Some(2), "block 2 was free before block 0");
        p.retain(a); // a prefix hit takes block 0 back off the free list
        assert_eq!((p.refs(a), p.n_free()), (1, 1));
        assert_eq!(p.alloc(), Some(2));
        assert_eq!(p.alloc(), None, "all three are held");
    }
}
