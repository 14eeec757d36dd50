//! One decoder layer for any rows: a chunk of one sequence (a prefill, a decode step), or
//! in chapter 10 the rows of many sequences in one batch step.
//!
//! The norms, the products, RoPE's rotation and the feed-forward network do not care whose
//! rows they are. Three things do: each row's position, where its key and value are stored,
//! and which keys its attention reads. [`LayerRows`] is those three, with how the attention
//! is cut into tasks; [`Chunk`] is this chapter's rows, positions `pos0..` of one sequence
//! in one cache. [`Engine::layer`] is written once for every kind of rows, so a change to
//! what a layer computes (a new family's norm or bias) is made in one place.

use std::ops::Range;

use ch01_tensors::ops;
use ch03_attention::{Heads, Pairing};
use ch05_kv_cache::KvStore;
use ch07_simd_parallel::team;
use rayon::prelude::*;

use super::attend::{LayerAttention, attend, attend_heads};
use super::family::Activation;
use super::model::{Engine, Layer};
use super::rowwise::gelu_f16_inplace;
use super::rowwise::{PAR_ROWS, add_rows, rmsnorm_rows_into, sized};

/// How many query heads a task of the attention of `rows` query rows takes: a whole row
/// when there are as many rows as threads; with fewer (a decode step), a part of one KV
/// head's group, so that the threads share a row: one head for small heads (each head reads
/// its keys alone anyway), half the group for large ones when it halves (the group's heads
/// read each key once between them, so two tasks read it twice).
pub fn attention_part(heads: Heads, rows: usize) -> usize {
    let group = heads.group_size();
    match heads.head_dim {
        _ if rows >= team::decode_threads() => heads.n_heads,
        ..=64 => 1,
        _ if group.is_multiple_of(2) => group / 2,
        _ => group,
    }
}

// ANCHOR: layer_rows
/// The rows of one layer call, as far as they differ: where each row is, where its key and
/// value go, and what its attention reads. The rest of a layer is the same for all rows.
pub trait LayerRows: Sync {
    /// What an attention task keeps from one row to the next (its scores' buffer).
    type Scratch: Default;

    /// The position of row `t` in its sequence.
    fn pos(&self, t: usize) -> usize;

    /// Stores row `t`'s key and value for `layer` (`(n_kv_heads * head_dim)` each, rotated):
    /// called for every row before any row attends.
    fn write_kv(&mut self, layer: usize, t: usize, k: &[f32], v: &[f32]);

    /// How many query heads one attention task takes, the layer running `n_rows` rows.
    fn part(&self, heads: Heads, n_rows: usize) -> usize {
        attention_part(heads, n_rows)
    }

    /// Row `t`'s attention for the query heads `hs`: `q` is the row's queries
    /// (`(n_heads * head_dim)`), `out` receives `hs.len()` heads of `head_dim`.
    fn attend(
        &self,
        at: &LayerAttention,
        t: usize,
        hs: Range<usize>,
        q: &[f32],
        out: &mut [f32],
        scratch: &mut Self::Scratch,
    );
}
// ANCHOR_END: layer_rows

// ANCHOR: chunk
/// This chapter's rows: consecutive tokens of one sequence, row `t` at position `pos0 + t`,
/// their keys and values in one cache (chapter 5's `KvStore`: a full cache or a ring).
pub struct Chunk<'c, S: ?Sized> {
    pub cache: &'c mut S,
    pub pos0: usize,
}

impl<S: KvStore + Sync + ?Sized> LayerRows for Chunk<'_, S> {
    type Scratch = Vec<f32>; // attention scores, (heads, keys)

    fn pos(&self, t: usize) -> usize {
        self.pos0 + t
    }

    fn write_kv(&mut self, layer: usize, t: usize, k: &[f32], v: &[f32]) {
        self.cache.write(layer, self.pos0 + t, k, v);
    }

    fn attend(
        &self,
        at: &LayerAttention,
        t: usize,
        hs: Range<usize>,
        q: &[f32],
        out: &mut [f32],
        scores: &mut Vec<f32>,
    ) {
        let (cache, pos) = (&*self.cache, self.pos0 + t);
        if hs.len() == at.heads.n_heads {
            attend(at, out, q, cache, pos, scores);
        } else {
            attend_heads(at, out, q, cache, hs, pos, scores);
        }
    }
}
// ANCHOR_END: chunk

