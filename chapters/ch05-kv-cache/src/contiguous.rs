//! The simplest KV cache: one pre-allocated block per sequence, big enough for the longest
//! context it will ever hold.
//!
//! ```text
//! k, v   (n_layers, n_kv_heads, max_pos, head_dim)
//! ```
//!
//! Why this order: attention for one query head is `max_pos`-many dot products against the
//! keys of *one* KV head of *one* layer, at consecutive positions. With positions as the
//! second-to-last axis those keys sit next to each other, `head_dim` floats after
//! `head_dim` floats, so the kernel streams through one contiguous run of memory (the
//! prefetcher's favourite pattern) and then does the same for the values. Putting the
//! position first, as the projections produce rows, would make each step jump over the
//! other heads' floats.

use crate::Error;
use crate::store::{KvLayout, KvStore, check_capacity};

// ANCHOR: kv_cache
/// A pre-allocated contiguous cache for one sequence of up to `max_pos` tokens.
#[derive(Clone, Debug)]
pub struct KvCache {
    layout: KvLayout,
    max_pos: usize,
    /// `(n_layers, n_kv_heads, max_pos, head_dim)`
    k: Vec<f32>,
    /// `(n_layers, n_kv_heads, max_pos, head_dim)`
    v: Vec<f32>,
}

impl KvCache {
    /// Allocates room for `max_pos` tokens up front:
    /// `max_pos × layout.bytes_per_token()` bytes, used or not.
    pub fn new(layout: KvLayout, max_pos: usize) -> KvCache {
        let n = layout.n_layers * layout.n_kv_heads * max_pos * layout.head_dim;
        KvCache {
            layout,
            max_pos,
            k: vec![0.0; n],
            v: vec![0.0; n],
        }
    }

    /// Where the `head_dim` floats of (layer, kv_head, pos) start.
    fn offset(&self, layer: usize, kv_head: usize, pos: usize) -> usize {
        let l = &self.layout;
        debug_assert!(layer < l.n_layers && kv_head < l.n_kv_heads && pos < self.max_pos);
        ((layer * l.n_kv_heads + kv_head) * self.max_pos + pos) * l.head_dim
    }

    /// All `max_pos` keys of one (layer, KV head): `(max_pos, head_dim)`, contiguous.
    pub fn keys(&self, layer: usize, kv_head: usize) -> &[f32] {
        let start = self.offset(layer, kv_head, 0);
        &self.k[start..start + self.max_pos * self.layout.head_dim]
    }
}
// ANCHOR_END: kv_cache

// ANCHOR: kv_cache_store
impl KvStore for KvCache {
    fn layout(&self) -> KvLayout {
        self.layout
    }

    fn max_positions(&self) -> usize {
        self.max_pos
    }

    fn reserve(&mut self, len: usize) -> Result<(), Error> {
        check_capacity(len, self.max_pos) // everything was allocated in `new`
    }

    fn rewind(&mut self, _from: usize, _len: usize) -> Result<(), Error> {
        Ok(()) // stale entries are simply overwritten by the next `write`
    }

    fn write(&mut self, layer: usize, pos: usize, k: &[f32], v: &[f32]) {
        let d = self.layout.head_dim;
        self.layout.check_row(k, v);
        assert!(
            pos < self.max_pos,
            "position {pos} is past the cache ({})",
            self.max_pos
        );
        // The row holds the heads side by side; each goes to its own (layer, head) plane.
        for h in 0..self.layout.n_kv_heads {
            let at = self.offset(layer, h, pos);
            self.k[at..at + d].copy_from_slice(&k[h * d..(h + 1) * d]);
            self.v[at..at + d].copy_from_slice(&v[h * d..(h + 1) * d]);
        }
    }

    fn key(&self, layer: usize, kv_head: usize, pos: usize) -> &[f32] {
        let at = self.offset(layer, kv_head, pos);
        &self.k[at..at + self.layout.head_dim]
    }

    fn value(&self, layer: usize, kv_head: usize, pos: usize) -> &[f32] {
        let at = self.offset(layer, kv_head, pos);
        &self.v[at..at + self.layout.head_dim]
    }

    fn reserved_bytes(&self) -> usize {
        (self.k.len() + self.v.len()) * size_of::<f32>()
    }
}
// ANCHOR_END: kv_cache_store

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> KvLayout {
        KvLayout {
            n_layers: 2,
            n_kv_heads: 3,
            head_dim: 4,
        }
    }

    #[test]
    fn a_written_row_reads_back_per_head() {
        let mut c = KvCache::new(layout(), 5);
        c.reserve(5).unwrap();
        let k: Vec<f32> = (0..12).map(|i| i as f32).collect(); // (3 heads * 4)
        let v: Vec<f32> = (0..12).map(|i| 100.0 + i as f32).collect();
        c.write(1, 3, &k, &v);
        for h in 0..3 {
            assert_eq!(c.key(1, h, 3), &k[h * 4..(h + 1) * 4], "key of head {h}");
            assert_eq!(
                c.value(1, h, 3),
                &v[h * 4..(h + 1) * 4],
                "value of head {h}"
            );
            assert_eq!(c.key(0, h, 3), &[0.0; 4], "layer 0 was not written");
        }
    }

    #[test]
    fn one_heads_keys_are_contiguous_over_positions() {
        let mut c = KvCache::new(layout(), 4);
        for pos in 0..4 {
            let k = vec![pos as f32; 12];
            c.write(0, pos, &k, &k);
        }
        let keys = c.keys(0, 2); // (max_pos, head_dim)
        let expected: Vec<f32> = (0..4).flat_map(|p| [p as f32; 4]).collect();
        assert_eq!(keys, expected.as_slice());
    }

    #[test]
    fn memory_is_positions_times_bytes_per_token() {
        let c = KvCache::new(layout(), 10);
        assert_eq!(layout().bytes_per_token(), 2 * 2 * 3 * 4 * 4);
        assert_eq!(c.reserved_bytes(), 10 * layout().bytes_per_token());
    }

    #[test]
    fn reserving_past_the_end_names_the_limit() {
        let mut c = KvCache::new(layout(), 8);
        let err = c.reserve(9).unwrap_err();
        assert!(
            matches!(
                err,
                Error::ContextFull {
                    limit: 8,
                    needed: 9
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("holds 8 positions"), "{err}");
    }
}
