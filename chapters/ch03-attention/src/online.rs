//! Online softmax: attention in one pass over the keys.
//!
//! The two-pass softmax first finds the row maximum, then sums `exp(s − max)`, then
//! normalises: the whole row of scores has to exist before any value is weighted. The
//! online form (Milakov & Gimelshein, 2018) keeps a running maximum `m` and a running
//! sum `l` of `exp(s − m)`; when a new score beats `m`, everything accumulated so far was
//! measured against a smaller maximum and is multiplied by `exp(m_old − m_new)`. Do the
//! same to a running weighted sum of values and attention needs no score buffer at all:
//! each key is read once and forgotten. That is the core of FlashAttention, which does
//! it block by block so the scores never leave on-chip memory.

use ch01_tensors::ops;

use crate::attention::Heads;
use crate::mask::Mask;

// ANCHOR: state
/// The running state of an online softmax over the values seen so far.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OnlineSoftmax {
    /// The largest score seen (`−∞` before the first).
    pub max: f32,
    /// `Σ exp(s − max)` over the scores seen.
    pub sum: f32,
}

impl OnlineSoftmax {
    /// Nothing seen yet.
    pub fn new() -> OnlineSoftmax {
        OnlineSoftmax {
            max: f32::NEG_INFINITY,
            sum: 0.0,
        }
    }

    /// Takes in one score. Returns `(rescale, p)`: the factor by which anything
    /// accumulated so far must be multiplied (it was relative to the old max), and
    /// `p = exp(s − max)`, the unnormalised weight of this score under the new max.
    pub fn push(&mut self, s: f32) -> (f32, f32) {
        let rescale = if s > self.max {
            let r = (self.max - s).exp(); // exp(−∞) = 0 for the first score
            self.max = s;
            self.sum *= r;
            r
        } else {
            1.0
        };
        let p = (s - self.max).exp();
        self.sum += p;
        (rescale, p)
    }
}
// ANCHOR_END: state

impl Default for OnlineSoftmax {
    fn default() -> Self {
        OnlineSoftmax::new()
    }
}

/// Softmax of `x` in place, finding max and sum in a single pass over `x` (plus the
/// normalising pass that writes the result).
pub fn online_softmax_inplace(x: &mut [f32]) {
    let mut state = OnlineSoftmax::new();
    for &s in x.iter() {
        state.push(s);
    }
    for s in x.iter_mut() {
        *s = (*s - state.max).exp() / state.sum;
    }
}

// ANCHOR: attention_online
/// The same contract as [`crate::attention::attention`] (shapes, positions, mask), but
/// each query head streams over its keys once, with no buffer of scores.
pub fn attention_online(
    out: &mut [f32],
    q: &[f32],
    k: &[f32],
    v: &[f32],
    heads: Heads,
    mask: Mask,
) {
    let (d, qd, kd) = (heads.head_dim, heads.q_dim(), heads.kv_dim());
    assert_eq!(out.len(), q.len(), "out must have q's shape");
    let (seq_q, seq_k) = heads.seqs(q, k, v);
    assert_ne!(
        mask,
        Mask::SlidingWindow(0),
        "a window of 0 lets a query see nothing"
    );
    let scale = 1.0 / (d as f32).sqrt();
    for i in 0..seq_q {
        let keys = mask.visible(seq_k - seq_q + i, seq_k);
        for h in 0..heads.n_heads {
            let kv_off = heads.kv_head(h) * d;
            let q_head = &q[i * qd + h * d..i * qd + (h + 1) * d]; // (head_dim)
            let acc = &mut out[i * qd + h * d..i * qd + (h + 1) * d]; // (head_dim) Σ p·v so far
            acc.fill(0.0);
            let mut state = OnlineSoftmax::new();
            for j in keys.clone() {
                let k_head = &k[j * kd + kv_off..j * kd + kv_off + d]; // (head_dim)
                let v_head = &v[j * kd + kv_off..j * kd + kv_off + d]; // (head_dim)
                let (rescale, p) = state.push(ops::dot(q_head, k_head) * scale);
                for (a, &vc) in acc.iter_mut().zip(v_head) {
                    *a = *a * rescale + p * vc;
                }
            }
            let inv = 1.0 / state.sum; // normalise once, at the end
            acc.iter_mut().for_each(|a| *a *= inv);
        }
    }
}
// ANCHOR_END: attention_online
