//! Chapter 5's cached forward pass, with [`QMatrix`](crate::QMatrix) products.
//!
//! This is `ch05_kv_cache::forward::Engine::layer` line for line, with one change: every
//! `linear(&mut out, x, &w.wq, seq, k, n)` of an f32 slice becomes
//! `w.wq.matmul_with(self.kernels, &mut out, x, seq)`, which quantizes `x` and runs the
//! integer dot products of [`crate::dot`] (or chapter 7's SIMD ones: [`crate::kernels`]). The
//! attention over the cache, RoPE, RMSNorm and SwiGLU are chapter 3–5's functions, called
//! as they are. (Chapter 5's `Engine` holds a `&Model` of f32 weights, so it cannot take
//! these matrices; rather than make every earlier chapter generic, this chapter keeps its
//! own copy of the layer loop, and chapters 7–9 build on this one.)

use ch01_tensors::ops;
use ch03_attention::{Heads, Mask, Pairing};
use ch04_forward::layer::rmsnorm_rows;
use ch05_kv_cache::forward::kv_layout;
use ch05_kv_cache::{KvLayout, KvStore};

use crate::Error;
use crate::kernels::{Kernels, Scalar};
use crate::model::{QLayer, QModel};
use rayon::prelude::*;

/// A quantized model and how to run it (every layer causal, as SmolLM2's are).
pub struct QEngine<'m> {
    pub model: &'m QModel,
    /// The arithmetic: chapter 6's [`Scalar`] kernels, or chapter 7's SIMD ones.
    pub kernels: &'m dyn Kernels,
    /// The longest run of tokens pushed through the layers at once.
    pub chunk: usize,
}

impl<'m> QEngine<'m> {
    /// With chapter 6's scalar kernels.
    pub fn new(model: &'m QModel) -> QEngine<'m> {
        QEngine::with_kernels(model, &Scalar)
    }

    /// With the given kernels (chapter 7's SIMD ones).
    pub fn with_kernels(model: &'m QModel, kernels: &'m dyn Kernels) -> QEngine<'m> {
        QEngine {
            model,
            kernels,
            chunk: 512,
        }
    }

    /// The cache layout this model needs.
    pub fn layout(&self) -> KvLayout {
        kv_layout(&self.model.config)
    }

    /// Runs `ids` (positions `pos0..`) through the model, adding them to `cache`; returns
    /// the logits after the last one, `(vocab)`.
    pub fn forward<S: KvStore + Sync + ?Sized>(
        &self,
        cache: &mut S,
        ids: &[u32],
        pos0: usize,
    ) -> Result<Vec<f32>, Error> {
        let hidden = self.hidden(cache, ids, pos0)?;
        let dim = self.model.config.hidden_size;
        Ok(self.head(&hidden[hidden.len() - dim..]))
    }

    /// Like [`QEngine::forward`], but the logits of every position: `(seq, vocab)` (for
    /// perplexity, which scores each token by the logits before it).
    pub fn forward_all<S: KvStore + Sync + ?Sized>(
        &self,
        cache: &mut S,
        ids: &[u32],
        pos0: usize,
    ) -> Result<Vec<f32>, Error> {
        let hidden = self.hidden(cache, ids, pos0)?;
        Ok(self.head(&hidden))
    }

    /// The residual stream after the last layer for every token of `ids`, `(seq, dim)`.
    fn hidden<S: KvStore + Sync + ?Sized>(
        &self,
        cache: &mut S,
        ids: &[u32],
        pos0: usize,
    ) -> Result<Vec<f32>, Error> {
        if ids.is_empty() {
            return Err(Error::Config("forward needs at least one token".into()));
        }
        let end = pos0 + ids.len();
        if end > self.model.rope.max_pos {
            return Err(Error::ContextFull {
                limit: self.model.rope.max_pos,
                needed: end,
            });
        }
        let mut x = self.model.embed(ids)?; // (seq, dim); checks every id first
        cache.reserve(end)?;
        let dim = self.model.config.hidden_size;
        let chunk = self.chunk.max(1);
        for (c, rows) in x.chunks_mut(chunk * dim).enumerate() {
            for (l, w) in self.model.layers.iter().enumerate() {
                self.layer(l, w, cache, rows, pos0 + c * chunk);
            }
        }
        Ok(x)
    }

