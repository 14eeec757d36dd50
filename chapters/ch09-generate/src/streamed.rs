//! The speed a user sees: decode through the whole generation loop.
//!
//! `tg128` (chapter 8's bench) times the forward pass and an argmax, nothing else. A user's
//! tokens also go through the sampler, the streaming decoder and the stop matcher, and are
//! written out one by one. This times [`generate`] itself, text sent to a sink, so the
//! book can put the two side by side: what the loop around the model costs.

use ch02_tokenizer::Tokenizer;
use ch08_gguf::engine::Engine;

use crate::generate::generate;
use crate::sampling::{Sampler, SamplerConfig};

/// The prompt the streamed figure starts from.
pub const PROMPT: &str = "Once upon a time, in a small village by the sea,";

/// Decode tok/s of 128 tokens through [`generate`] with `config` (never stopping early: no
/// end token, no stop string), the median of `rounds` runs after one warm-up, on the
/// calling thread's pool.
pub fn decode_tok_s(
    engine: &Engine,
    tokenizer: &Tokenizer,
    prompt: &[u32],
    config: &SamplerConfig,
    rounds: usize,
) -> Result<f64, String> {
    let mut speeds = Vec::new();
    for round in 0..=rounds.max(1) {
        let mut sampler = Sampler::new(config.clone());
        let mut bytes = 0usize;
        let g = generate(
            engine,
            tokenizer,
            &[],
            prompt,
            128,
            &mut sampler,
            &[],
            &mut |piece| {
                bytes += std::hint::black_box(piece).len();
            },
        )?;
        if round > 0 {
            speeds.push(g.decode_tok_s());
        }
    }
    speeds.sort_by(f64::total_cmp);
    Ok(speeds[speeds.len() / 2])
}
