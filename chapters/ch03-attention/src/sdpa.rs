//! Scaled dot-product attention for one head, written the way the formula reads:
//!
//! ```text
//! Attention(Q, K, V) = softmax(Q·Kᵀ / √d + M) · V
//! ```
//!
//! with chapter 1's tensors and a materialised additive mask `M`. This is the reference
//! the fast kernel in [`mod@crate::attention`] is tested against; it builds the whole
//! `(seq_q, seq_k)` score matrix, which the kernel never does.

use ch01_tensors::{Tensor, ops};

use crate::Error;

// ANCHOR: sdpa
/// One head: `q` `(seq_q, d)`, `k` `(seq_k, d)`, `v` `(seq_k, d_v)`, `mask` `(seq_q, seq_k)`
/// additive (`0` or `−∞`). Returns `(out (seq_q, d_v), weights (seq_q, seq_k))`.
pub fn sdpa(q: &Tensor, k: &Tensor, v: &Tensor, mask: &[f32]) -> Result<(Tensor, Tensor), Error> {
    for (name, t) in [("q", q), ("k", k), ("v", v)] {
        if t.shape().len() != 2 {
            return Err(Error::Shape(format!(
                "{name} must be 2-D, got shape {:?}",
                t.shape()
            )));
        }
    }
    let (seq_q, d) = (q.shape()[0], q.shape()[1]);
    let seq_k = k.shape()[0];
    if mask.len() != seq_q * seq_k {
        return Err(Error::Shape(format!(
            "mask has {} values, expected ({seq_q}, {seq_k})",
            mask.len()
        )));
    }
    let kt = k.transpose(0, 1).contiguous(); // (d, seq_k)
    let mut scores = q.matmul(&kt)?.to_vec(); // (seq_q, seq_k)
    let scale = 1.0 / (d as f32).sqrt();
    for (s, m) in scores.iter_mut().zip(mask) {
        *s = *s * scale + m;
    }
    for row in scores.chunks_exact_mut(seq_k) {
        ops::softmax_inplace(row); // each query's weights sum to 1
    }
    let weights = Tensor::from_vec(scores, &[seq_q, seq_k])?; // (seq_q, seq_k)
    let out = weights.matmul(v)?; // (seq_q, d_v)
    Ok((out, weights))
}
// ANCHOR_END: sdpa
