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
use ch06_quantization::Kernels;
use rayon::prelude::*;

use super::{Activation, Engine, Layer, attend, attend_heads, gelu_f16_inplace, rmsnorm_rows};

/// How many query heads a task of the attention of `rows` query rows takes: a whole row
/// when there are as many rows as threads; with fewer (a decode step), a part of one KV
/// head's group, so that the threads share a row: one head for small heads (each head reads
/// its keys alone anyway), half the group for large ones when it halves (the group's heads
/// read each key once between them, so two tasks read it twice).
pub fn attention_part(heads: Heads, rows: usize) -> usize {
    let group = heads.group_size();
    match heads.head_dim {
        _ if rows >= rayon::current_num_threads() => heads.n_heads,
        ..=64 => 1,
        _ if group.is_multiple_of(2) => group / 2,
        _ => group,
    }
}

// ANCHOR: layer_rows
/// What every attention task of one layer call shares.
#[derive(Clone, Copy)]
pub struct LayerAttention<'k> {
    pub kernels: &'k dyn Kernels,
    pub layer: usize,
    pub heads: Heads,
    /// Positions a query sees, counting itself (`None`: all before it).
    pub window: Option<usize>,
}

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
        let (k, cache, pos) = (at.kernels, &*self.cache, self.pos0 + t);
        let (l, heads, window) = (at.layer, at.heads, at.window);
        if hs.len() == heads.n_heads {
            attend(k, out, q, cache, l, heads, pos, window, scores);
        } else {
            attend_heads(k, out, q, cache, l, heads, hs, pos, window, scores);
        }
    }
}
// ANCHOR_END: chunk

impl Engine<'_> {
    // ANCHOR: layer
    /// Decoder layer `l` on `x` (`(rows, dim)`), in place; `rows` places each row.
    pub fn layer<R: LayerRows>(&self, l: usize, w: &Layer, rows: &mut R, x: &mut [f32]) {
        let cfg = &self.model.config;
        let (dim, q_dim, kv_dim) = (cfg.hidden_size, cfg.q_dim(), cfg.kv_dim());
        let (eps, n) = (cfg.rms_norm_eps, x.len() / dim);
        let xn = rmsnorm_rows(x, &w.attn_norm, eps); // (n, dim)
        let mut q = vec![0.0f32; n * q_dim]; // (n, n_heads * head_dim)
        let mut k = vec![0.0f32; n * kv_dim]; // (n, n_kv_heads * head_dim)
        let mut v = vec![0.0f32; n * kv_dim]; // (n, n_kv_heads * head_dim)
        let mats = [&w.wq, &w.wk, &w.wv];
        self.matmul_group(&mats, &mut [&mut q, &mut k, &mut v], &xn, n);
        if let (Some(qn), Some(kn)) = (&w.q_norm, &w.k_norm) {
            // Gemma: every head of Q and K normalised (rows of head_dim)
            q = rmsnorm_rows(&q, qn, eps);
            k = rmsnorm_rows(&k, kn, eps);
        }
        // each row rotated at its own position and its key and value stored, every row
        // before any attends (so the tokens of a prompt see each other)
        let rope = &self.model.ropes[w.rope];
        for t in 0..n {
            let (qt, kt) = (t * q_dim..(t + 1) * q_dim, t * kv_dim..(t + 1) * kv_dim);
            let pos = rows.pos(t);
            rope.apply(&mut q[qt], cfg.n_heads, pos, Pairing::SplitHalves);
            rope.apply(
                &mut k[kt.clone()],
                cfg.n_kv_heads,
                pos,
                Pairing::SplitHalves,
            );
            rows.write_kv(l, t, &k[kt.clone()], &v[kt]);
        }
        // ANCHOR_END: layer
        // ANCHOR: layer_attention
        let mut heads_out = vec![0.0f32; n * q_dim]; // (n, n_heads * head_dim)
        let rows = &*rows;
        let heads = cfg.heads();
        let at = LayerAttention {
            kernels: self.kernels,
            layer: l,
            heads,
            window: w.window,
        };
        // A task a row, or, with fewer rows than threads (a decode step), a task a part of
        // a row's heads: at a long context the step's attention is most of it.
        let part = rows.part(heads, n);
        heads_out
            .par_chunks_mut(part * heads.head_dim)
            .enumerate()
            .for_each_init(R::Scratch::default, |scratch, (i, out)| {
                let per_row = cfg.n_heads / part;
                let (t, first) = (i / per_row, i % per_row * part);
                let q_t = &q[t * q_dim..(t + 1) * q_dim];
                rows.attend(&at, t, first..first + part, q_t, out, scratch);
            });
        let mut o = vec![0.0f32; n * dim]; // (n, dim)
        self.matmul(&w.wo, &mut o, &heads_out, n);
        if let Some(norm) = &w.post_attn_norm {
            o = rmsnorm_rows(&o, norm, eps); // Gemma: the attention output normalised
        }
        ops::add_inplace(x, &o);
        self.ffn(w, x);
    }
    // ANCHOR_END: layer_attention

    // ANCHOR: layer_ffn
    /// The feed-forward half of a layer on `x` (`(rows, dim)`), in place: each row on its own.
    fn ffn(&self, w: &Layer, x: &mut [f32]) {
        let cfg = &self.model.config;
        let (dim, ffn, eps) = (cfg.hidden_size, cfg.intermediate_size, cfg.rms_norm_eps);
        let n = x.len() / dim;
        let xn = rmsnorm_rows(x, &w.ffn_norm, eps); // (n, dim)
        let mut gate = vec![0.0f32; n * ffn]; // (n, ffn)
        let mut up = vec![0.0f32; n * ffn]; // (n, ffn)
        self.matmul_group(&[&w.w_gate, &w.w_up], &mut [&mut gate, &mut up], &xn, n);
        // token by token on the threads (a prefill's 512 × 2 048 activations are worth it)
        let act = self.model.family.activation;
        gate.par_chunks_mut(ffn)
            .zip(up.par_chunks(ffn))
            .for_each(|(g, u)| {
                match act {
                    Activation::Silu => ops::silu_inplace(g),
                    Activation::GeluTanhF16 => gelu_f16_inplace(g),
                }
                ops::mul_inplace(g, u);
            });
        let mut down = vec![0.0f32; n * dim]; // (n, dim)
        self.matmul(&w.w_down, &mut down, &gate, n);
        if let Some(norm) = &w.post_ffn_norm {
            down = rmsnorm_rows(&down, norm, eps); // Gemma: the FFN output normalised
        }
        ops::add_inplace(x, &down);
    }
    // ANCHOR_END: layer_ffn
}