    // ANCHOR: layer
    /// Decoder layer `l` on the rows `x` (`(seq, dim)`, positions `pos0..`), in place.
    fn layer<S: KvStore + Sync + ?Sized>(
        &self,
        l: usize,
        w: &QLayer,
        cache: &mut S,
        x: &mut [f32],
        pos0: usize,
    ) {
        let cfg = &self.model.config;
        let (dim, q_dim, kv_dim, ffn) = (
            cfg.hidden_size,
            cfg.q_dim(),
            cfg.kv_dim(),
            cfg.intermediate_size,
        );
        let seq = x.len() / dim;
        let xn = rmsnorm_rows(x, &w.input_norm, cfg.rms_norm_eps); // (seq, dim)
        let mut q = vec![0.0f32; seq * q_dim]; // (seq, q_dim)
        let mut k = vec![0.0f32; seq * kv_dim]; // (seq, kv_dim)
        let mut v = vec![0.0f32; seq * kv_dim]; // (seq, kv_dim)
        w.wq.matmul_with(self.kernels, &mut q, &xn, seq); // NEW: QMatrix products instead of `linear`
        w.wk.matmul_with(self.kernels, &mut k, &xn, seq);
        w.wv.matmul_with(self.kernels, &mut v, &xn, seq);
        self.model
            .rope
            .apply(&mut q, cfg.n_heads, pos0, Pairing::SplitHalves);
        self.model
            .rope
            .apply(&mut k, cfg.n_kv_heads, pos0, Pairing::SplitHalves);
        // ANCHOR_END: layer
        // ANCHOR: layer_attend
        // Every new token's K and V into the cache first, then every token's attention, in
        // parallel: token t reads positions 0..=pos0+t only, all written by now. (Chapter 5
        // went token by token so that a ring buffer never overwrites a key the chunk still
        // needs; this engine is causal only, over a cache that holds every position.)
        for t in 0..seq {
            let (k_t, v_t) = (
                &k[t * kv_dim..(t + 1) * kv_dim],
                &v[t * kv_dim..(t + 1) * kv_dim],
            );
            cache.write(l, pos0 + t, k_t, v_t);
        }
        let mut heads_out = vec![0.0f32; seq * q_dim]; // (seq, q_dim)
        let cache = &*cache;
        heads_out.par_chunks_mut(q_dim).enumerate().for_each_init(
            Vec::new,
            |scores, (t, out_t)| {
                let q_t = &q[t * q_dim..(t + 1) * q_dim];
                attend(
                    self.kernels,
                    out_t,
                    q_t,
                    cache,
                    l,
                    cfg.heads(),
                    pos0 + t,
                    scores,
                );
            },
        );
        let mut o = vec![0.0f32; seq * dim]; // (seq, dim)
        w.wo.matmul_with(self.kernels, &mut o, &heads_out, seq);
        ops::add_inplace(x, &o);
        // SwiGLU, as chapter 4's `ffn`, with the three products quantized.
        let xn = rmsnorm_rows(x, &w.post_norm, cfg.rms_norm_eps); // (seq, dim)
        let mut gate = vec![0.0f32; seq * ffn]; // (seq, ffn)
        let mut up = vec![0.0f32; seq * ffn]; // (seq, ffn)
        w.w_gate.matmul_with(self.kernels, &mut gate, &xn, seq);
        w.w_up.matmul_with(self.kernels, &mut up, &xn, seq);
        self.kernels.silu(&mut gate);
        ops::mul_inplace(&mut gate, &up);
        let mut down = vec![0.0f32; seq * dim]; // (seq, dim)
        w.w_down.matmul_with(self.kernels, &mut down, &gate, seq);
        ops::add_inplace(x, &down);
    }
    // ANCHOR_END: layer_attend

    /// Final RMSNorm and the LM head: `(rows, dim)` → `(rows, vocab)`.
    pub fn head(&self, x: &[f32]) -> Vec<f32> {
        let cfg = &self.model.config;
        let rows = x.len() / cfg.hidden_size;
        let xn = rmsnorm_rows(x, &self.model.final_norm, cfg.rms_norm_eps);
        let head = self.model.lm_head();
        let mut logits = vec![0.0f32; rows * head.rows()]; // (rows, vocab)
        head.matmul_with(self.kernels, &mut logits, &xn, rows);
        logits
    }
}

// ANCHOR: attend
/// Chapter 5's [`attend`](ch05_kv_cache::attend::attend) for one causal query row, with the
/// dot products and the weighted sum of values done by `k`. The scores' dot products add in
/// eight lanes ([`crate::kernels::dot_f32_lanes`]) instead of chapter 1's one running sum,
/// so they differ from chapter 5's in the last bits, and are the same on every SIMD level.
#[allow(clippy::too_many_arguments)]
pub fn attend<S: KvStore + ?Sized>(
    k: &dyn Kernels,
    out: &mut [f32],
    q: &[f32],
    store: &S,
    layer: usize,
    heads: Heads,
    pos: usize,
    scores: &mut Vec<f32>,
) {
    let d = heads.head_dim;
    let keys = Mask::Causal.visible(pos, pos + 1); // positions 0..=pos
    let scale = 1.0 / (d as f32).sqrt();
    scores.resize(keys.len(), 0.0); // (visible keys)
    for h in 0..heads.n_heads {
        let kv = heads.kv_head(h);
        let q_head = &q[h * d..(h + 1) * d]; // (head_dim)
        for (s, j) in scores.iter_mut().zip(keys.clone()) {
            *s = k.dot_f32(q_head, store.key(layer, kv, j)) * scale;
        }
        k.softmax(scores); // chapter 1's softmax, its exponentials by `k`
        let o = &mut out[h * d..(h + 1) * d]; // (head_dim)
        o.fill(0.0);
        for (&w, j) in scores.iter().zip(keys.clone()) {
            k.axpy(o, w, store.value(layer, kv, j)); // o += w · v_j
        }
    }
}
// ANCHOR_END: attend
