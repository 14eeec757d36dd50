//! One forward pass for both families: chapter 6's cached layer loop, with the places where
//! Gemma-3 differs from Llama written as data ([`Family`]) instead of a second copy.
//!
//! | | Llama (SmolLM2) | Gemma-3 |
//! |---|---|---|
//! | embedding | as stored | × √dim |
//! | norms | RMSNorm before attention and FFN | also after each (post-norms), and on every head of Q and K |
//! | feed-forward | SiLU(gate) · up | GELU(gate) · up (tanh form, through f16 as llama.cpp) |
//! | attention | every layer causal | 5 of 6 layers see only the last 512 positions |
//! | RoPE base | one (100 000) | 10 000 on sliding layers, 1 000 000 on global ones |
//!
//! With `Family::llama()` every step is chapter 6's, in chapter 6's order, so SmolLM2 gives
//! chapter 7's logits bit for bit (a test checks it).

use ch01_tensors::ops;
use ch03_attention::{Heads, Pairing, RopeTable};
use ch04_forward::Config;
use ch04_forward::layer::rmsnorm_rows;
use ch05_kv_cache::forward::kv_layout;
use ch05_kv_cache::{KvLayout, KvStore, RingCache};
use ch06_quantization::Kernels;
use ch06_quantization::f16::{f16_to_f32_fast, f32_to_f16, round_f16};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::ksimd::KKernels;
use crate::matrix::Matrix;

// ANCHOR: family
/// The feed-forward network's gate activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// `x · σ(x)` (Llama).
    Silu,
    /// GELU, tanh form, computed as llama.cpp does: input rounded to f16, output rounded to
    /// f16 (its 65 536-entry table), exact beyond ±10 (Gemma).
    GeluTanhF16,
}

/// What one architecture does differently, as data.
#[derive(Clone, Debug, PartialEq)]
pub struct Family {
    pub name: &'static str,
    /// Multiply the embedding rows by this (Gemma: √dim).
    pub embed_scale: Option<f32>,
    pub activation: Activation,
    /// RMSNorm each head of Q and K (with the layer's `q_norm`, `k_norm`) before RoPE.
    pub qk_norm: bool,
    /// RMSNorm the attention output and the FFN output before adding them to the stream.
    pub post_norms: bool,
}

impl Family {
    pub fn llama() -> Family {
        Family {
            name: "llama",
            embed_scale: None,
            activation: Activation::Silu,
            qk_norm: false,
            post_norms: false,
        }
    }

    pub fn gemma3(dim: usize) -> Family {
        Family {
            name: "gemma3",
            embed_scale: Some((dim as f32).sqrt()),
            activation: Activation::GeluTanhF16,
            qk_norm: true,
            post_norms: true,
        }
    }
}
// ANCHOR_END: family

/// One decoder layer. The optional norms are present exactly when the family uses them.
pub struct Layer {
    pub attn_norm: Vec<f32>,
    pub wq: Matrix,
    pub wk: Matrix,
    pub wv: Matrix,
    pub wo: Matrix,
    pub q_norm: Option<Vec<f32>>,
    pub k_norm: Option<Vec<f32>>,
    pub post_attn_norm: Option<Vec<f32>>,
    pub ffn_norm: Vec<f32>,
    pub w_gate: Matrix,
    pub w_up: Matrix,
    pub w_down: Matrix,
    pub post_ffn_norm: Option<Vec<f32>>,
    /// Positions a query sees, counting itself (`None`: all before it).
    pub window: Option<usize>,
    /// Which of the model's RoPE tables this layer rotates with.
    pub rope: usize,
}

/// A model of either family.
pub struct Model {
    pub config: Config,
    pub family: Family,
    pub embed: Matrix,
    pub layers: Vec<Layer>,
    pub final_norm: Vec<f32>,
    /// `None` when tied to `embed`.
    pub lm_head: Option<Matrix>,
    pub ropes: Vec<RopeTable>,
}

impl Model {
    pub fn lm_head(&self) -> &Matrix {
        self.lm_head.as_ref().unwrap_or(&self.embed)
    }

    /// The longest sequence the RoPE tables cover.
    pub fn max_positions(&self) -> usize {
        self.ropes.iter().map(|r| r.max_pos).min().unwrap_or(0)
    }

    /// Every matrix, the embedding first.
    pub fn matrices(&self) -> impl Iterator<Item = &Matrix> {
        std::iter::once(&self.embed)
            .chain(
                self.layers
                    .iter()
                    .flat_map(|l| [&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down]),
            )
            .chain(self.lm_head.as_ref())
    }

    /// Bytes of weights one decode step reads (every layer matrix, the LM head, one
    /// embedding row; norms are too small to count).
    pub fn bytes_read_per_token(&self) -> usize {
        let layers: usize = self
            .layers
            .iter()
            .flat_map(|l| [&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down])
            .map(Matrix::bytes)
            .sum();
        layers + self.lm_head().bytes() + self.embed.bytes() / self.embed.rows()
    }
}

