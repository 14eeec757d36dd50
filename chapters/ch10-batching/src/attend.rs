//! Chapter 8's fast attention path over a paged sequence, a block at a time.
//!
//! For small heads (SmolLM2's 64 floats) chapter 8's `attend` computes the scores of the
//! heads on a KV head with one `dot_f32_rows_many` call and their weighted sums of values
//! with one `axpy_rows_many` call, when the store keeps the keys side by side
//! (`KvStore::runs`). Chapter 9's ring cache always does; a paged sequence does only inside
//! a block, so `attend` would take its loop path, a kernel call per key for the scores and
//! more for the values. Here the calls are made once per block instead:
//! `dot_f32_rows_many` is a `dot_f32` per query and row, and `axpy_rows_many` adds row after
//! row into each output, which it loads at the start of a call and stores at the end — so
//! cutting the rows into blocks changes no bit (the batch invariance tests compare with
//! chapter 9's ring cache).

use ch05_kv_cache::KvStore;
use ch08_gguf::engine::{LayerAttention, weights_rows};

use crate::seq::SeqKv;

// ANCHOR: attend_blocks
/// Attention of one query row `q` (`(n_heads * head_dim)`) at position `pos` over `store`'s
/// positions (the last `window` of them, or all), for the query heads `hs` (all of them, or
/// a part of one KV head's group), into `out` (`hs.len()` heads): chapter 8's fast path,
/// with one call for the scores of a KV head's heads per block of the sequence, and one for
/// their weighted sums. `at`: the layer, its heads, window and scores (chapter 8's).
pub fn attend_blocks(
    at: &LayerAttention,
    out: &mut [f32],
    q: &[f32],
    store: &SeqKv,
    hs: std::ops::Range<usize>,
    pos: usize,
    scores: &mut Vec<f32>,
) {
    let (k, layer, heads) = (at.kernels, at.layer, at.heads);
    let (d, bs) = (heads.head_dim, store.blocks.block_size());
    let first = at.window.map_or(0, |w| (pos + 1).saturating_sub(w));
    let n = pos + 1 - first;
    let group = heads.group_size();
    // the positions first..=pos cut at block boundaries: (offset in the row, positions)
    let runs = || {
        let mut p = first;
        std::iter::from_fn(move || {
            (p <= pos).then(|| {
                let end = ((p / bs + 1) * bs).min(pos + 1);
                let run = (p - first, p..end);
                p = end;
                run
            })
        })
    };
    // the heads of `hs` on each KV head together: each block's keys loaded once for them
    for kv in hs.start / group..hs.end.div_ceil(group) {
        let part = hs.start.max(kv * group)..hs.end.min((kv + 1) * group);
        let heads_here = part.len();
        scores.resize(heads_here * (n + bs), 0.0);
        let (rows, block) = scores.split_at_mut(heads_here * n); // rows: (heads, n)
        let qs = &q[part.start * d..part.end * d];
        for (i, ps) in runs() {
            let (ks, _) = store.runs(layer, kv, ps.clone()).expect("inside one block");
            let block = &mut block[..heads_here * ps.len()]; // (heads, this run)
            k.dot_f32_rows_many(qs, d, ks, block);
            for (row, run) in rows.chunks_exact_mut(n).zip(block.chunks_exact(ps.len())) {
                row[i..i + ps.len()].copy_from_slice(run);
            }
        }
        // ANCHOR_END: attend_blocks
        // ANCHOR: attend_blocks_values
        weights_rows(at, rows, n); // chapter 8's scale, soft-cap and softmax, row by row
        let h = part.start - hs.start;
        let o = &mut out[h * d..(h + heads_here) * d]; // (heads, d)
        o.fill(0.0);
        for (i, ps) in runs() {
            let (_, vs) = store.runs(layer, kv, ps.clone()).expect("inside one block");
            let w = &mut block[..heads_here * ps.len()]; // (heads, this run): its weights
            for (run, row) in w.chunks_exact_mut(ps.len()).zip(rows.chunks_exact(n)) {
                run.copy_from_slice(&row[i..i + ps.len()]);
            }
            k.axpy_rows_many(o, d, w, vs);
        }
    }
}
// ANCHOR_END: attend_blocks_values
