//! Attention over the cache for one query row, with an optional sliding window, and the
//! family's scores (scale, soft-cap).

use ch03_attention::Heads;
use ch05_kv_cache::KvStore;
use ch06_quantization::Kernels;

// ANCHOR: attention_task
/// What every attention task of one layer call shares.
#[derive(Clone, Copy)]
pub struct LayerAttention<'k> {
    pub kernels: &'k dyn Kernels,
    pub layer: usize,
    pub heads: Heads,
    /// Positions a query sees, counting itself (`None`: all before it).
    pub window: Option<usize>,
    /// Scores are `scale · q·k` (`1/√head_dim` unless the family says).
    pub scale: f32,
    /// Scores soft-capped before the softmax (Gemma-2).
    pub softcap: Option<f32>,
}
// ANCHOR_END: attention_task

// ANCHOR: weights
/// Query heads' dot products with their keys (`rows`, a row of `n` scores a head), turned
/// into attention weights in place: scaled (`1/√head_dim`, or the family's scale),
/// soft-capped where the family says, each row softmaxed ([`Kernels::softmax_rows`]).
pub fn weights_rows(at: &LayerAttention, rows: &mut [f32], n: usize) {
    rows.iter_mut().for_each(|s| *s *= at.scale);
    if let Some(cap) = at.softcap {
        softcap(rows, cap);
    }
    at.kernels.softmax_rows(rows, n);
    flush_subnormal(rows);
}

/// Weights too small for a normal f32 (below 2⁻¹²⁶, about 1.2·10⁻³⁸) set to zero. A key that
/// far below the best (a score 87 or more under it) is lost in rounding beside any normal
/// weight, but a subnormal operand costs an x86 core a microcode assist, about a hundred cycles,
/// in every multiply that meets it: on a prompt whose attention is nearly one-hot, most of a
/// row. (llama.cpp rounds the weights to f16 for this product, which zeroes them below 6·10⁻⁸.)
pub fn flush_subnormal(row: &mut [f32]) {
    row.iter_mut()
        .filter(|w| w.is_subnormal())
        .for_each(|w| *w = 0.0);
}

/// Gemma-2's soft-cap: `cap · tanh(x / cap)` on every value, computed as llama.cpp does
/// (times `1/cap`, tanh, times `cap`). Near 0 it changes little; no value leaves `±cap`.
pub fn softcap(x: &mut [f32], cap: f32) {
    let inv = 1.0 / cap;
    x.iter_mut().for_each(|v| *v = (*v * inv).tanh() * cap);
}
// ANCHOR_END: weights

// ANCHOR: attend
/// Chapter 6's `attend` for one query row, with a window: the query at `pos` sees keys
/// `pos + 1 − window ..= pos` (all of `0..=pos` without one). The query heads that share a
/// KV head are done together, key by key, so each key and value is read from the cache once
/// for the group, not once per head (Gemma-3: four heads on one KV head of 256 floats).
/// Each head's numbers are chapter 6's, step for step: the same dot products, softmax and
/// additions in the same order.
pub fn attend<S: KvStore + ?Sized>(
    at: &LayerAttention,
    out: &mut [f32],
    q: &[f32],
    store: &S,
    pos: usize,
    scores: &mut Vec<f32>,
) {
    let (d, group) = (at.heads.head_dim, at.heads.group_size());
    for (kv, out_kv) in out.chunks_exact_mut(group * d).enumerate() {
        let hs = kv * group..(kv + 1) * group; // the query heads on this KV head
        attend_heads(at, out_kv, q, store, hs, pos, scores);
    }
}
// ANCHOR_END: attend