/// A model, its kernels, and the chunk size of a prefill.
pub struct Engine<'m> {
    pub model: &'m Model,
    pub kernels: &'m dyn Kernels,
    pub kkernels: &'m dyn KKernels,
    pub chunk: usize,
}

/// A greedy run: the generated ids and the two phases' times.
pub struct Run {
    pub ids: Vec<u32>,
    pub prefill_seconds: f64,
    pub decode_seconds: f64,
}

impl Run {
    pub fn decode_tok_s(&self) -> f64 {
        self.ids.len().saturating_sub(1) as f64 / self.decode_seconds.max(1e-9)
    }
}

impl<'m> Engine<'m> {
    pub fn new(
        model: &'m Model,
        kernels: &'m dyn Kernels,
        kkernels: &'m dyn KKernels,
    ) -> Engine<'m> {
        Engine {
            model,
            kernels,
            kkernels,
            chunk: 512,
        }
    }

    pub fn layout(&self) -> KvLayout {
        kv_layout(&self.model.config)
    }

    // ANCHOR: cache
    /// A cache for sequences of up to `max_pos` tokens: chapter 5's ring buffer. A global
    /// layer keeps every position; a sliding layer keeps its window plus one chunk, because
    /// a chunk's keys and values are all written before any of its tokens attends (chapter
    /// 5 went token by token and needed the window alone). For Gemma-3 at 8 192 positions
    /// that is 82 MB instead of 302.
    pub fn new_cache(&self, max_pos: usize) -> Result<RingCache> {
        let chunk = self.chunk.max(1);
        let slots: Vec<Option<usize>> = self
            .model
            .layers
            .iter()
            .map(|l| l.window.map(|w| w.saturating_add(chunk)))
            .collect();
        Ok(RingCache::new(self.layout(), &slots, max_pos)?)
    }
    // ANCHOR_END: cache

    fn matmul(&self, w: &Matrix, out: &mut [f32], x: &[f32], seq: usize) {
        w.matmul(self.kernels, self.kkernels, out, x, seq);
    }

    fn matmul_group(&self, w: &[&Matrix], outs: &mut [&mut [f32]], x: &[f32], seq: usize) {
        crate::matrix::matmul_group(self.kernels, self.kkernels, w, outs, x, seq);
    }

    /// The embedding rows of `ids`, scaled as the family says: `(seq, dim)`.
    pub fn embed(&self, ids: &[u32]) -> Result<Vec<f32>> {
        let m = self.model;
        let dim = m.config.hidden_size;
        let mut x = vec![0.0f32; ids.len() * dim];
        for (&id, row) in ids.iter().zip(x.chunks_exact_mut(dim)) {
            if id as usize >= m.embed.rows() {
                return Err(Error::Model(ch06_quantization::Error::BadToken {
                    id,
                    vocab: m.embed.rows(),
                }));
            }
            m.embed.dequantize_row(id as usize, row);
            if let Some(s) = m.family.embed_scale {
                row.iter_mut().for_each(|v| *v *= s);
            }
        }
        Ok(x)
    }

    /// Runs `ids` (positions `pos0..`) through the model, adding them to `cache`; returns the
    /// logits after the last one, `(vocab)`.
    pub fn forward<S: KvStore + Sync + ?Sized>(
        &self,
        cache: &mut S,
        ids: &[u32],
        pos0: usize,
    ) -> Result<Vec<f32>> {
        let h = self.hidden(cache, ids, pos0)?;
        let dim = self.model.config.hidden_size;
        Ok(self.head(&h[h.len() - dim..]))
    }

    /// The logits of every position, `(seq, vocab)`.
    pub fn forward_all<S: KvStore + Sync + ?Sized>(
        &self,
        cache: &mut S,
        ids: &[u32],
        pos0: usize,
    ) -> Result<Vec<f32>> {
        let h = self.hidden(cache, ids, pos0)?;
        Ok(self.head(&h))
    }

    fn hidden<S: KvStore + Sync + ?Sized>(
        &self,
        cache: &mut S,
        ids: &[u32],
        pos0: usize,
    ) -> Result<Vec<f32>> {
        if ids.is_empty() {
            return Err(Error::Model(ch06_quantization::Error::Config(
                "forward needs at least one token".into(),
            )));
        }
        let end = pos0.saturating_add(ids.len());
        if end > self.model.max_positions() {
            return Err(Error::Model(ch06_quantization::Error::ContextFull {
                limit: self.model.max_positions(),
                needed: end,
            }));
        }
        let mut x = self.embed(ids)?;
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
        w: &Layer,
        cache: &mut S,
        x: &mut [f32],
        pos0: usize,
    ) {
        let (cfg, fam) = (&self.model.config, &self.model.family);
        let (dim, q_dim, kv_dim, ffn) = (
            cfg.hidden_size,
            cfg.q_dim(),
            cfg.kv_dim(),
            cfg.intermediate_size,
        );
        let eps = cfg.rms_norm_eps;
        let seq = x.len() / dim;
        let xn = rmsnorm_rows(x, &w.attn_norm, eps);
        let mut q = vec![0.0f32; seq * q_dim];
        let mut k = vec![0.0f32; seq * kv_dim];
        let mut v = vec![0.0f32; seq * kv_dim];
        self.matmul_group(
            &[&w.wq, &w.wk, &w.wv],
            &mut [&mut q, &mut k, &mut v],
            &xn,
            seq,
        );
        if let (Some(qn), Some(kn)) = (&w.q_norm, &w.k_norm) {
            // Gemma: every head of Q and K normalised (rows of head_dim)
            q = rmsnorm_rows(&q, qn, eps);
            k = rmsnorm_rows(&k, kn, eps);
        }
        let rope = &self.model.ropes[w.rope];
        rope.apply(&mut q, cfg.n_heads, pos0, Pairing::SplitHalves);
        rope.apply(&mut k, cfg.n_kv_heads, pos0, Pairing::SplitHalves);
        for t in 0..seq {
            let r = t * kv_dim..(t + 1) * kv_dim;
            cache.write(l, pos0 + t, &k[r.clone()], &v[r]);
        }
        // ANCHOR_END: layer
        // ANCHOR: layer_attention
        let mut heads_out = vec![0.0f32; seq * q_dim];
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
                    w.window,
                    scores,
                );
            },
        );
        let mut o = vec![0.0f32; seq * dim];
        self.matmul(&w.wo, &mut o, &heads_out, seq);
        if let Some(n) = &w.post_attn_norm {
            o = rmsnorm_rows(&o, n, eps); // Gemma: the attention output normalised
        }
        ops::add_inplace(x, &o);
        // ANCHOR_END: layer_attention
        // ANCHOR: layer_ffn
        let xn = rmsnorm_rows(x, &w.ffn_norm, eps);
        let mut gate = vec![0.0f32; seq * ffn];
        let mut up = vec![0.0f32; seq * ffn];
        self.matmul_group(&[&w.w_gate, &w.w_up], &mut [&mut gate, &mut up], &xn, seq);
        // token by token on the threads (a prefill's 512 × 2 048 activations are worth it)
        gate.par_chunks_mut(ffn)
            .zip(up.par_chunks(ffn))
            .for_each(|(g, u)| {
                match fam.activation {
                    Activation::Silu => ops::silu_inplace(g),
                    Activation::GeluTanhF16 => g.iter_mut().for_each(|g| *g = gelu_f16(*g)),
                }
                ops::mul_inplace(g, u);
            });
        let mut down = vec![0.0f32; seq * dim];
        self.matmul(&w.w_down, &mut down, &gate, seq);
        if let Some(n) = &w.post_ffn_norm {
            down = rmsnorm_rows(&down, n, eps); // Gemma: the FFN output normalised
        }
        ops::add_inplace(x, &down);
    }
    // ANCHOR_END: layer_ffn

    /// Final norm and the LM head: `(rows, dim)` → `(rows, vocab)`.
    pub fn head(&self, x: &[f32]) -> Vec<f32> {
        let m = self.model;
        let rows = x.len() / m.config.hidden_size;
        let xn = rmsnorm_rows(x, &m.final_norm, m.config.rms_norm_eps);
        let head = m.lm_head();
        let mut logits = vec![0.0f32; rows * head.rows()];
        self.matmul(head, &mut logits, &xn, rows);
        logits
    }

    /// Greedy decoding: prefill `prompt`, then up to `n` tokens, calling `on_token` with each.
    pub fn greedy(
        &self,
        prompt: &[u32],
        n: usize,
        stop_at_eos: bool,
        on_token: &mut dyn FnMut(u32),
    ) -> Result<Run> {
        let m = self.model;
        let total = prompt
            .len()
            .checked_add(n)
            .filter(|&t| t <= m.max_positions())
            .ok_or(Error::Model(ch06_quantization::Error::ContextFull {
                limit: m.max_positions(),
                needed: prompt.len().saturating_add(n),
            }))?;
        let mut cache = self.new_cache(total)?;
        let start = std::time::Instant::now();
        let mut logits = self.forward(&mut cache, prompt, 0)?;
        let prefill_seconds = start.elapsed().as_secs_f64();
        let start = std::time::Instant::now();
        let mut ids = Vec::new();
        while ids.len() < n {
            let next = ch04_forward::model::argmax(&logits) as u32;
            ids.push(next);
            on_token(next);
            if ids.len() == n || (stop_at_eos && m.config.eos_token_ids.contains(&next)) {
                break;
            }
            logits = self.forward(&mut cache, &[next], prompt.len() + ids.len() - 1)?;
        }
        Ok(Run {
            ids,
            prefill_seconds,
            decode_seconds: start.elapsed().as_secs_f64(),
        })
    }

    /// Logits for every position of `ids`, run through the model in one pass, `(seq, vocab)`.
    pub fn window_logits(&self, ids: &[u32]) -> Result<Vec<f32>> {
        let mut cache = self.new_cache(ids.len())?;
        self.forward_all(&mut cache, ids, 0)
    }
}

