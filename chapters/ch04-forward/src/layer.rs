//! One decoder layer: the two sublayers, each wrapped in "normalise, compute, add back".
//!
//! ```text
//! x ─┬─ RMSNorm ── attention ──(+)─┬─ RMSNorm ── SwiGLU FFN ──(+)──▶ x'
//!    └──────────────────────────────┘└────────────────────────────┘
//!               residual                       residual
//! ```
//!
//! `x`, the residual stream, is never normalised in place: each sublayer reads a
//! normalised *copy* and adds its output back. Every layer thus nudges the same running
//! vector, and the layer's input reaches its output unchanged by the addition, which is
//! what lets thirty of these be stacked and still trained.

use ch01_tensors::ops;
use ch03_attention::RopeTable;

use crate::Config;
use crate::attention::{KvRows, attention_block};
use crate::ffn::ffn;
use crate::weights::LayerWeights;

// ANCHOR: rmsnorm_rows
/// RMSNorm of every row of `x` (`(seq, dim)`) with gain `weight` (`(dim)`): a new buffer.
pub fn rmsnorm_rows(x: &[f32], weight: &[f32], eps: f32) -> Vec<f32> {
    let dim = weight.len();
    let mut out = vec![0.0f32; x.len()]; // (seq, dim)
    for (o, row) in out.chunks_exact_mut(dim).zip(x.chunks_exact(dim)) {
        ops::rmsnorm(o, row, weight, eps);
    }
    out
}
// ANCHOR_END: rmsnorm_rows

// ANCHOR: layer
/// Runs decoder layer `w` on the residual stream `x` (`(seq, dim)`, the tokens at
/// positions `pos0..pos0 + seq`), in place. `kv` decides which keys and values the
/// queries see: [`crate::attention::NoCache`] (with `pos0 = 0`) for this chapter.
pub fn layer_forward(
    w: &LayerWeights,
    cfg: &Config,
    rope: &RopeTable,
    x: &mut [f32],
    pos0: usize,
    kv: &mut dyn KvRows,
) {
    let eps = cfg.rms_norm_eps;
    // Attention sublayer: x += Attn(RMSNorm(x))
    let xn = rmsnorm_rows(x, &w.input_norm, eps); // (seq, dim)
    let attn = attention_block(w, cfg, rope, &xn, pos0, kv); // (seq, dim)
    ops::add_inplace(x, &attn);
    // Feed-forward sublayer: x += FFN(RMSNorm(x))
    let xn = rmsnorm_rows(x, &w.post_norm, eps); // (seq, dim)
    let f = ffn(w, cfg, &xn); // (seq, dim)
    ops::add_inplace(x, &f);
}
// ANCHOR_END: layer