// ANCHOR: buffers
/// The buffers of a layer call, kept from one layer to the next. A prefill's are megabytes
/// (Gemma-3's gate and up: 512 tokens × 2 048 floats, 4 MiB each); allocated afresh in every
/// layer, each would come from the kernel as new zeroed pages, a page fault for every 4 KiB
/// of it, since the allocator hands blocks that large back when they are freed.
#[derive(Default)]
pub struct Buffers {
    xn: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    normed: Vec<f32>,
    heads: Vec<f32>,
    o: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
}
// ANCHOR_END: buffers

impl Engine<'_> {
    // ANCHOR: layer
    /// Decoder layer `l` on `x` (`(rows, dim)`), in place; `rows` places each row, `b` holds
    /// the layer's buffers (any contents: each is overwritten before it is read).
    pub fn layer<R: LayerRows>(
        &self,
        l: usize,
        w: &Layer,
        rows: &mut R,
        x: &mut [f32],
        b: &mut Buffers,
    ) {
        let cfg = &self.model.config;
        let (dim, q_dim, kv_dim) = (cfg.hidden_size, cfg.q_dim(), cfg.kv_dim());
        let (eps, n) = (cfg.rms_norm_eps, x.len() / dim);
        rmsnorm_rows_into(&mut b.xn, x, &w.attn_norm, eps); // (n, dim)
        let q = sized(&mut b.q, n * q_dim); // (n, n_heads * head_dim)
        let k = sized(&mut b.k, n * kv_dim); // (n, n_kv_heads * head_dim)
        let v = sized(&mut b.v, n * kv_dim); // (n, n_kv_heads * head_dim)
        let mats = [&w.wq, &w.wk, &w.wv];
        self.matmul_group(&mats, &mut [q, k, v], &b.xn, n);
        // ANCHOR: qkv_bias
        for (bias, out) in [(&w.bq, &mut b.q), (&w.bk, &mut b.k), (&w.bv, &mut b.v)] {
            if let Some(bias) = bias {
                // Qwen2: a bias added to every row of Q, K and V
                out.chunks_exact_mut(bias.len())
                    .for_each(|row| ops::add_inplace(row, bias));
            }
        }
        // ANCHOR_END: qkv_bias
        if let (Some(qn), Some(kn)) = (&w.q_norm, &w.k_norm) {
            // Gemma-3, Qwen3: every head of Q and K normalised (rows of head_dim)
            rmsnorm_rows_into(&mut b.normed, &b.q, qn, eps);
            std::mem::swap(&mut b.q, &mut b.normed);
            rmsnorm_rows_into(&mut b.normed, &b.k, kn, eps);
            std::mem::swap(&mut b.k, &mut b.normed);
        }
        // each row rotated at its own position (a prefill's rows on the threads), then
        // every row's key and value stored before any row attends (so the tokens of a
        // prompt see each other)
        let rope = &self.model.ropes[w.rope];
        let (q, k) = (&mut b.q, &mut b.k);
        let rotate = |(t, (qt, kt)): (usize, (&mut [f32], &mut [f32]))| {
            let pos = rows.pos(t);
            rope.apply(qt, cfg.n_heads, pos, Pairing::SplitHalves);
            rope.apply(kt, cfg.n_kv_heads, pos, Pairing::SplitHalves);
        };
        if n >= PAR_ROWS {
            let pairs = q.par_chunks_mut(q_dim).zip(k.par_chunks_mut(kv_dim));
            pairs.enumerate().for_each(rotate);
        } else {
            q.chunks_mut(q_dim)
                .zip(k.chunks_mut(kv_dim))
                .enumerate()
                .for_each(rotate);
        }
        for t in 0..n {
            let kt = t * kv_dim..(t + 1) * kv_dim;
            rows.write_kv(l, t, &k[kt.clone()], &b.v[kt]);
        }
        // ANCHOR_END: layer
        // ANCHOR: layer_attention
        let heads_out = sized(&mut b.heads, n * q_dim); // (n, n_heads * head_dim)
        let (rows, q) = (&*rows, &b.q);
        let heads = cfg.heads();
        let family = &self.model.family;
        let at = LayerAttention {
            kernels: self.kernels,
            layer: l,
            heads,
            window: w.window,
            scale: family
                .attn_scale
                .unwrap_or(1.0 / (heads.head_dim as f32).sqrt()),
            softcap: family.attn_softcap,
        };
        // A task a row, or, with fewer rows than threads (a decode step), a task a part of
        // a row's heads: at a long context the step's attention is most of it.
        let part = rows.part(heads, n);
        let per_row = cfg.n_heads / part;
        let task = |scratch: &mut R::Scratch, (i, out): (usize, &mut [f32])| {
            let (t, first) = (i / per_row, i % per_row * part);
            let q_t = &q[t * q_dim..(t + 1) * q_dim];
            rows.attend(&at, t, first..first + part, q_t, out, scratch);
        };
        let width = part * heads.head_dim;
        team::timed("attention", || {
            if n < rayon::current_num_threads() {
                // a decode step: its few tasks on the team that runs its products
                let pieces = heads_out.chunks_mut(width).enumerate().collect();
                team::for_each_item(pieces, |p| task(&mut R::Scratch::default(), p));
            } else {
                let pieces = heads_out.par_chunks_mut(width).enumerate();
                pieces.for_each_init(R::Scratch::default, task);
            }
        });
        let o = sized(&mut b.o, n * dim); // (n, dim)
        self.matmul(&w.wo, o, &b.heads, n);
        if let Some(norm) = &w.post_attn_norm {
            // Gemma-2 and 3: the attention output normalised
            rmsnorm_rows_into(&mut b.normed, &b.o, norm, eps);
            std::mem::swap(&mut b.o, &mut b.normed);
        }
        add_rows(x, &b.o, dim);
        self.ffn(w, x, b);
    }
    // ANCHOR_END: layer_attention

    // ANCHOR: layer_ffn
    /// The feed-forward half of a layer on `x` (`(rows, dim)`), in place: each row on its own.
    fn ffn(&self, w: &Layer, x: &mut [f32], b: &mut Buffers) {
        let cfg = &self.model.config;
        let (dim, ffn, eps) = (cfg.hidden_size, cfg.intermediate_size, cfg.rms_norm_eps);
        let n = x.len() / dim;
        rmsnorm_rows_into(&mut b.xn, x, &w.ffn_norm, eps); // (n, dim)
        let gate = sized(&mut b.gate, n * ffn); // (n, ffn)
        let up = sized(&mut b.up, n * ffn); // (n, ffn)
        // the activation times up, value by value: in a decode step each task of the two
        // products finishes its own rows, on both threads (`matmul_pair_then`)
        let gated = |g: &mut [f32], u: &[f32]| self.gated(g, u);
        self.matmul_pair_then([&w.w_gate, &w.w_up], [gate, up], &b.xn, n, &gated);
        let down = sized(&mut b.o, n * dim); // (n, dim)
        self.matmul(&w.w_down, down, &b.gate, n);
        if let Some(norm) = &w.post_ffn_norm {
            // Gemma-2 and 3: the FFN output normalised
            rmsnorm_rows_into(&mut b.normed, &b.o, norm, eps);
            std::mem::swap(&mut b.o, &mut b.normed);
        }
        add_rows(x, &b.o, dim);
    }

    /// The family's activation of the gate's outputs `g`, times up's `u`, in place in `g`.
    pub fn gated(&self, g: &mut [f32], u: &[f32]) {
        match self.model.family.activation {
            Activation::Silu => self.kernels.silu(g),
            Activation::GeluTanhF16 => gelu_f16_inplace(g),
        }
        ops::mul_inplace(g, u);
    }
    // ANCHOR_END: layer_ffn
}
