//! The batched forward step: rows from many sequences through the model at once.
//!
//! Chapter 8's `Engine::layer` already runs many rows together: the products over all
//! rows, then RoPE, the KV writes and attention row by row. A batch step calls that same
//! layer with rows that belong to different sequences. The products — every weight read
//! once for all the rows — do not care whose rows they are; RoPE, the KV write and attention
//! do, so each row carries its sequence and its position, and `Batch` (chapter 8's
//! `LayerRows`) tells the layer where each row's keys and values are:
//!
//! ```text
//! rows   seq 0 pos 17 │ seq 1 pos 4 │ seq 2 pos 0 1 2 3 (a prefill chunk)
//! x      (rows, dim)                 embedding rows, one per token
//! q,k,v  (rows, q_dim), (rows, kv_dim) ×2   one product each, over all rows
//! RoPE   each row at its own position
//! K/V    each row into its own sequence's blocks, all rows before any attends
//! attend each row against its own sequence (chapter 8's attend, unchanged)
//! ```
//!
//! Each output of chapter 8's products equals the scalar kernel's dot product whatever the
//! number of rows, and everything else is per row, so a row's numbers are the same in a batch
//! of one or of sixteen: batch invariance by construction (the tests check it).

use std::ops::Range;

use ch03_attention::Heads;
use ch08_gguf::engine::{Engine, LayerAttention, LayerRows, attend, attend_heads, attention_part};

use crate::attend::attend_blocks;
use crate::gather::{Gathered, attend_f16};
use crate::seq::{KvBlocks, KvPrecision, SeqKv};

// ANCHOR: row
/// One row of a step: `token` at position `pos` of sequence `seq` (an index into the step's
/// block tables); `logits`: whether the step returns this row's logits (a sequence's last
/// known token).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    pub seq: usize,
    pub token: u32,
    pub pos: usize,
    pub logits: bool,
}
// ANCHOR_END: row

// ANCHOR: step
/// Runs `rows` through the model; `tables[r.seq]` is the block table of row `r`'s
/// sequence, already covering `r.pos`. Returns the logits of the rows that asked for them,
/// in row order: `(rows asking, vocab)`.
pub fn forward_batch(
    engine: &Engine,
    kv: &mut KvBlocks,
    tables: &[&[usize]],
    rows: &[Row],
) -> Result<Vec<f32>, String> {
    let m = engine.model;
    let dim = m.config.hidden_size;
    let ids: Vec<u32> = rows.iter().map(|r| r.token).collect();
    let mut x = engine.embed(&ids).map_err(|e| e.to_string())?; // (rows, dim)
    let max_pos = m.max_positions();
    let mut batch = Batch {
        kv,
        tables,
        rows,
        max_pos,
    };
    let mut buffers = ch08_gguf::engine::Buffers::default(); // one set for every layer
    for (l, w) in m.layers.iter().enumerate() {
        engine.layer(l, w, &mut batch, &mut x, &mut buffers); // chapter 8's layer over these rows
    }
    let last: Vec<f32> = rows
        .iter()
        .zip(x.chunks_exact(dim))
        .filter(|(r, _)| r.logits)
        .flat_map(|(_, h)| h.iter().copied())
        .collect(); // (rows asking, dim)
    engine.checked_head(&last).map_err(|e| e.to_string())
}
// ANCHOR_END: step

// ANCHOR: per_row
/// A step's rows as chapter 8's [`Engine::layer`] sees them: row `t` is `rows[t]`, at its
/// own position in its own sequence, whose keys and values are the blocks of
/// `tables[rows[t].seq]`.
struct Batch<'a> {
    kv: &'a mut KvBlocks,
    tables: &'a [&'a [usize]],
    rows: &'a [Row],
    /// The model's context (what a [`SeqKv`] needs).
    max_pos: usize,
}

impl LayerRows for Batch<'_> {
    /// Attention scores, and a task's f16 keys and values read as f32.
    type Scratch = (Vec<f32>, Gathered);

    fn pos(&self, t: usize) -> usize {
        self.rows[t].pos
    }

    fn write_kv(&mut self, layer: usize, t: usize, k: &[f32], v: &[f32]) {
        let (r, bs) = (&self.rows[t], self.kv.block_size());
        let block = self.tables[r.seq][r.pos / bs];
        self.kv.write(block, r.pos % bs, layer, k, v);
    }
    // ANCHOR_END: per_row

    // ANCHOR: per_row_attend
    /// Chapter 8's split, except over f16 blocks: a task converts the keys and values of
    /// its KV heads, so small heads go a whole KV head's group a task.
    fn part(&self, heads: Heads, n_rows: usize) -> usize {
        match self.kv.precision() {
            KvPrecision::F16 if heads.head_dim <= 64 => {
                attention_part(heads, n_rows).max(heads.group_size())
            }
            _ => attention_part(heads, n_rows),
        }
    }

    fn attend(
        &self,
        at: &LayerAttention,
        t: usize,
        hs: Range<usize>,
        q: &[f32],
        out: &mut [f32],
        (scores, gathered): &mut Self::Scratch,
    ) {
        let (kv, r) = (&*self.kv, &self.rows[t]);
        let (heads, table) = (at.heads, self.tables[r.seq]);
        if kv.precision() == KvPrecision::F16 {
            attend_f16(at, out, q, gathered, kv, (table, r.pos), hs, scores);
            return;
        }
        let store = SeqKv {
            blocks: kv,
            table,
            max_pos: self.max_pos,
        };
        // small heads: chapter 8's fast path a block at a time; large ones: its loop path,
        // which reads each key once for the group
        if heads.head_dim <= 64 {
            attend_blocks(at, out, q, &store, hs, r.pos, scores);
        } else if hs.len() == heads.n_heads {
            attend(at, out, q, &store, r.pos, scores);
        } else {
            attend_heads(at, out, q, &store, hs, r.pos, scores);
        }
    }
}
// ANCHOR_END: per_row_attend
