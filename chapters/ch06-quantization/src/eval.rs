//! What quantization costs the model: perplexity, KL divergence and top-1 agreement.
//!
//! Perplexity uses the fixtures' method (`fixtures/reference/perplexity.json`), so the f32
//! and Q4_1 numbers compare with llama.cpp's: the text, tokenized without BOS or special
//! tokens, is cut into windows of 256 tokens; each window starts from an empty cache; every
//! token with a token before it in its window is scored by `−log p(token | window so far)`;
//! perplexity is `exp` of the mean, computed in f64.
//!
//! KL divergence and top-1 agreement compare the quantized model's next-token
//! distribution with the f32 model's at the same positions: `KL(p_f32 ‖ p_q)` in nats,
//! averaged over positions, and how often both pick the same most likely token.

use std::time::Instant;

use ch04_forward::model::argmax;
use ch05_kv_cache::KvCache;
use serde::Serialize;

use crate::Error;
use crate::forward::QEngine;
use crate::model::QModel;

/// Tokens per perplexity window, as in the fixtures.
pub const WINDOW: usize = 256;

/// `log Σ exp(logits)`, in f64.
fn log_sum_exp(logits: &[f32]) -> f64 {
    let max = logits.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
    max + logits
        .iter()
        .map(|&v| (v as f64 - max).exp())
        .sum::<f64>()
        .ln()
}

// ANCHOR: kl
/// `KL(p ‖ q) = Σ p_i (log p_i − log q_i)` between the softmax distributions of two rows of
/// logits, in nats, in f64.
pub fn kl_divergence(p_logits: &[f32], q_logits: &[f32]) -> f64 {
    let (lp, lq) = (log_sum_exp(p_logits), log_sum_exp(q_logits));
    p_logits
        .iter()
        .zip(q_logits)
        .map(|(&a, &b)| {
            let log_p = a as f64 - lp;
            log_p.exp() * (log_p - (b as f64 - lq))
        })
        .sum()
}
// ANCHOR_END: kl

/// The logits at every position of `window`, from an empty cache: `(len, vocab)`.
pub fn window_logits(model: &QModel, window: &[u32]) -> Result<Vec<f32>, Error> {
    QEngine::new(model).window_logits(window)
}

impl QEngine<'_> {
    /// [`window_logits`] with this engine's kernels.
    pub fn window_logits(&self, window: &[u32]) -> Result<Vec<f32>, Error> {
        let mut cache = KvCache::new(self.layout(), window.len());
        self.forward_all(&mut cache, window, 0)
    }
}

/// Scores of one model against a reference on the same text.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Scores {
    /// Tokens scored.
    pub tokens: usize,
    /// `exp(mean −log p(next token))`.
    pub perplexity: f64,
    /// Mean `KL(p_reference ‖ p_model)` over the scored positions, nats.
    pub kl_mean: f64,
    /// Fraction of scored positions where both models' most likely next token is the same.
    pub top1_agreement: f64,
}

// ANCHOR: score
/// The logits of every window of `ids` (windows of [`WINDOW`] tokens, each from an empty
/// cache): what [`score`] compares a model against.
pub fn reference_logits(reference: &QModel, ids: &[u32]) -> Result<Vec<Vec<f32>>, Error> {
    ids.chunks(WINDOW)
        .map(|w| window_logits(reference, w))
        .collect()
}

/// Perplexity of `model` on `ids`, and its KL divergence and top-1 agreement with the
/// reference logits `reference` (from [`reference_logits`] on the same ids).
pub fn score(model: &QModel, reference: &[Vec<f32>], ids: &[u32]) -> Result<Scores, Error> {
    QEngine::new(model).score(reference, ids)
}

