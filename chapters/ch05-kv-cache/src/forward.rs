//! Chapter 4's forward pass, with a KV cache.
//!
//! ```text
//! chunk of new ids (seq) at positions pos0..pos0+seq
//!   ──embed──▶ x (seq, dim)
//!   per layer:  xn = RMSNorm(x);  q, k, v = project(xn), RoPE at their positions
//!               for each new token t:  cache.write(layer, t, k_t, v_t)
//!                                      out_t = attend(q_t, cache[layer, visible keys of t])
//!               x += o_proj(out);  x += FFN(RMSNorm(x))
//!   ──final norm, LM head on the last row──▶ logits (vocab)
//! ```
//!
//! Everything except the marked lines is chapter 4's code, called as it is: the same
//! projections, the same RoPE, the same SwiGLU. Only the keys and values of *new* tokens
//! are computed; earlier tokens' keys and values come from the cache. A chunk of many
//! tokens is a *prefill* (its projections are matrix-matrix products); a chunk of one
//! token is a *decode* step (matrix-vector).

use ch01_tensors::ops;
use ch03_attention::Mask;
use ch04_forward::attention::project_qkv;
use ch04_forward::ffn::ffn;
use ch04_forward::layer::rmsnorm_rows;
use ch04_forward::linear::linear;
use ch04_forward::weights::LayerWeights;
use ch04_forward::{Config, Model};

use crate::Error;
use crate::attend::attend;
use crate::store::{KvLayout, KvStore};

/// The cache layout a model needs.
pub fn kv_layout(cfg: &Config) -> KvLayout {
    KvLayout {
        n_layers: cfg.num_layers,
        n_kv_heads: cfg.n_kv_heads,
        head_dim: cfg.head_dim,
    }
}

/// Floats of activations alive at once while a chunk of `chunk` tokens goes through one
/// layer: x, xn, q, k, v, the heads' output, the o_proj output, gate and up. The cache is
/// extra; this is what `--chunk` bounds.
pub fn scratch_floats(cfg: &Config, chunk: usize) -> usize {
    let (dim, q, kv, ffn) = (
        cfg.hidden_size,
        cfg.q_dim(),
        cfg.kv_dim(),
        cfg.intermediate_size,
    );
    chunk * (3 * dim + 2 * q + 2 * kv + 2 * ffn)
}

// ANCHOR: engine
/// A model plus what the cached forward pass needs to know about it.
pub struct Engine<'m> {
    pub model: &'m Model,
    /// The mask of each layer (SmolLM2: all causal).
    pub masks: Vec<Mask>,
    /// The longest run of tokens pushed through the layers at once: a prompt longer than
    /// this is prefilled in chunks, so activations never exceed
    /// [`scratch_floats`]`(cfg, chunk)` floats.
    pub chunk: usize,
}
// ANCHOR_END: engine

