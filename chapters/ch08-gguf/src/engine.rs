//! One forward pass for every family: chapter 6's cached layer loop, with the places where
//! a family differs from Llama written as data ([`Family`]) instead of a second copy (the
//! table below is the first two; `book/src/ch08-families.md` has them all).
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
//! chapter 7's logits bit for bit (a test checks it). The family and its GELU are in
//! `engine/family.rs`, the model and engine's types in `engine/model.rs`, the decoder layer
//! in `engine/layer.rs`, attention over the cache in `engine/attend.rs`, and how many
//! threads a decode step takes in `engine/tune.rs`.

use ch05_kv_cache::forward::kv_layout;
use ch05_kv_cache::{KvLayout, KvStore, RingCache};
use ch06_quantization::Kernels;
use ch07_simd_parallel::team;

use crate::error::{Error, Result};
use crate::matrix::Matrix;
use ch07_simd_parallel::kernels::ManyTokens;

mod attend;
mod family;
mod layer;
mod model;
mod rope;
mod rowwise;
pub mod tune;

pub use attend::{LayerAttention, attend, attend_heads, softcap, weights_rows};
pub use family::{Activation, Family, RopeRows, Sliding, gelu_f16, gelu_table};
pub use layer::{Buffers, Chunk, LayerRows, attention_part};
pub use model::{Engine, Layer, Model, Run};
pub use rope::{LazyRope, RopeScaling};
pub use rowwise::{gelu_f16_inplace, rmsnorm_rows};
pub use tune::{DecodeTuner, TUNE_VAR, tuning};

/// An error if any of `x` (`what`: the last layer's output, the logits) is infinite or NaN:
/// a token drawn from them would be noise, from weights or scales that overflow (a damaged
/// file, or one whose metadata does not fit its weights). `v · 0` is 0 for a finite `v`
/// and NaN for an infinity or a NaN, so sixteen running sums of it, which the compiler
/// adds side by side, stay 0 unless one is not finite: Gemma-3's 262 144 logits in about
/// 30 µs on the book's Xeon (three times quicker than a test of each value), against a
/// decode step's 11 ms.
pub fn finite(what: &str, x: &[f32]) -> Result<()> {
    const LANES: usize = 16;
    let mut lanes = [0.0f32; LANES];
    let chunks = x.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for (l, v) in lanes.iter_mut().zip(c) {
            *l += v * 0.0;
        }
    }
    if lanes.iter().chain(rest).all(|v| v.is_finite()) {
        return Ok(());
    }
    let bad = x.iter().filter(|v| !v.is_finite()).count();
    Err(Error::NotFinite(format!(
        "{bad} of {} values of the {what} are infinite or NaN: the file's weights or their \
         scales overflow f32",
        x.len()
    )))
}

impl<'m> Engine<'m> {
    pub fn new(
        model: &'m Model,
        kernels: &'m dyn Kernels,
        kkernels: &'m dyn ManyTokens,
    ) -> Engine<'m> {
        Engine {
            model,
            kernels,
            kkernels,
            chunk: 512,
            tuner: DecodeTuner::default(),
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

    // The products go through these three, each timed as its kind when a program records a
    // step (`ch08-gguf regions`; chapter 7's `team::timed`, one relaxed load otherwise).
    fn matmul(&self, w: &Matrix, out: &mut [f32], x: &[f32], seq: usize) {
        let kind = match w {
            _ if std::ptr::eq(w, self.model.lm_head()) => "LM head",
            _ if w.cols() == self.model.config.intermediate_size => "down",
            _ => "o",
        };
        team::timed(kind, || w.matmul(self.kernels, self.kkernels, out, x, seq));
    }

    fn matmul_group(&self, w: &[&Matrix], outs: &mut [&mut [f32]], x: &[f32], seq: usize) {
        let (k, kk) = (self.kernels, self.kkernels);
        team::timed("q/k/v", || {
            crate::matrix::matmul_group(k, kk, w, outs, x, seq)
        });
    }

    fn matmul_pair_then(
        &self,
        w: [&Matrix; 2],
        outs: [&mut [f32]; 2],
        x: &[f32],
        seq: usize,
        then: &(dyn Fn(&mut [f32], &[f32]) + Sync),
    ) {
        let (k, kk) = (self.kernels, self.kkernels);
        team::timed("gate/up", || {
            crate::matrix::matmul_pair_then(k, kk, w, outs, x, seq, then)
        });
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
    /// logits after the last one, `(vocab)`. A decode step (one id) runs on as many threads
    /// as this engine's measurements say decode fastest (`engine/tune.rs`).
    pub fn forward<S: KvStore + Sync + ?Sized>(
        &self,
        cache: &mut S,
        ids: &[u32],
        pos0: usize,
    ) -> Result<Vec<f32>> {
        let mut run = move || {
            let h = self.hidden(cache, ids, pos0)?;
            self.checked_head(&h[h.len() - self.model.config.hidden_size..])
        };
        match ids.len() {
            1 => self.tuner.run(run),
            _ => run(),
        }
    }

    /// The thread count this engine's decode steps settled on, once measured
    /// (`engine/tune.rs`); `None` before, or where nothing is measured.
    pub fn decode_threads_chosen(&self) -> Option<usize> {
        self.tuner.chosen()
    }

    /// The logits of every position, `(seq, vocab)`.
    pub fn forward_all<S: KvStore + Sync + ?Sized>(
        &self,
        cache: &mut S,
        ids: &[u32],
        pos0: usize,
    ) -> Result<Vec<f32>> {
        let h = self.hidden(cache, ids, pos0)?;
        self.checked_head(&h)
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
        let mut buffers = Buffers::default(); // one set for every layer and chunk
        for (c, x_c) in x.chunks_mut(chunk * dim).enumerate() {
            let pos0 = pos0 + c * chunk;
            let mut rows = Chunk {
                cache: &mut *cache,
                pos0,
            };
            for (l, w) in self.model.layers.iter().enumerate() {
                self.layer(l, w, &mut rows, x_c, &mut buffers);
            }
        }
        Ok(x)
    }

    /// [`Engine::head`] of the last layer's output `x`, both checked by [`finite`]: the
    /// logits a token is drawn from, or an error that says which overflowed.
    pub fn checked_head(&self, x: &[f32]) -> Result<Vec<f32>> {
        finite("last layer's output", x)?;
        let logits = self.head(x);
        finite("logits", &logits)?;
        Ok(logits)
    }

    // ANCHOR: head
    /// Final norm and the LM head: `(rows, dim)` → `(rows, vocab)`.
    pub fn head(&self, x: &[f32]) -> Vec<f32> {
        let m = self.model;
        let rows = x.len() / m.config.hidden_size;
        let xn = rmsnorm_rows(x, &m.final_norm, m.config.rms_norm_eps);
        let head = m.lm_head();
        let mut logits = vec![0.0f32; rows * head.rows()];
        self.matmul(head, &mut logits, &xn, rows);
        if let Some(cap) = m.family.final_softcap {
            softcap(&mut logits, cap); // Gemma-2
        }
        logits
    }
    // ANCHOR_END: head

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
