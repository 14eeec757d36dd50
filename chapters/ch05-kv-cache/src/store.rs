//! What every KV cache in this chapter is: a place to put one token's keys and values per
//! layer, and to read them back by (layer, KV head, position).
//!
//! Three stores implement [`KvStore`]: the pre-allocated [`crate::contiguous::KvCache`], the
//! [`crate::paged::PagedSeq`] that reads through a block table, and the
//! [`crate::ring::RingCache`] that keeps only the last `window` positions of windowed
//! layers. The attention kernel ([`crate::attend`]) and the cached forward pass
//! ([`crate::forward`]) are written once, against this trait.

use crate::Error;

// ANCHOR: layout
/// The shape of what a cache stores per token: for each layer, one key and one value
/// vector of `head_dim` floats per KV head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvLayout {
    /// Transformer layers (SmolLM2-135M: 30).
    pub n_layers: usize,
    /// Key/value heads per layer (3: grouped-query attention shares them among 9 query heads).
    pub n_kv_heads: usize,
    /// Floats per head (64).
    pub head_dim: usize,
}

impl KvLayout {
    /// Width of one token's K (or V) row in one layer, as the projection writes it:
    /// `n_kv_heads * head_dim`.
    pub fn row_len(&self) -> usize {
        self.n_kv_heads * self.head_dim
    }

    /// Floats cached per token: K and V, every layer, every KV head.
    pub fn floats_per_token(&self) -> usize {
        2 * self.n_layers * self.n_kv_heads * self.head_dim
    }

    /// Bytes cached per token in f32. SmolLM2-135M: 2 × 30 × 3 × 64 × 4 = 46 080.
    pub fn bytes_per_token(&self) -> usize {
        self.floats_per_token() * size_of::<f32>()
    }

    /// Panics unless `k` and `v` are one token's rows for one layer: a caller bug, not bad input.
    pub fn check_row(&self, k: &[f32], v: &[f32]) {
        assert_eq!(
            k.len(),
            self.row_len(),
            "k row is not (n_kv_heads * head_dim)"
        );
        assert_eq!(v.len(), k.len(), "v row is not (n_kv_heads * head_dim)");
    }
}
// ANCHOR_END: layout

// ANCHOR: store
/// A KV cache for one sequence.
pub trait KvStore {
    /// What is stored per token.
    fn layout(&self) -> KvLayout;

    /// The most positions this sequence may reach.
    fn max_positions(&self) -> usize;

    /// Makes positions `0..len` writable (a paged cache allocates blocks here).
    /// Fails with [`Error::ContextFull`] past [`KvStore::max_positions`].
    fn reserve(&mut self, len: usize) -> Result<(), Error>;

    /// Forgets positions `len..from` (the sequence is cut back to `len` tokens), so that
    /// they can be written again.
    fn rewind(&mut self, from: usize, len: usize) -> Result<(), Error>;

    /// Stores the key row `k` and value row `v` (each `(n_kv_heads * head_dim)`, as the K and
    /// V projections produce them) of the token at `pos` in `layer`. `pos` must be reserved.
    fn write(&mut self, layer: usize, pos: usize, k: &[f32], v: &[f32]);

    /// The key of `kv_head` at `pos` in `layer`: `(head_dim)`.
    fn key(&self, layer: usize, kv_head: usize, pos: usize) -> &[f32];

    /// The value of `kv_head` at `pos` in `layer`: `(head_dim)`.
    fn value(&self, layer: usize, kv_head: usize, pos: usize) -> &[f32];

    /// Bytes of K/V storage this cache holds right now (allocated, used or not).
    fn reserved_bytes(&self) -> usize;

    /// The keys and the values of `kv_head` at `positions`, each as one slice
    /// `(positions.len(), head_dim)`, when the store keeps them side by side; `None` when it
    /// does not (read them one by one with [`KvStore::key`] and [`KvStore::value`]).
    fn runs(
        &self,
        layer: usize,
        kv_head: usize,
        positions: std::ops::Range<usize>,
    ) -> Option<(&[f32], &[f32])> {
        let _ = (layer, kv_head, positions);
        None
    }
}
// ANCHOR_END: store

/// The check every store makes in `reserve`.
pub(crate) fn check_capacity(len: usize, limit: usize) -> Result<(), Error> {
    if len > limit {
        Err(Error::ContextFull { limit, needed: len })
    } else {
        Ok(())
    }
}
