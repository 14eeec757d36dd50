//! Which keys a query may look at.
//!
//! A decoder generates left to right, so during training token `t` must not see tokens
//! after it, or predicting the next token would be copying it. The causal mask forbids
//! `k_pos > q_pos`. Gemma-3 adds a sliding window on most layers: a token sees only the
//! last `window` positions (itself included), which caps those layers' KV cache at
//! `window` entries however long the text grows.
//!
//! A mask is two things in this crate: a predicate `allowed(q_pos, k_pos)`, which the
//! attention kernels use to skip keys, and a materialised additive matrix of `0` and
//! `−∞` added to the scores, the form the textbook formula (and PyTorch) use.

use std::ops::Range;

// ANCHOR: predicates
/// Causal: a query sees itself and every earlier position.
pub fn causal_allowed(q_pos: usize, k_pos: usize) -> bool {
    k_pos <= q_pos
}

/// Sliding-window causal: a query sees the last `window` positions, itself included,
/// so `q_pos − window < k_pos ≤ q_pos` (Hugging Face's and llama.cpp's convention).
pub fn sliding_window_allowed(q_pos: usize, k_pos: usize, window: usize) -> bool {
    k_pos <= q_pos && q_pos - k_pos < window
}
// ANCHOR_END: predicates

// ANCHOR: mask
/// The mask of one attention layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mask {
    /// Every earlier position and itself (SmolLM2, Gemma-3's global layers).
    Causal,
    /// The last `window` positions, itself included (Gemma-3's local layers: 512).
    /// `window` must be at least 1, or a query would see nothing.
    SlidingWindow(usize),
}

impl Mask {
    /// May the query at `q_pos` look at the key at `k_pos`?
    pub fn allowed(self, q_pos: usize, k_pos: usize) -> bool {
        match self {
            Mask::Causal => causal_allowed(q_pos, k_pos),
            Mask::SlidingWindow(window) => sliding_window_allowed(q_pos, k_pos, window),
        }
    }

    /// The keys the query at `q_pos` may look at, among `0..seq_k`: always one contiguous
    /// range ending at `q_pos`, which lets the kernels loop over it and skip the rest.
    pub fn visible(self, q_pos: usize, seq_k: usize) -> Range<usize> {
        let end = (q_pos + 1).min(seq_k);
        let start = match self {
            Mask::Causal => 0,
            Mask::SlidingWindow(window) => (q_pos + 1).saturating_sub(window),
        };
        start.min(end)..end
    }
}
// ANCHOR_END: mask

impl Mask {
    // ANCHOR: additive
    /// The materialised additive mask, `(seq_q, seq_k)`: `0` where allowed, `−∞` where
    /// not. Query row `i` sits at position `seq_k − seq_q + i` (the queries are the
    /// newest tokens, see [`crate::attention::attention`]). Added to the scores before
    /// the softmax, `−∞` becomes `exp(−∞) = 0`: exactly zero weight.
    pub fn additive(self, seq_q: usize, seq_k: usize) -> Vec<f32> {
        assert!(seq_q <= seq_k, "more queries ({seq_q}) than keys ({seq_k})");
        let mut m = vec![0.0f32; seq_q * seq_k]; // (seq_q, seq_k)
        for i in 0..seq_q {
            let q_pos = seq_k - seq_q + i;
            for j in 0..seq_k {
                if !self.allowed(q_pos, j) {
                    m[i * seq_k + j] = f32::NEG_INFINITY;
                }
            }
        }
        m
    }
    // ANCHOR_END: additive
}
