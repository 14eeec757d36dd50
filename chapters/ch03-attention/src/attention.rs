//! Multi-head attention with grouped-query sharing, in the layout the forward pass uses.
//!
//! ```text
//! q   (seq_q, n_heads    * head_dim)   one row per query token, heads side by side
//! k   (seq_k, n_kv_heads * head_dim)   one row per key token (the KV cache, later)
//! v   (seq_k, n_kv_heads * head_dim)
//! out (seq_q, n_heads    * head_dim)   ready for the output projection o_proj
//! ```
//!
//! With grouped-query attention (GQA) several query heads read the same K/V head: query
//! head `h` uses KV head `h / (n_heads / n_kv_heads)`. SmolLM2 has 9 query heads over 3
//! KV heads, Gemma-3-270M 4 over 1. The K/V rows are never copied per query head; the
//! index does the sharing, so the KV cache is `n_heads / n_kv_heads` times smaller.

use std::ops::Range;

use ch01_tensors::ops;

use crate::Error;
use crate::mask::Mask;

// ANCHOR: heads
/// How the heads of one attention layer are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Heads {
    /// Query heads (SmolLM2: 9).
    pub n_heads: usize,
    /// Key/value heads, dividing `n_heads` (SmolLM2: 3; equal to `n_heads` for plain MHA).
    pub n_kv_heads: usize,
    /// Coordinates per head (SmolLM2: 64).
    pub head_dim: usize,
}

impl Heads {
    /// Checks that the numbers describe a real layout.
    pub fn new(n_heads: usize, n_kv_heads: usize, head_dim: usize) -> Result<Heads, Error> {
        if n_heads == 0 || n_kv_heads == 0 || head_dim == 0 || !n_heads.is_multiple_of(n_kv_heads) {
            return Err(Error::Config(format!(
                "bad head layout: {n_heads} query heads, {n_kv_heads} KV heads, head_dim {head_dim} \
                 (the KV heads must divide the query heads)"
            )));
        }
        Ok(Heads {
            n_heads,
            n_kv_heads,
            head_dim,
        })
    }

    /// Query heads per KV head.
    pub fn group_size(&self) -> usize {
        self.n_heads / self.n_kv_heads
    }

    /// The KV head that query head `h` reads.
    pub fn kv_head(&self, h: usize) -> usize {
        h / self.group_size()
    }

    /// Width of a q or out row: `n_heads * head_dim`.
    pub fn q_dim(&self) -> usize {
        self.n_heads * self.head_dim
    }

    /// Width of a k or v row: `n_kv_heads * head_dim`.
    pub fn kv_dim(&self) -> usize {
        self.n_kv_heads * self.head_dim
    }
    // ANCHOR_END: heads

    // ANCHOR: heads_seqs
    /// `(seq_q, seq_k)` from the slice lengths, checking the layout.
    pub(crate) fn seqs(&self, q: &[f32], k: &[f32], v: &[f32]) -> (usize, usize) {
        let (qd, kd) = (self.q_dim(), self.kv_dim());
        assert_eq!(
            q.len() % qd,
            0,
            "q is not (seq_q, {} * {})",
            self.n_heads,
            self.head_dim
        );
        assert_eq!(
            k.len() % kd,
            0,
            "k is not (seq_k, {} * {})",
            self.n_kv_heads,
            self.head_dim
        );
        assert_eq!(k.len(), v.len(), "k and v must have the same shape");
        let (seq_q, seq_k) = (q.len() / qd, k.len() / kd);
        assert!(seq_q <= seq_k, "{seq_q} queries but only {seq_k} keys");
        (seq_q, seq_k)
    }
}
// ANCHOR_END: heads_seqs

// ANCHOR: scores
/// Softmax weights of one query head over the keys in `keys`, written to `w[keys]`
/// (`w` is indexed by key position; entries outside `keys` are not touched).
fn head_weights(
    w: &mut [f32],
    q_head: &[f32],
    k: &[f32],
    kv_off: usize,
    heads: Heads,
    keys: Range<usize>,
) {
    let (d, kd) = (heads.head_dim, heads.kv_dim());
    // Dividing by √d keeps the scores' spread independent of d: the dot product of two
    // vectors with unit-variance coordinates has variance d.
    let scale = 1.0 / (d as f32).sqrt();
    for j in keys.clone() {
        let k_head = &k[j * kd + kv_off..j * kd + kv_off + d]; // (head_dim)
        w[j] = ops::dot(q_head, k_head) * scale;
    }
    ops::softmax_inplace(&mut w[keys]); // subtracts the max first, so exp never overflows
}
// ANCHOR_END: scores