impl<'m> Engine<'m> {
    /// Every layer causal, prefill chunks of up to 512 tokens.
    pub fn new(model: &'m Model) -> Engine<'m> {
        Engine {
            model,
            masks: vec![Mask::Causal; model.config.num_layers],
            chunk: 512,
        }
    }

    /// The same model with sliding windows on some layers (`Some(w)` per layer), to pair
    /// with a [`crate::RingCache`] built from the same list.
    pub fn with_windows(model: &'m Model, windows: &[Option<usize>]) -> Engine<'m> {
        let masks = windows
            .iter()
            .map(|w| w.map_or(Mask::Causal, Mask::SlidingWindow))
            .collect();
        Engine {
            model,
            masks,
            chunk: 512,
        }
    }

    /// The cache layout this model needs.
    pub fn layout(&self) -> KvLayout {
        kv_layout(&self.model.config)
    }

    // ANCHOR: prefill
    /// Runs `ids`, the tokens at positions `pos0..pos0 + ids.len()`, through the model,
    /// reading earlier positions from `cache` and adding these ones to it. Returns the
    /// logits after the last token, `(vocab)`. Longer inputs go through in chunks of
    /// [`Engine::chunk`] tokens: each chunk's keys and values are in the cache before the
    /// next chunk's queries need them.
    pub fn forward<S: KvStore + ?Sized>(
        &self,
        cache: &mut S,
        ids: &[u32],
        pos0: usize,
    ) -> Result<Vec<f32>, Error> {
        if ids.is_empty() {
            return Err(Error::Config("forward needs at least one token".into()));
        }
        let vocab = self.model.config.vocab_size;
        if let Some(&id) = ids.iter().find(|&&id| id as usize >= vocab) {
            return Err(Error::BadToken { id, vocab }); // before anything is written
        }
        let end = pos0 + ids.len();
        if end > self.model.rope.max_pos {
            return Err(Error::ContextFull {
                limit: self.model.rope.max_pos,
                needed: end,
            });
        }
        cache.reserve(end)?; // fails before anything is written
        let dim = self.model.config.hidden_size;
        let mut last = Vec::new(); // (dim) hidden state after the last token
        for (c, chunk) in ids.chunks(self.chunk.max(1)).enumerate() {
            let x = self.forward_chunk(cache, chunk, pos0 + c * self.chunk.max(1))?; // (seq, dim)
            last = x[x.len() - dim..].to_vec();
        }
        Ok(self.model.head(&last)) // (vocab): final RMSNorm + LM head, last row only
    }
    // ANCHOR_END: prefill

    /// One chunk through every layer: the residual stream after the last layer, `(seq, dim)`.
    fn forward_chunk<S: KvStore + ?Sized>(
        &self,
        cache: &mut S,
        ids: &[u32],
        pos0: usize,
    ) -> Result<Vec<f32>, Error> {
        let mut x = self.model.embed(ids)?; // (seq, dim)
        for (l, w) in self.model.weights.layers.iter().enumerate() {
            self.layer(l, w, cache, &mut x, pos0);
        }
        Ok(x)
    }

    // ANCHOR: layer
    /// Decoder layer `l` on the rows `x` (`(seq, dim)`, positions `pos0..`), in place:
    /// chapter 4's `layer_forward`, with the attention reading from and writing to `cache`.
    fn layer<S: KvStore + ?Sized>(
        &self,
        l: usize,
        w: &LayerWeights,
        cache: &mut S,
        x: &mut [f32],
        pos0: usize,
    ) {
        let cfg = &self.model.config;
        let (dim, q_dim, kv_dim) = (cfg.hidden_size, cfg.q_dim(), cfg.kv_dim());
        let seq = x.len() / dim;
        let xn = rmsnorm_rows(x, &w.input_norm, cfg.rms_norm_eps); // (seq, dim)
        // Q, K and V of the new tokens only: (seq, q_dim), (seq, kv_dim), (seq, kv_dim).
        let qkv = project_qkv(w, cfg, &self.model.rope, &xn, pos0);
        let mut heads_out = vec![0.0f32; seq * q_dim]; // (seq, n_heads * head_dim)
        let mut scores = Vec::new(); // (visible keys) scratch for one query head
        for t in 0..seq {
            let pos = pos0 + t;
            // NEW: store this token's K and V, then let it attend over the cache. Writing
            // first means the token sees itself; going token by token means a ring buffer
            // never overwrites a key that a later token of the chunk still needs.
            cache.write(
                l,
                pos,
                &qkv.k[t * kv_dim..(t + 1) * kv_dim],
                &qkv.v[t * kv_dim..(t + 1) * kv_dim],
            );
            let q_t = &qkv.q[t * q_dim..(t + 1) * q_dim]; // (q_dim)
            let out_t = &mut heads_out[t * q_dim..(t + 1) * q_dim]; // (q_dim)
            attend(
                out_t,
                q_t,
                &*cache,
                l,
                cfg.heads(),
                pos,
                self.masks[l],
                &mut scores,
            );
        }
        let mut o = vec![0.0f32; seq * dim]; // (seq, dim)
        linear(&mut o, &heads_out, &w.wo, seq, q_dim, dim);
        ops::add_inplace(x, &o);
        let xn = rmsnorm_rows(x, &w.post_norm, cfg.rms_norm_eps); // (seq, dim)
        ops::add_inplace(x, &ffn(w, cfg, &xn));
    }
    // ANCHOR_END: layer
}
