//! The attention half of a decoder layer: project, rotate, attend, project back.
//!
//! ```text
//! xn (seq, dim) ──q_proj──▶ q (seq, q_dim)  ──RoPE──┐
//!               ──k_proj──▶ k (seq, kv_dim) ──RoPE──┼─▶ attention ─▶ (seq, q_dim) ──o_proj──▶ (seq, dim)
//!               ──v_proj──▶ v (seq, kv_dim) ────────┘   (causal, GQA: chapter 3)
//! ```
//!
//! The pieces are separate functions because chapter 5 reuses them: it keeps the `k` and
//! `v` rows of earlier tokens instead of recomputing them. Here, in chapter 4, the keys and
//! values a query attends over are exactly the rows computed in this call, handed over
//! through the [`KvRows`] trait. (Chapter 5's caches are paged or ring-shaped, which one
//! contiguous slice cannot describe, so it reuses these functions with a store of its own.)

use ch03_attention::{Mask, Pairing, RopeTable, attention};
use rayon::prelude::*;

use crate::Config;
use crate::linear::linear;
use crate::weights::LayerWeights;

/// A token sequence's projected queries, keys and values for one layer.
pub struct Qkv {
    pub q: Vec<f32>, // (seq, n_heads * head_dim), RoPE applied
    pub k: Vec<f32>, // (seq, n_kv_heads * head_dim), RoPE applied
    pub v: Vec<f32>, // (seq, n_kv_heads * head_dim)
}

// ANCHOR: kv_store
/// Where a layer's keys and values go, and which ones its queries read.
///
/// `store` receives the new rows of this call (`(seq, kv_dim)` each) and returns every
/// key and value row the queries should attend over, oldest first; the new queries are
/// the newest of those positions. Chapter 4 keeps nothing ([`NoCache`]); an appending
/// cache could return all it holds.
pub trait KvRows {
    fn store(&mut self, k: Vec<f32>, v: Vec<f32>) -> (&[f32], &[f32]);
}

/// No cache: the queries see only the rows of the current call, so every call must pass
/// the whole sequence from position 0.
#[derive(Default)]
pub struct NoCache {
    k: Vec<f32>, // (seq, kv_dim): this call's keys
    v: Vec<f32>, // (seq, kv_dim): this call's values
}

impl KvRows for NoCache {
    fn store(&mut self, k: Vec<f32>, v: Vec<f32>) -> (&[f32], &[f32]) {
        (self.k, self.v) = (k, v);
        (&self.k, &self.v)
    }
}
// ANCHOR_END: kv_store

// ANCHOR: qkv
/// Projects the normalised rows `xn` (`(seq, dim)`, the tokens at positions
/// `pos0..pos0 + seq`) to queries, keys and values, and rotates q and k to their positions.
pub fn project_qkv(
    w: &LayerWeights,
    cfg: &Config,
    rope: &RopeTable,
    xn: &[f32],
    pos0: usize,
) -> Qkv {
    let (dim, q_dim, kv_dim) = (cfg.hidden_size, cfg.q_dim(), cfg.kv_dim());
    let seq = xn.len() / dim;
    let mut q = vec![0.0f32; seq * q_dim]; // (seq, n_heads * head_dim)
    let mut k = vec![0.0f32; seq * kv_dim]; // (seq, n_kv_heads * head_dim)
    let mut v = vec![0.0f32; seq * kv_dim]; // (seq, n_kv_heads * head_dim)
    linear(&mut q, xn, &w.wq, seq, dim, q_dim);
    linear(&mut k, xn, &w.wk, seq, dim, kv_dim);
    linear(&mut v, xn, &w.wv, seq, dim, kv_dim);
    // Hugging Face's weights pair coordinate i with i + head_dim/2 (`rotate_half`).
    rope.apply(&mut q, cfg.n_heads, pos0, Pairing::SplitHalves);
    rope.apply(&mut k, cfg.n_kv_heads, pos0, Pairing::SplitHalves);
    Qkv { q, k, v }
}
// ANCHOR_END: qkv

