//! Greedy generation, the simplest decoding there is: run the model, take the most likely
//! next token, append it, repeat.
//!
//! There is deliberately no cache. Each step feeds the *whole* sequence so far through
//! all 30 layers, recomputing every earlier position's keys and values although they
//! cannot have changed (a token never sees the tokens after it). Step `t` costs as much as
//! a forward pass over `t` tokens, so generating `n` tokens costs O(n²) token-passes, and
//! tokens/s falls as the text grows. Chapter 5 keeps the keys and values instead.

use std::time::Instant;

use crate::model::argmax;
use crate::{Error, Model};

/// When to stop, besides after `max_new` tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Stop after an end-of-sequence token (it is included in the output).
    AtEos,
    /// Always produce `max_new` tokens (what the reference fixtures do).
    Never,
}

/// What a generation produced and how fast.
#[derive(Clone, Debug, PartialEq)]
pub struct Generation {
    /// The new ids, without the prompt.
    pub ids: Vec<u32>,
    /// Prompt length in tokens.
    pub prompt_tokens: usize,
    /// Wall-clock seconds of the whole loop.
    pub seconds: f64,
}

impl Generation {
    /// Generated tokens per second of wall-clock time.
    pub fn tokens_per_second(&self) -> f64 {
        self.ids.len() as f64 / self.seconds.max(1e-9)
    }
}

// ANCHOR: greedy
/// Generates up to `max_new` tokens after `prompt` by always taking the argmax.
/// `on_token` sees each new id as soon as it is chosen (to print it while the loop runs).
pub fn greedy(
    model: &Model,
    prompt: &[u32],
    max_new: usize,
    stop: Stop,
    on_token: &mut dyn FnMut(u32) -> Result<(), Error>,
) -> Result<Generation, Error> {
    let start = Instant::now();
    let mut ids = prompt.to_vec(); // the whole sequence so far: prompt + generated
    for _ in 0..max_new {
        // No cache: the full sequence goes through every layer again.
        let logits = model.next_token_logits(&ids)?; // (vocab)
        let next = argmax(&logits) as u32;
        ids.push(next);
        on_token(next)?;
        if stop == Stop::AtEos && model.config.eos_token_ids.contains(&next) {
            break;
        }
    }
    Ok(Generation {
        ids: ids[prompt.len()..].to_vec(),
        prompt_tokens: prompt.len(),
        seconds: start.elapsed().as_secs_f64(),
    })
}
// ANCHOR_END: greedy

/// Greedy continuation by teacher forcing: one forward pass over `prompt + continuation`
/// gives, at every position, the token greedy decoding would pick there *if* the text so
/// far were that prefix. Returns the first index `i` where our pick differs from
/// `continuation[i]`, or `None` if greedy decoding would reproduce all of it.
///
/// Because the model is causal and our kernels compute each row the same way whatever
/// the sequence length, this is exactly what [`greedy`] would do, for the price of one
/// forward pass instead of `continuation.len()` of them.
pub fn first_divergence(
    model: &Model,
    prompt: &[u32],
    continuation: &[u32],
) -> Result<Option<usize>, Error> {
    if prompt.is_empty() {
        return Err(Error::Input(
            "first_divergence needs a prompt of at least one token".into(),
        ));
    }
    if continuation.is_empty() {
        return Ok(None);
    }
    let mut ids = prompt.to_vec();
    ids.extend_from_slice(&continuation[..continuation.len() - 1]); // the last token is never fed
    let logits = model.logits(&ids)?; // (seq, vocab)
    let vocab = model.config.vocab_size;
    let picks =
        (prompt.len() - 1..ids.len()).map(|t| argmax(&logits[t * vocab..(t + 1) * vocab]) as u32);
    Ok(picks
        .zip(continuation)
        .position(|(ours, theirs)| ours != *theirs))
}

/// Ids of a `len`-token sequence for timing: `seed` repeated (the content does not change
/// the cost of a forward pass, only the length does).
pub fn filler(seed: &[u32], len: usize) -> Vec<u32> {
    seed.iter().copied().cycle().take(len).collect()
}

/// Seconds for one uncached generation step at sequence length `len`: one forward pass
/// over `len` tokens plus the LM head on the last one. Best of `repeats`.
pub fn time_step(model: &Model, seed: &[u32], len: usize, repeats: usize) -> Result<f64, Error> {
    let ids = filler(seed, len);
    let mut best = f64::INFINITY;
    for _ in 0..repeats.max(1) {
        let start = Instant::now();
        let logits = model.next_token_logits(&ids)?;
        std::hint::black_box(&logits);
        best = best.min(start.elapsed().as_secs_f64());
    }
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Weights;
    use crate::weights::tests::tiny_model;
    use ch01_tensors::safetensors::SafeTensors;

    fn tiny() -> Model {
        let (cfg, path) = tiny_model("generate", true);
        let st = SafeTensors::open(&path).unwrap();
        let m = Model::new(cfg.clone(), Weights::load(&st, &cfg).unwrap()).unwrap();
        std::fs::remove_file(path).ok();
        m
    }

    #[test]
    fn greedy_equals_teacher_forcing() {
        let m = tiny();
        let mut streamed = Vec::new();
        let g = greedy(&m, &[1, 7, 3], 12, Stop::Never, &mut |id| {
            streamed.push(id);
            Ok(())
        })
        .unwrap();
        assert_eq!(g.ids.len(), 12);
        assert_eq!(streamed, g.ids, "on_token sees every id, in order");
        assert_eq!(first_divergence(&m, &[1, 7, 3], &g.ids).unwrap(), None);
        let mut wrong = g.ids.clone();
        wrong[5] = (wrong[5] + 1) % 16;
        assert_eq!(first_divergence(&m, &[1, 7, 3], &wrong).unwrap(), Some(5));
        // Without a prompt there is no position whose logits predict the first token.
        assert!(matches!(
            first_divergence(&m, &[], &g.ids),
            Err(Error::Input(_))
        ));
    }

    #[test]
    fn stops_at_eos() {
        let mut m = tiny();
        // Make every token an end token: generation stops after one step.
        m.config.eos_token_ids = (0..16).collect();
        let g = greedy(&m, &[1], 10, Stop::AtEos, &mut |_| Ok(())).unwrap();
        assert_eq!(g.ids.len(), 1);
    }
}
