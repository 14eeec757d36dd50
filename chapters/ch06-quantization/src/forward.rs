//! Chapter 5's cached forward pass, with [`QMatrix`] products.
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
use ch03_attention::{Mask, Pairing};
use ch04_forward::layer::rmsnorm_rows;
use ch05_kv_cache::attend::attend;
use ch05_kv_cache::forward::kv_layout;
use ch05_kv_cache::{KvLayout, KvStore};

use crate::Error;
use crate::kernels::{Kernels, Scalar};
use crate::model::{QLayer, QModel};

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
    pub fn forward<S: KvStore + ?Sized>(
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
    pub fn forward_all<S: KvStore + ?Sized>(
        &self,
        cache: &mut S,
        ids: &[u32],
        pos0: usize,
    ) -> Result<Vec<f32>, Error> {
        let hidden = self.hidden(cache, ids, pos0)?;
        Ok(self.head(&hidden))
    }

    /// The residual stream after the last layer for every token of `ids`, `(seq, dim)`.
    fn hidden<S: KvStore + ?Sized>(
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
    fn layer<S: KvStore + ?Sized>(
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
        let mut heads_out = vec![0.0f32; seq * q_dim]; // (seq, q_dim)
        let mut scores = Vec::new();
        for t in 0..seq {
            let pos = pos0 + t;
            cache.write(
                l,
                pos,
                &k[t * kv_dim..(t + 1) * kv_dim],
                &v[t * kv_dim..(t + 1) * kv_dim],
            );
            let out_t = &mut heads_out[t * q_dim..(t + 1) * q_dim];
            attend(
                out_t,
                &q[t * q_dim..(t + 1) * q_dim],
                &*cache,
                l,
                cfg.heads(),
                pos,
                Mask::Causal,
                &mut scores,
            );
        }
        let mut o = vec![0.0f32; seq * dim]; // (seq, dim)
        w.wo.matmul_with(self.kernels, &mut o, &heads_out, seq);
        ops::add_inplace(x, &o);
        // SwiGLU, as chapter 4's `ffn`, with the three products quantized.
        let xn = rmsnorm_rows(x, &w.post_norm, cfg.rms_norm_eps); // (seq, dim)
        let mut gate = vec![0.0f32; seq * ffn]; // (seq, ffn)
        let mut up = vec![0.0f32; seq * ffn]; // (seq, ffn)
        w.w_gate.matmul_with(self.kernels, &mut gate, &xn, seq);
        w.w_up.matmul_with(self.kernels, &mut up, &xn, seq);
        ops::silu_inplace(&mut gate);
        ops::mul_inplace(&mut gate, &up);
        let mut down = vec![0.0f32; seq * dim]; // (seq, dim)
        w.w_down.matmul_with(self.kernels, &mut down, &gate, seq);
        ops::add_inplace(x, &down);
    }
    // ANCHOR_END: layer

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