impl QEngine<'_> {
    /// [`score`] with this engine's kernels.
    pub fn score(&self, reference: &[Vec<f32>], ids: &[u32]) -> Result<Scores, Error> {
        let vocab = self.model.config.vocab_size;
        let (mut nll, mut kl, mut agree, mut n) = (0.0f64, 0.0f64, 0usize, 0usize);
        for (window, ref_logits) in ids.chunks(WINDOW).zip(reference) {
            let logits = self.window_logits(window)?; // (len, vocab)
            // position t - 1 predicts token t
            for t in 1..window.len() {
                let row = &logits[(t - 1) * vocab..t * vocab];
                let ref_row = &ref_logits[(t - 1) * vocab..t * vocab];
                nll += log_sum_exp(row) - row[window[t] as usize] as f64;
                kl += kl_divergence(ref_row, row);
                agree += usize::from(argmax(row) == argmax(ref_row));
                n += 1;
            }
        }
        if n == 0 {
            return Err(Error::Config(
                "the text is too short to score: it needs at least two tokens".into(),
            ));
        }
        Ok(Scores {
            tokens: n,
            perplexity: (nll / n as f64).exp(),
            kl_mean: kl / n as f64,
            top1_agreement: agree as f64 / n as f64,
        })
    }
}
// ANCHOR_END: score

/// A greedy run with the cache: the ids, and the prefill and decode times.
pub struct Run {
    pub ids: Vec<u32>,
    pub prefill_seconds: f64,
    pub decode_seconds: f64,
}

impl Run {
    /// Decode tokens per second (every step after the one that ends the prefill).
    pub fn decode_tok_s(&self) -> f64 {
        (self.ids.len().saturating_sub(1)) as f64 / self.decode_seconds.max(1e-9)
    }
}

// ANCHOR: greedy
/// Greedy decoding: prefill `prompt`, then up to `n` tokens, calling `on_token` with each.
/// Stops after an end-of-sequence id when `stop_at_eos`.
pub fn greedy(
    model: &QModel,
    prompt: &[u32],
    n: usize,
    stop_at_eos: bool,
    on_token: &mut dyn FnMut(u32),
) -> Result<Run, Error> {
    QEngine::new(model).greedy(prompt, n, stop_at_eos, on_token)
}

impl QEngine<'_> {
    /// [`greedy`] with this engine's kernels.
    pub fn greedy(
        &self,
        prompt: &[u32],
        n: usize,
        stop_at_eos: bool,
        on_token: &mut dyn FnMut(u32),
    ) -> Result<Run, Error> {
        let (engine, model) = (self, self.model);
        let total = prompt
            .len()
            .checked_add(n)
            .filter(|&t| t <= model.rope.max_pos)
            .ok_or(Error::ContextFull {
                limit: model.rope.max_pos,
                needed: prompt.len().saturating_add(n),
            })?;
        let mut cache = KvCache::new(engine.layout(), total);
        let start = Instant::now();
        let mut logits = engine.forward(&mut cache, prompt, 0)?;
        let prefill_seconds = start.elapsed().as_secs_f64();
        let start = Instant::now();
        let mut ids = Vec::new();
        while ids.len() < n {
            let next = argmax(&logits) as u32;
            ids.push(next);
            on_token(next);
            if ids.len() == n || (stop_at_eos && model.config.eos_token_ids.contains(&next)) {
                break;
            }
            logits = engine.forward(&mut cache, &[next], prompt.len() + ids.len() - 1)?;
        }
        Ok(Run {
            ids,
            prefill_seconds,
            decode_seconds: start.elapsed().as_secs_f64(),
        })
    }
}
// ANCHOR_END: greedy

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kl_is_zero_for_equal_rows_and_positive_otherwise() {
        let p = [1.0f32, 2.0, 3.0];
        assert!(kl_divergence(&p, &p).abs() < 1e-12);
        // shifting every logit by a constant changes nothing
        assert!(kl_divergence(&p, &[11.0, 12.0, 13.0]).abs() < 1e-12);
        let k = kl_divergence(&p, &[3.0, 2.0, 1.0]);
        // p = softmax(1,2,3) = (0.090, 0.245, 0.665); q reversed: KL = Σ p (log p − log q) = 1.15
        assert!((k - 1.1508).abs() < 1e-3, "{k}");
    }
}