// ANCHOR: gelu
/// llama.cpp's GELU: `0.5·x·(1 + tanh(√(2/π)·x·(1 + 0.044715·x²)))`, looked up in a table
/// indexed by `x` rounded to f16 and holding f16 results; 0 below −10 and `x` above 10.
pub fn gelu_f16(x: f32) -> f32 {
    if x <= -10.0 {
        0.0
    } else if x >= 10.0 {
        x
    } else {
        gelu_table()[usize::from(f32_to_f16(x))]
    }
}

/// GELU of every f16 value, rounded to f16 (and stored as the f32 it rounds to): 256 kB,
/// made once.
fn gelu_table() -> &'static [f32] {
    static TABLE: std::sync::OnceLock<Vec<f32>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        (0..=u16::MAX)
            .map(|bits| {
                let x = f16_to_f32_fast(bits);
                round_f16(0.5 * x * (1.0 + (0.797_884_6_f32 * x * (1.0 + 0.044715 * x * x)).tanh()))
            })
            .collect()
    })
}
// ANCHOR_END: gelu

// ANCHOR: attend
/// Chapter 6's `attend` for one query row, with a window: the query at `pos` sees keys
/// `pos + 1 − window ..= pos` (all of `0..=pos` without one). The query heads that share a
/// KV head are done together, key by key, so each key and value is read from the cache once
/// for the group, not once per head (Gemma-3: four heads on one KV head of 256 floats).
/// Each head's numbers are chapter 6's, step for step: the same dot products, softmax and
/// additions in the same order.
#[allow(clippy::too_many_arguments)]
pub fn attend<S: KvStore + ?Sized>(
    k: &dyn Kernels,
    out: &mut [f32],
    q: &[f32],
    store: &S,
    layer: usize,
    heads: Heads,
    pos: usize,
    window: Option<usize>,
    scores: &mut Vec<f32>,
) {
    let d = heads.head_dim;
    let first = window.map_or(0, |w| (pos + 1).saturating_sub(w));
    let keys = first..pos + 1;
    let n = keys.len();
    let scale = 1.0 / (d as f32).sqrt();
    let group = heads.group_size();
    scores.resize(group * n, 0.0); // (group, n): one row of scores per head of the group
    for kv in 0..heads.n_kv_heads {
        let hs = kv * group..(kv + 1) * group; // the query heads on this KV head
        let runs = (d <= 64)
            .then(|| store.runs(layer, kv, keys.clone()))
            .flatten();
        if let Some((ks, vs)) = runs {
            // Small heads (SmolLM2's 64) with their keys side by side in the cache: a head's
            // scores, and its weighted sum of values (kept in registers), in one kernel call
            // each; the same numbers as the loops below. Large heads (Gemma-3's 256) go
            // through the loops, which read each key once for the whole group.
            for (g, h) in hs.clone().enumerate() {
                let row = &mut scores[g * n..(g + 1) * n];
                k.dot_f32_rows(&q[h * d..(h + 1) * d], ks, row);
                row.iter_mut().for_each(|s| *s *= scale);
                ops::softmax_inplace(row);
                let o = &mut out[h * d..(h + 1) * d];
                o.fill(0.0);
                k.axpy_rows(o, row, vs);
            }
            continue;
        }
        // ANCHOR_END: attend
        // ANCHOR: attend_loops
        for (i, j) in keys.clone().enumerate() {
            let key = store.key(layer, kv, j);
            for (g, h) in hs.clone().enumerate() {
                scores[g * n + i] = k.dot_f32(&q[h * d..(h + 1) * d], key) * scale;
            }
        }
        for row in scores.chunks_exact_mut(n) {
            ops::softmax_inplace(row);
        }
        let o = &mut out[hs.start * d..hs.end * d];
        o.fill(0.0);
        for (i, j) in keys.clone().enumerate() {
            let value = store.value(layer, kv, j);
            for (g, o) in o.chunks_exact_mut(d).enumerate() {
                k.axpy(o, scores[g * n + i], value);
            }
        }
    }
}
// ANCHOR_END: attend_loops
