//! The batched forward step: rows from many sequences through the model at once.
//!
//! Chapter 8's `Engine::layer` already runs `seq` rows together: the products over all
//! rows, then RoPE, the KV writes and attention row by row. A batch step is the same loop
//! where the rows belong to different sequences. The products — every weight read once for
//! all the rows — do not care whose rows they are; RoPE, the KV write and attention do, so
//! each row carries its sequence and its position:
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

use ch01_tensors::ops;
use ch03_attention::Pairing;
use ch08_gguf::engine::{
    Activation, Engine, Layer, attend, attend_heads, attention_part, gelu_f16_inplace, rmsnorm_rows,
};
use ch08_gguf::matrix::matmul_group;
use rayon::prelude::*;

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
    for (l, w) in m.layers.iter().enumerate() {
        layer(engine, l, w, kv, tables, rows, &mut x);
    }
    let last: Vec<f32> = rows
        .iter()
        .zip(x.chunks_exact(dim))
        .filter(|(r, _)| r.logits)
        .flat_map(|(_, h)| h.iter().copied())
        .collect(); // (rows asking, dim)
    Ok(engine.head(&last))
}
// ANCHOR_END: step

/// Decoder layer `l` on `x` (`(rows, dim)`), in place: chapter 8's layer with each row's
/// position and sequence its own.
fn layer(
    e: &Engine,
    l: usize,
    w: &Layer,
    kv: &mut KvBlocks,
    tables: &[&[usize]],
    rows: &[Row],
    x: &mut [f32],
) {
    let (cfg, fam) = (&e.model.config, &e.model.family);
    let (dim, q_dim, kv_dim) = (cfg.hidden_size, cfg.q_dim(), cfg.kv_dim());
    let (eps, n) = (cfg.rms_norm_eps, rows.len());
    let xn = rmsnorm_rows(x, &w.attn_norm, eps); // (rows, dim)
    let mut q = vec![0.0f32; n * q_dim]; // (rows, n_heads * head_dim)
    let mut k = vec![0.0f32; n * kv_dim]; // (rows, n_kv_heads * head_dim)
    let mut v = vec![0.0f32; n * kv_dim]; // (rows, n_kv_heads * head_dim)
    let mats = [&w.wq, &w.wk, &w.wv];
    matmul_group(
        e.kernels,
        e.kkernels,
        &mats,
        &mut [&mut q, &mut k, &mut v],
        &xn,
        n,
    );
    if let (Some(qn), Some(kn)) = (&w.q_norm, &w.k_norm) {
        q = rmsnorm_rows(&q, qn, eps); // Gemma: every head of Q and K normalised
        k = rmsnorm_rows(&k, kn, eps);
    }
    // ANCHOR: per_row
    // RoPE, and the K/V write, row by row: each at its own position in its own sequence
    let rope = &e.model.ropes[w.rope];
    let bs = kv.block_size();
    for (t, r) in rows.iter().enumerate() {
        let (qr, kr) = (t * q_dim..(t + 1) * q_dim, t * kv_dim..(t + 1) * kv_dim);
        rope.apply(&mut q[qr], cfg.n_heads, r.pos, Pairing::SplitHalves);
        rope.apply(
            &mut k[kr.clone()],
            cfg.n_kv_heads,
            r.pos,
            Pairing::SplitHalves,
        );
        let block = tables[r.seq][r.pos / bs];
        kv.write(block, r.pos % bs, l, &k[kr.clone()], &v[kr]);
    }
    // ANCHOR_END: per_row
    // ANCHOR: per_row_attend
    let mut heads_out = vec![0.0f32; n * q_dim]; // (rows, n_heads * head_dim)
    let kv = &*kv;
    let max_pos = e.model.max_positions();
    let heads = cfg.heads();
    // A task a row; with fewer rows than threads (a sequence or two decoding), a task a part
    // of a row's heads, as chapter 8's decode step does. Over f16 blocks a task converts the
    // keys and values of its KV heads, so small heads go a whole KV head's group a task.
    let part = match kv.precision() {
        KvPrecision::F16 if heads.head_dim <= 64 => {
            attention_part(heads, n).max(heads.group_size())
        }
        _ => attention_part(heads, n),
    };
    heads_out
        .par_chunks_mut(part * heads.head_dim)
        .enumerate()
        .for_each_init(
            || (Vec::new(), Gathered::default()),
            |(scores, gathered), (i, out)| {
                let per_row = cfg.n_heads / part;
                let (t, first) = (i / per_row, i % per_row * part);
                let (r, hs) = (&rows[t], first..first + part);
                let q_t = &q[t * q_dim..(t + 1) * q_dim];
                let window = w.window;
                if kv.precision() == KvPrecision::F32 {
                    let store = SeqKv {
                        blocks: kv,
                        table: tables[r.seq],
                        max_pos,
                    };
                    // small heads: chapter 8's fast path a block at a time; large
                    // ones: its loop path, which reads each key once for the group
                    if heads.head_dim <= 64 {
                        attend_blocks(
                            e.kernels, out, q_t, &store, l, heads, hs, r.pos, window, scores,
                        );
                    } else if part == cfg.n_heads {
                        attend(e.kernels, out, q_t, &store, l, heads, r.pos, window, scores);
                    } else {
                        attend_heads(
                            e.kernels, out, q_t, &store, l, heads, hs, r.pos, window, scores,
                        );
                    }
                } else {
                    let table = tables[r.seq];
                    let at = (table, l, r.pos, window);
                    attend_f16(e.kernels, out, q_t, gathered, kv, at, heads, hs, scores);
                }
            },
        );
    // ANCHOR_END: per_row_attend
    let mut o = vec![0.0f32; n * dim]; // (rows, dim)
    w.wo.matmul(e.kernels, e.kkernels, &mut o, &heads_out, n);
    if let Some(norm) = &w.post_attn_norm {
        o = rmsnorm_rows(&o, norm, eps);
    }
    ops::add_inplace(x, &o);
    ffn(e, w, fam.activation, x);
}

/// The feed-forward half of a layer on `x` (`(rows, dim)`), in place: chapter 8's, row by
/// row independent already.
fn ffn(e: &Engine, w: &Layer, act: Activation, x: &mut [f32]) {
    let cfg = &e.model.config;
    let (dim, f, eps) = (cfg.hidden_size, cfg.intermediate_size, cfg.rms_norm_eps);
    let n = x.len() / dim;
    let xn = rmsnorm_rows(x, &w.ffn_norm, eps); // (rows, dim)
    let mut gate = vec![0.0f32; n * f]; // (rows, ffn)
    let mut up = vec![0.0f32; n * f]; // (rows, ffn)
    let mats = [&w.w_gate, &w.w_up];
    matmul_group(
        e.kernels,
        e.kkernels,
        &mats,
        &mut [&mut gate, &mut up],
        &xn,
        n,
    );
    gate.par_chunks_mut(f)
        .zip(up.par_chunks(f))
        .for_each(|(g, u)| {
            match act {
                Activation::Silu => ops::silu_inplace(g),
                Activation::GeluTanhF16 => gelu_f16_inplace(g),
            }
            ops::mul_inplace(g, u);
        });
    let mut down = vec![0.0f32; n * dim]; // (rows, dim)
    w.w_down.matmul(e.kernels, e.kkernels, &mut down, &gate, n);
    if let Some(norm) = &w.post_ffn_norm {
        down = rmsnorm_rows(&down, norm, eps);
    }
    ops::add_inplace(x, &down);
}