// ANCHOR: attend_heads
/// [`attend`] for the query heads `hs`, which share one KV head, writing their outputs
/// (`out`: `hs.len()` heads of `head_dim`). A decode step's attention can run each part of
/// a row on its own thread: every head's numbers are the same whichever heads it is done with.
pub fn attend_heads<S: KvStore + ?Sized>(
    at: &LayerAttention,
    out: &mut [f32],
    q: &[f32],
    store: &S,
    hs: std::ops::Range<usize>,
    pos: usize,
    scores: &mut Vec<f32>,
) {
    let (k, layer, heads) = (at.kernels, at.layer, at.heads);
    let d = heads.head_dim;
    let kv = hs.start / heads.group_size();
    let first = at.window.map_or(0, |w| (pos + 1).saturating_sub(w));
    let keys = first..pos + 1;
    let n = keys.len();
    scores.resize(hs.len() * n, 0.0); // (heads, n): one row of scores per head
    let runs = (d <= 64)
        .then(|| store.runs(layer, kv, keys.clone()))
        .flatten();
    if let Some((ks, vs)) = runs {
        // Small heads (SmolLM2's 64) with their keys side by side in the cache: the heads'
        // scores in one kernel call, each key loaded once for all of them, and their weighted
        // sums of values (kept in registers) in one more, each value loaded once; the same numbers as the
        // loops below. Large heads (Gemma-3's 256) go through the loops, which read each
        // key once for the heads together too.
        k.dot_f32_rows_many(&q[hs.start * d..hs.end * d], d, ks, &mut scores[..]);
        weights_rows(at, scores, n);
        let o = &mut out[..hs.len() * d];
        o.fill(0.0);
        k.axpy_rows_many(o, d, &scores[..], vs);
        return;
    }
    // ANCHOR_END: attend_heads
    // ANCHOR: attend_loops
    // each key once for the heads together, their dot products side by side
    let qs: Vec<&[f32]> = hs.clone().map(|h| &q[h * d..(h + 1) * d]).collect();
    let key_rows: Vec<&[f32]> = keys.clone().map(|j| store.key(layer, kv, j)).collect();
    k.dot_f32_many(&qs, &key_rows, &mut scores[..]);
    weights_rows(at, scores, n);
    // every head's weighted sum of the values, key after key: a whole group of four or more
    // heads with part of each output held in registers across the keys; the two heads of a
    // decode step's task value by value (across a long context, holding two heads' outputs
    // cost more than it saved: the same numbers either way)
    out.fill(0.0);
    if qs.len() >= 4 {
        let values: Vec<&[f32]> = keys.map(|j| store.value(layer, kv, j)).collect();
        k.axpy_many(out, &scores[..qs.len() * n], &values);
        return;
    }
    for (i, j) in keys.enumerate() {
        let value = store.value(layer, kv, j);
        for (g, o) in out.chunks_exact_mut(d).enumerate() {
            k.axpy(o, scores[g * n + i], value);
        }
    }
}
// ANCHOR_END: attend_loops

#[cfg(test)]
mod tests {
    use super::*;

    /// The soft-cap keeps every score inside ±cap and leaves small ones almost as they are.
    #[test]
    fn the_soft_cap_bends_large_scores_only() {
        let mut x = [-1e6f32, -100.0, -0.01, 0.0, 0.01, 3.0, 100.0, 1e6];
        let before = x;
        softcap(&mut x, 50.0);
        for (b, a) in before.iter().zip(&x) {
            assert!(a.abs() <= 50.0, "{b} capped at 50 became {a}, past the cap");
            assert!(
                a.signum() == b.signum() || *b == 0.0,
                "{b} changed sign: {a}"
            );
        }
        assert!(
            (x[4] - 0.01).abs() < 1e-6,
            "a score of 0.01 is left as it is: {}",
            x[4]
        );
        assert!(
            (x[5] - 3.0).abs() < 0.01,
            "3 under a cap of 50 barely moves: {}",
            x[5]
        );
        assert!(
            x[6] > 45.0 && x[6] < 50.0,
            "100 under a cap of 50 is bent to {}",
            x[6]
        );
    }
}
