//! The generation loop: prefill, then sample, stream and stop.

use std::time::Instant;

use ch02_tokenizer::{StreamDecoder, Tokenizer};
use ch08_gguf::engine::Engine;

use crate::sampling::Sampler;
use crate::stop::StopMatcher;

/// Why generation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The model produced an end-of-generation token.
    EndOfText,
    /// A `--stop` string appeared in the text.
    StopString,
    /// `-n` tokens were generated.
    Length,
    /// The context (the model's positions) is full.
    Context,
    /// The user interrupted the reply (Ctrl-C in `chat`).
    Interrupted,
}

impl StopReason {
    pub fn name(self) -> &'static str {
        match self {
            StopReason::EndOfText => "eos",
            StopReason::StopString => "stop",
            StopReason::Length => "length",
            StopReason::Context => "context",
            StopReason::Interrupted => "interrupted",
        }
    }
}

/// What a generation produced.
#[derive(Clone, Debug)]
pub struct Generation {
    /// Every token sampled, the end-of-generation token included if there was one.
    pub ids: Vec<u32>,
    /// The text printed: up to a stop string, without an end-of-generation token.
    pub text: String,
    pub stop: StopReason,
    pub prefill_seconds: f64,
    pub decode_seconds: f64,
}

impl Generation {
    /// Decode speed: tokens after the first, over the time after the prefill.
    pub fn decode_tok_s(&self) -> f64 {
        self.ids.len().saturating_sub(1) as f64 / self.decode_seconds.max(1e-9)
    }
}

// ANCHOR: generate
/// Runs `prompt` through `engine`, then samples up to `n` tokens with `sampler`, calling
/// `on_text` with each piece of text as soon as it is safe to print (whole UTF-8
/// characters, never the start of a stop string).
#[allow(clippy::too_many_arguments)]
pub fn generate(
    engine: &Engine,
    tokenizer: &Tokenizer,
    end_ids: &[u32],
    prompt: &[u32],
    n: usize,
    sampler: &mut Sampler,
    stops: &[String],
    on_text: &mut dyn FnMut(&str),
) -> Result<Generation, String> {
    let limit = engine.model.max_positions();
    if prompt.is_empty() {
        return Err("the prompt is empty: the model needs at least one token".into());
    }
    if prompt.len() >= limit {
        return Err(format!(
            "the prompt is {} tokens; the model has {limit} positions, so nothing could follow it",
            prompt.len()
        ));
    }
    let total = prompt.len().saturating_add(n).min(limit);
    let mut cache = engine.new_cache(total).map_err(|e| e.to_string())?;
    let start = Instant::now();
    let mut logits = engine
        .forward(&mut cache, prompt, 0)
        .map_err(|e| e.to_string())?;
    let prefill_seconds = start.elapsed().as_secs_f64();
    // ANCHOR_END: generate
    // ANCHOR: generate_loop
    let mut history = prompt.to_vec();
    let mut ids = Vec::new();
    let mut text = String::new();
    let mut decoder = StreamDecoder::new(tokenizer);
    let mut matcher = StopMatcher::new(stops);
    let start = Instant::now();
    let stop = loop {
        let next = sampler.sample(&logits, &history);
        ids.push(next);
        history.push(next);
        if end_ids.contains(&next) {
            break StopReason::EndOfText;
        }
        let piece = decoder.push(next).map_err(|e| e.to_string())?;
        let step = matcher.push(&piece);
        on_text(&step.text);
        text.push_str(&step.text);
        if step.stopped {
            break StopReason::StopString;
        }
        if ids.len() == n {
            break StopReason::Length;
        }
        if history.len() >= total {
            break StopReason::Context;
        }
        logits = engine
            .forward(&mut cache, &[next], history.len() - 1)
            .map_err(|e| e.to_string())?;
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