// ANCHOR: attend
/// Causal grouped-query attention of the queries `q` (`(seq_q, q_dim)`, the newest
/// `seq_q` positions) over `k` and `v` (`(seq_k, kv_dim)`): chapter 3's `attention`,
/// with the query rows shared out between threads.
pub fn attend(cfg: &Config, q: &[f32], k: &[f32], v: &[f32]) -> Vec<f32> {
    let (q_dim, kv_dim) = (cfg.q_dim(), cfg.kv_dim());
    let (seq_q, seq_k) = (q.len() / q_dim, k.len() / kv_dim);
    let first = seq_k - seq_q; // the position of query row 0
    let mut out = vec![0.0f32; q.len()]; // (seq_q, n_heads * head_dim)
    // Bands of 8 query rows. Band rows i0..i1 sit at positions first+i0.. and, being
    // causal, need only the keys up to position first+i1: passing exactly those keys
    // keeps chapter 3's rule "the queries are the newest positions" true for each band.
    const BAND: usize = 8;
    out.par_chunks_mut(BAND * q_dim)
        .enumerate()
        .for_each(|(b, out_band)| {
            let (i0, rows) = (b * BAND, out_band.len() / q_dim);
            let keys = first + i0 + rows; // keys 0..keys are visible to this band
            let q_band = &q[i0 * q_dim..(i0 + rows) * q_dim]; // (rows, q_dim)
            attention(
                out_band,
                q_band,
                &k[..keys * kv_dim],
                &v[..keys * kv_dim],
                cfg.heads(),
                Mask::Causal,
            );
        });
    out
}
// ANCHOR_END: attend

// ANCHOR: attention_block
/// The attention sublayer on normalised rows `xn` (`(seq, dim)`, positions `pos0..`):
/// returns what it adds to the residual stream, `(seq, dim)`.
pub fn attention_block(
    w: &LayerWeights,
    cfg: &Config,
    rope: &RopeTable,
    xn: &[f32],
    pos0: usize,
    kv: &mut dyn KvRows,
) -> Vec<f32> {
    let (dim, q_dim) = (cfg.hidden_size, cfg.q_dim());
    let seq = xn.len() / dim;
    let Qkv { q, k, v } = project_qkv(w, cfg, rope, xn, pos0);
    let (k_all, v_all) = kv.store(k, v); // (seq_k, kv_dim) each
    let heads_out = attend(cfg, &q, k_all, v_all); // (seq, n_heads * head_dim)
    let mut out = vec![0.0f32; seq * dim]; // (seq, dim)
    linear(&mut out, &heads_out, &w.wo, seq, q_dim, dim);
    out
}
// ANCHOR_END: attention_block

#[cfg(test)]
mod tests {
    use super::*;
    use ch03_attention::Heads;

    /// Splitting the queries into bands and handing each band only its visible keys must
    /// give exactly chapter 3's single call over everything.
    #[test]
    fn banded_attention_matches_one_call() {
        let cfg = crate::weights::tests::tiny_config(true);
        let (seq, q_dim, kv_dim) = (21, cfg.q_dim(), cfg.kv_dim());
        let val = |i: usize| ((i * 7919 % 113) as f32 / 56.5) - 1.0;
        let q: Vec<f32> = (0..seq * q_dim).map(val).collect();
        let k: Vec<f32> = (0..seq * kv_dim).map(|i| val(i + 5)).collect();
        let v: Vec<f32> = (0..seq * kv_dim).map(|i| val(i + 11)).collect();
        let heads = Heads::new(cfg.n_heads, cfg.n_kv_heads, cfg.head_dim).unwrap();
        let mut whole = vec![0.0; seq * q_dim];
        attention(&mut whole, &q, &k, &v, heads, Mask::Causal);
        assert_eq!(attend(&cfg, &q, &k, &v), whole);
        // And the last 5 queries alone over all 21 keys (what a cache would ask for).
        let tail = attend(&cfg, &q[16 * q_dim..], &k, &v);
        assert_eq!(tail, whole[16 * q_dim..].to_vec());
    }
}
