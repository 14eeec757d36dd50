//! Prefix sharing: requests that start with the same tokens share the KV blocks of that
//! start.
//!
//! The keys and values at position `p` depend on the tokens `0..=p` and nothing else, so a
//! full block of a sequence is determined by its own tokens *and* everything before it. The
//! index names a full block by a key made from its tokens and the key of the block before it
//! (a chain, the way nano-vllm and vLLM's prefix caching do it), so one lookup per block
//! walks a new prompt's prefix: block 0's key, then block 1's from block 0's, and so on,
//! stopping at the first block nobody has computed.
//!
//! Only full blocks are indexed: a partly filled block is still being written by its owner.
//! A request whose whole prompt is cached still recomputes its last prompt token (its
//! logits are not cached), and writing that token's keys into a shared block would change
//! the block under the other holders: the engine copies the block first (copy on write,
//! [`crate::engine`]).

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

/// A full block's name: its tokens and the key of the block before it, hashed.
pub type BlockKey = u64;

// ANCHOR: key
/// The key of a full block holding `tokens`, after the block whose key is `prev` (`None`
/// for a sequence's first block). Two blocks get the same key only if their tokens and
/// everything before them are the same (up to a 64-bit hash collision, which the index
/// rules out by keeping the tokens and checking them).
pub fn block_key(prev: Option<BlockKey>, tokens: &[u32]) -> BlockKey {
    let mut h = DefaultHasher::new(); // fixed keys: the same key in every process
    prev.hash(&mut h);
    tokens.hash(&mut h);
    h.finish()
}
// ANCHOR_END: key

#[derive(Clone, Debug)]
struct Entry {
    block: usize,
    prev: Option<BlockKey>,
    tokens: Vec<u32>,
}

/// Full blocks that hold known tokens, by key.
#[derive(Clone, Debug, Default)]
pub struct PrefixIndex {
    by_key: HashMap<BlockKey, Entry>,
    /// The reverse: which key a block is indexed under.
    key_of: HashMap<usize, BlockKey>,
}

impl PrefixIndex {
    // ANCHOR: lookup
    /// The blocks holding the longest run of full blocks at the start of `tokens`, with
    /// their keys: `(block, key)` for block 0, 1, ... of the sequence.
    pub fn lookup(&self, tokens: &[u32], block_size: usize) -> Vec<(usize, BlockKey)> {
        let mut found = Vec::new();
        let mut prev = None;
        for chunk in tokens.chunks_exact(block_size) {
            let key = block_key(prev, chunk);
            match self.by_key.get(&key) {
                Some(e) if e.prev == prev && e.tokens == chunk => found.push((e.block, key)),
                _ => break,
            }
            prev = Some(key);
        }
        found
    }
    // ANCHOR_END: lookup

    /// Indexes `block`, full with `tokens` after the block keyed `prev`; returns its key.
    /// When another block is already indexed under that key (two sequences computed the
    /// same prefix at the same time) the first stays, and `block` stays private.
    pub fn insert(&mut self, prev: Option<BlockKey>, tokens: &[u32], block: usize) -> BlockKey {
        let key = block_key(prev, tokens);
        if !self.by_key.contains_key(&key) && !self.key_of.contains_key(&block) {
            self.by_key.insert(
                key,
                Entry {
                    block,
                    prev,
                    tokens: tokens.to_vec(),
                },
            );
            self.key_of.insert(block, key);
        }
        key
    }

    /// Forgets `block` (it is about to hold something else).
    pub fn forget(&mut self, block: usize) {
        if let Some(key) = self.key_of.remove(&block) {
            self.by_key.remove(&key);
        }
    }

    /// Whether `block` is indexed (so other sequences may come to share it).
    pub fn contains(&self, block: usize) -> bool {
        self.key_of.contains_key(&block)
    }

    /// Blocks indexed.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_finds_the_full_blocks_it_shares_and_stops_at_the_first_difference() {
        let mut ix = PrefixIndex::default();
        let a: Vec<u32> = (0..10).collect(); // blocks of 4: [0..4] [4..8], then 2 left over
        let k0 = ix.insert(None, &a[0..4], 7);
        ix.insert(Some(k0), &a[4..8], 3);
        assert_eq!(ix.lookup(&a, 4).len(), 2);
        assert_eq!(ix.lookup(&a, 4)[1].0, 3);
        let mut b = a.clone();
        b[5] = 99;
        assert_eq!(ix.lookup(&b, 4), vec![(7, k0)], "block 1 differs");
        let mut c = a.clone();
        c[0] = 99;
        assert!(ix.lookup(&c, 4).is_empty());
        // the same tokens after a different first block are a different block
        let mut d = c.clone();
        d[4..8].copy_from_slice(&a[4..8]);
        assert!(ix.lookup(&d, 4).is_empty());
        ix.forget(7);
        assert!(
            ix.lookup(&a, 4).is_empty(),
            "block 0 is gone, so the chain is"
        );
    }
}
