//! The feed-forward half of a decoder layer: SwiGLU.
//!
//! ```text
//! xn (seq, dim) ──gate_proj──▶ g (seq, ffn) ──SiLU──┐
//!               ──up_proj────▶ u (seq, ffn) ────────×──▶ (seq, ffn) ──down_proj──▶ (seq, dim)
//! ```
//!
//! Attention moves information *between* positions; the FFN works on each position alone,
//! and holds most of the parameters (3 × 576 × 1536 of SmolLM2's 3.5 M per layer). The
//! "gated" part: `up` carries the content, and `SiLU(gate)` — a smooth switch that is ≈ 0
//! for negative inputs and ≈ the input for positive ones — decides, coordinate by
//! coordinate, how much of it passes.

use ch01_tensors::ops;

use crate::Config;
use crate::linear::linear;
use crate::weights::LayerWeights;

// ANCHOR: ffn
/// `down( SiLU(gate(xn)) ⊙ up(xn) )` on normalised rows `xn` (`(seq, dim)`); returns what
/// the FFN adds to the residual stream, `(seq, dim)`.
pub fn ffn(w: &LayerWeights, cfg: &Config, xn: &[f32]) -> Vec<f32> {
    let (dim, hidden) = (cfg.hidden_size, cfg.intermediate_size);
    let seq = xn.len() / dim;
    let mut gate = vec![0.0f32; seq * hidden]; // (seq, ffn)
    let mut up = vec![0.0f32; seq * hidden]; // (seq, ffn)
    linear(&mut gate, xn, &w.w_gate, seq, dim, hidden);
    linear(&mut up, xn, &w.w_up, seq, dim, hidden);
    ops::silu_inplace(&mut gate); // SiLU(g) = g · σ(g)
    ops::mul_inplace(&mut gate, &up); // gate ← SiLU(g) ⊙ u   (seq, ffn)
    let mut out = vec![0.0f32; seq * dim]; // (seq, dim)
    linear(&mut out, &gate, &w.w_down, seq, hidden, dim);
    out
}
// ANCHOR_END: ffn