// ANCHOR: attention
/// Scaled dot-product attention over all heads: `out = softmax(q·kᵀ/√d) · v` per head,
/// query head `h` reading KV head `h / (n_heads / n_kv_heads)`.
///
/// Shapes are in the module docs; `seq_q` and `seq_k` come from the slice lengths. The
/// queries are the *newest* `seq_q` tokens: query row `i` sits at position
/// `seq_k − seq_q + i`, so a prefill passes `seq_q == seq_k` and a decode step with a KV
/// cache passes one query row and the whole cache. `mask` decides which keys each query
/// sees; masked keys are skipped, which is exactly weight zero.
///
/// # Panics
/// If the slice lengths do not fit `heads` (a bug in the caller, not bad input).
pub fn attention(out: &mut [f32], q: &[f32], k: &[f32], v: &[f32], heads: Heads, mask: Mask) {
    let (seq_q, seq_k) = heads.seqs(q, k, v);
    let (d, qd, kd) = (heads.head_dim, heads.q_dim(), heads.kv_dim());
    assert_eq!(out.len(), q.len(), "out must have q's shape");
    assert_ne!(
        mask,
        Mask::SlidingWindow(0),
        "a window of 0 lets a query see nothing"
    );
    let mut w = vec![0.0f32; seq_k]; // (seq_k) weights of one query head
    for i in 0..seq_q {
        let keys = mask.visible(seq_k - seq_q + i, seq_k);
        for h in 0..heads.n_heads {
            let kv_off = heads.kv_head(h) * d; // where this head's K/V sit in a k/v row
            let q_head = &q[i * qd + h * d..i * qd + (h + 1) * d]; // (head_dim)
            head_weights(&mut w, q_head, k, kv_off, heads, keys.clone());
            // out_head = Σ_j w[j] · v_j  over the visible keys
            let o = &mut out[i * qd + h * d..i * qd + (h + 1) * d]; // (head_dim)
            o.fill(0.0);
            for j in keys.clone() {
                let v_head = &v[j * kd + kv_off..j * kd + kv_off + d]; // (head_dim)
                for (o_c, &v_c) in o.iter_mut().zip(v_head) {
                    *o_c += w[j] * v_c;
                }
            }
        }
    }
}
// ANCHOR_END: attention

/// The attention weights themselves, `(n_heads, seq_q, seq_k)`: what [`attention`]
/// multiplies `v` by. Masked entries are exactly `0.0`. Used for heatmaps and tests.
pub fn attention_weights(q: &[f32], k: &[f32], heads: Heads, mask: Mask) -> Vec<f32> {
    let (seq_q, seq_k) = heads.seqs(q, k, k);
    let (d, qd) = (heads.head_dim, heads.q_dim());
    let mut weights = vec![0.0f32; heads.n_heads * seq_q * seq_k]; // (n_heads, seq_q, seq_k)
    for h in 0..heads.n_heads {
        for i in 0..seq_q {
            let keys = mask.visible(seq_k - seq_q + i, seq_k);
            let q_head = &q[i * qd + h * d..i * qd + (h + 1) * d]; // (head_dim)
            let row = &mut weights[(h * seq_q + i) * seq_k..(h * seq_q + i + 1) * seq_k];
            head_weights(row, q_head, k, heads.kv_head(h) * d, heads, keys);
        }
    }
    weights
}

// ANCHOR: repeat_kv
/// The memory-hungry way to do GQA: copy each KV head `group` times so that K/V have
/// one head per query head, then run plain multi-head attention. `x` is
/// `(seq, n_kv_heads * head_dim)`; the result is `(seq, n_kv_heads * group * head_dim)`.
/// Kept as the reference the tests compare [`attention`] against.
pub fn repeat_kv(x: &[f32], n_kv_heads: usize, group: usize, head_dim: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(x.len() * group); // (seq, n_kv_heads * group * head_dim)
    for row in x.chunks_exact(n_kv_heads * head_dim) {
        for kv_head in row.chunks_exact(head_dim) {
            for _ in 0..group {
                out.extend_from_slice(kv_head);
            }
        }
    }
    out
}
// ANCHOR_END: repeat_kv
