//! Attention of one new token over the cache.
//!
//! This is chapter 3's [`ch03_attention::attention()`] for a single query row, with one
//! change: instead of indexing a `(seq_k, n_kv_heads * head_dim)` K matrix, it asks the
//! [`KvStore`] for each key and value. The arithmetic — the scores, their order, the
//! softmax, the weighted sum — is the same, float for float, so a cached model computes
//! exactly what the uncached one does.

use ch01_tensors::ops;
use ch03_attention::{Heads, Mask};

use crate::store::KvStore;

// ANCHOR: attend
/// `out (n_heads * head_dim) = softmax(q·Kᵀ/√d) · V` for the query row `q`
/// `(n_heads * head_dim)` of the token at `pos`, over the keys of `layer` that `mask`
/// lets it see (all of `0..=pos` for a causal layer). Query head `h` reads KV head
/// `h / (n_heads / n_kv_heads)`. `scores` is scratch, grown as needed.
#[allow(clippy::too_many_arguments)]
pub fn attend<S: KvStore + ?Sized>(
    out: &mut [f32],
    q: &[f32],
    store: &S,
    layer: usize,
    heads: Heads,
    pos: usize,
    mask: Mask,
    scores: &mut Vec<f32>,
) {
    let d = heads.head_dim;
    assert_eq!(q.len(), heads.q_dim(), "q is not (n_heads * head_dim)");
    assert_eq!(out.len(), q.len(), "out must have q's shape");
    let keys = mask.visible(pos, pos + 1); // the positions this token may look at
    let scale = 1.0 / (d as f32).sqrt();
    scores.resize(keys.len(), 0.0); // (visible keys)
    for h in 0..heads.n_heads {
        let kv = heads.kv_head(h);
        let q_head = &q[h * d..(h + 1) * d]; // (head_dim)
        for (s, j) in scores.iter_mut().zip(keys.clone()) {
            *s = ops::dot(q_head, store.key(layer, kv, j)) * scale;
        }
        ops::softmax_inplace(scores);
        let o = &mut out[h * d..(h + 1) * d]; // (head_dim)
        o.fill(0.0);
        for (&w, j) in scores.iter().zip(keys.clone()) {
            for (o_c, &v_c) in o.iter_mut().zip(store.value(layer, kv, j)) {
                *o_c += w * v_c;
            }
        }
    }
}
// ANCHOR_END: attend

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contiguous::KvCache;
    use crate::paged::PagedCache;
    use crate::ring::RingCache;
    use crate::store::KvLayout;

    /// Deterministic pseudo-random floats in [-1, 1).
    fn noise(n: usize, seed: u64) -> Vec<f32> {
        ch01_tensors::random::uniform(n, seed)
    }

    const HEADS: Heads = Heads {
        n_heads: 6,
        n_kv_heads: 2,
        head_dim: 8,
    };
    const SEQ: usize = 37;

    /// Fills `store` (layer 1) with K/V rows and runs every query through [`attend`]:
    /// `(SEQ, q_dim)`.
    fn cached_attention<S: KvStore>(
        store: &mut S,
        q: &[f32],
        k: &[f32],
        v: &[f32],
        mask: Mask,
    ) -> Vec<f32> {
        let (qd, kd) = (HEADS.q_dim(), HEADS.kv_dim());
        let mut out = vec![0.0; q.len()];
        let mut scores = Vec::new();
        store.reserve(SEQ).unwrap();
        for pos in 0..SEQ {
            store.write(
                1,
                pos,
                &k[pos * kd..(pos + 1) * kd],
                &v[pos * kd..(pos + 1) * kd],
            );
            let row = &mut out[pos * qd..(pos + 1) * qd];
            attend(
                row,
                &q[pos * qd..(pos + 1) * qd],
                store,
                1,
                HEADS,
                pos,
                mask,
                &mut scores,
            );
        }
        out
    }

    fn inputs() -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        (
            noise(SEQ * HEADS.q_dim(), 1),
            noise(SEQ * HEADS.kv_dim(), 2),
            noise(SEQ * HEADS.kv_dim(), 3),
        )
    }

    fn layout() -> KvLayout {
        KvLayout {
            n_layers: 2,
            n_kv_heads: 2,
            head_dim: 8,
        }
    }

    #[test]
    fn contiguous_cache_equals_chapter_3_attention_bitwise() {
        let (q, k, v) = inputs();
        let mut expected = vec![0.0; q.len()];
        ch03_attention::attention(&mut expected, &q, &k, &v, HEADS, Mask::Causal);
        let got = cached_attention(&mut KvCache::new(layout(), 64), &q, &k, &v, Mask::Causal);
        assert_eq!(
            got, expected,
            "token-by-token over the cache must equal the full causal attention"
        );
    }

    #[test]
    fn paged_cache_equals_contiguous_bitwise() {
        let (q, k, v) = inputs();
        let contiguous =
            cached_attention(&mut KvCache::new(layout(), 64), &q, &k, &v, Mask::Causal);
        let mut pool = PagedCache::new(layout(), 16, 4, 64);
        let _other = pool.new_seq(); // a sequence that took block 0 first
        pool.seq(_other).reserve(3).unwrap();
        let id = pool.new_seq();
        let paged = cached_attention(&mut pool.seq(id), &q, &k, &v, Mask::Causal);
        assert_eq!(
            pool.table(id).blocks[0],
            1,
            "the sequence does not start at block 0"
        );
        assert_eq!(paged, contiguous);
    }

    #[test]
    fn ring_buffer_equals_full_attention_with_a_sliding_window_mask() {
        let (q, k, v) = inputs();
        for window in [1, 5, 16] {
            let mask = Mask::SlidingWindow(window);
            let mut expected = vec![0.0; q.len()];
            ch03_attention::attention(&mut expected, &q, &k, &v, HEADS, mask);
            let mut ring = RingCache::new(layout(), &[None, Some(window)], 64).unwrap();
            let got = cached_attention(&mut ring, &q, &k, &v, mask);
            assert_eq!(
                got, expected,
                "window {window}: the ring holds only {window} positions"
            );
        }
    }
}
