//! Chapter 9's generation loop on the GPU: the prompt run as a prefill (a submission for
//! each piece of up to `decoder.chunk` tokens), then each token chosen by a decode step,
//! streamed and checked for a stop, as `ch09_generate::generate` does. Greedy decoding
//! without penalties takes the GPU's argmax (4 bytes read back a token) with two steps in
//! flight ([`Decoder::greedy`]); anything else reads back the logits and hands them to
//! chapter 9's [`Sampler`].

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
    let start = Instant::now();
    let last = decoder
        .prefill(prompt, 0, !on_gpu)
        .map_err(|e| e.to_string())?;
    let prefill_seconds = start.elapsed().as_secs_f64();
    // ANCHOR_END: generate
    // ANCHOR: generate_loop
    let mut out = Output {
        history: prompt.to_vec(),
        ids: Vec::new(),
        text: String::new(),
        decoder: StreamDecoder::new(tokenizer),
        matcher: StopMatcher::new(stops),
        end_ids,
        n,
        total,
    };
    let start = Instant::now();
    let stop = match last {
        // greedy on the GPU, two steps in flight: each token read back while the next
        // step runs; a step the stop leaves queued is dropped
        (first, None) => match out.take(first, on_text)? {
            Some(stop) => stop,
            None => {
                let steps = total - prompt.len() - 1;
                let mut stop = Ok(None);
                decoder
                    .greedy(first, prompt.len(), steps, &mut |next| {
                        stop = out.take(next, on_text);
                        matches!(stop, Ok(None))
                    })
                    .map_err(|e| e.to_string())?;
                stop?.unwrap_or(StopReason::Context)
            }
        },
        // sampled on the host: the logits read back after each step
        (_, Some(mut logits)) => loop {
            // as the CPU's engine refuses them (a greedy step's argmax does on the GPU)
            ch08_gguf::engine::finite("logits", &logits).map_err(|e| e.to_string())?;
            let next = sampler.sample(&logits, &out.history);
            if let Some(stop) = out.take(next, on_text)? {
                break stop;
            }
            let pos = out.history.len() - 1;
            logits = match decoder.step(next, pos, true).map_err(|e| e.to_string())? {
                (_, Some(logits)) => logits,
                (_, None) => return Err("the step read back no logits".into()),
            };
        },
    };
    let mut text = out.text;
    if stop != StopReason::StopString {
        let rest = out.matcher.finish();
        on_text(&rest);
        text.push_str(&rest);
    }
    Ok(Generation {
        ids: out.ids,
        text,
        stop,
        prefill_seconds,
        decode_seconds: start.elapsed().as_secs_f64(),
    })
}

/// What a generation has made so far, and what stops it.
struct Output<'a> {
    history: Vec<u32>,
    ids: Vec<u32>,
    text: String,
    decoder: StreamDecoder<'a>,
    matcher: StopMatcher,
    end_ids: &'a [u32],
    n: usize,
    total: usize,
}

impl Output<'_> {
    /// Takes the token chosen next: streams its text and says whether it stops the run.
    fn take(
        &mut self,
        next: u32,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Option<StopReason>, String> {
        self.ids.push(next);
        self.history.push(next);
        if self.end_ids.contains(&next) {
            return Ok(Some(StopReason::EndOfText));
        }
        let piece = self.decoder.push(next).map_err(|e| e.to_string())?;
        let part = self.matcher.push(&piece);
        on_text(&part.text);
        self.text.push_str(&part.text);
        Ok(if part.stopped {
            Some(StopReason::StopString)
        } else if self.ids.len() == self.n {
            Some(StopReason::Length)
        } else if self.history.len() >= self.total {
            Some(StopReason::Context)
        } else {
            None
        })
    }
}
// ANCHOR_END: generate_loop
