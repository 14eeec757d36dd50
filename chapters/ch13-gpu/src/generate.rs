//! Chapter 9's generation loop on the GPU: the prompt run as a prefill (a submission for
//! each piece of up to `decoder.chunk` tokens), then each token chosen by a decode step,
//! streamed and checked for a stop, as `ch09_generate::generate` does. Greedy decoding without penalties takes
//! the GPU's argmax (4 bytes read back a token); anything else reads back the logits and
//! hands them to chapter 9's [`Sampler`].

use std::time::Instant;

use ch02_tokenizer::{StreamDecoder, Tokenizer};
use ch09_generate::stop::StopMatcher;
use ch09_generate::{Generation, Sampler, StopReason};

use crate::step::Decoder;

// ANCHOR: generate
/// Runs `prompt` through `decoder`, then up to `n` tokens chosen by `sampler`, calling
/// `on_text` with each piece of text as soon as it is safe to print.
#[allow(clippy::too_many_arguments)] // chapter 9's generate's arguments, a decoder for its engine
pub fn generate(
    decoder: &Decoder,
    tokenizer: &Tokenizer,
    end_ids: &[u32],
    prompt: &[u32],
    n: usize,
    sampler: &mut Sampler,
    stops: &[String],
    on_text: &mut dyn FnMut(&str),
) -> Result<Generation, String> {
    let limit = decoder.capacity;
    if prompt.is_empty() {
        return Err("the prompt is empty: the model needs at least one token".into());
    }
    if prompt.len() >= limit {
        return Err(format!(
            "the prompt is {} tokens; the cache holds {limit} positions, so nothing could follow it",
            prompt.len()
        ));
    }
    let total = prompt.len().saturating_add(n).min(limit);
    let on_gpu = sampler.is_greedy() && !sampler.config.has_penalties();
    let step = |id: u32, pos: usize| decoder.step(id, pos, !on_gpu).map_err(|e| e.to_string());
    let start = Instant::now();
    let mut last = decoder
        .prefill(prompt, 0, !on_gpu)
        .map_err(|e| e.to_string())?;
    let prefill_seconds = start.elapsed().as_secs_f64();
    // ANCHOR_END: generate
    // ANCHOR: generate_loop
    let mut history = prompt.to_vec();
    let mut ids = Vec::new();
    let mut text = String::new();
    let mut decoder_text = StreamDecoder::new(tokenizer);
    let mut matcher = StopMatcher::new(stops);
    let start = Instant::now();
    let stop = loop {
        let next = match &last {
            (best, None) => *best,
            (_, Some(logits)) => sampler.sample(logits, &history),
        };
        ids.push(next);
        history.push(next);
        if end_ids.contains(&next) {
            break StopReason::EndOfText;
        }
        let piece = decoder_text.push(next).map_err(|e| e.to_string())?;
        let part = matcher.push(&piece);
        on_text(&part.text);
        text.push_str(&part.text);
        if part.stopped {
            break StopReason::StopString;
        }
        if ids.len() == n {
            break StopReason::Length;
        }
        if history.len() >= total {
            break StopReason::Context;
        }
        last = step(next, history.len() - 1)?;
    };
    if stop != StopReason::StopString {
        let rest = matcher.finish();
        on_text(&rest);
        text.push_str(&rest);
    }
    Ok(Generation {
        ids,
        text,
        stop,
        prefill_seconds,
        decode_seconds: start.elapsed().as_secs_f64(),
    })
}
// ANCHOR_END: generate_loop
