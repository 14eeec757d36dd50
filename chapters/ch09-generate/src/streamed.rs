//! The speed a user sees: decode through the whole generation loop.
//!
//! `tg128` (chapter 8's bench) times the forward pass and an argmax, nothing else. A user's
//! tokens also go through the sampler, the streaming decoder and the stop matcher, and are
//! written out one by one. This times [`generate`] itself, text sent to a sink, so the
//! book can put the two side by side: what the loop around the model costs.

use ch02_tokenizer::Tokenizer;
use ch07_simd_parallel::pool::in_pool;
use ch07_simd_parallel::stats::median;
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

/// tg128 and the streamed rates of `configs`, measured in the same minutes.
pub struct BesideTg128 {
    /// Chapter 8's tg128 (from an empty cache, greedy, no loop around the model).
    pub tg128_tok_s: f64,
    /// [`decode_tok_s`] for each of the configs, in their order.
    pub streamed_tok_s: Vec<f64>,
    /// Each config's streamed rate over the tg128 of the same round, the median over the
    /// rounds: the figure to quote, since a round's two runs share the host's mood of that
    /// minute while the medians of the rates come from different minutes.
    pub ratios: Vec<f64>,
}

/// tg128 and the streamed decode of each of `configs`, alternating for `rounds` rounds on
/// `threads` threads, medians: on a shared machine the speed moves from minute to minute,
/// so a ratio of two figures taken minutes apart says more about the host than about the
/// loop. Each round is one tg128 and one streamed run of each config (after its warm-up),
/// the tg128 first in even rounds and last in odd ones.
pub fn beside_tg128(
    engine: &Engine,
    tokenizer: &Tokenizer,
    prompt: &[u32],
    configs: &[SamplerConfig],
    threads: usize,
    rounds: usize,
) -> Result<BesideTg128, String> {
    let mut tg = Vec::new();
    let mut streamed = vec![Vec::new(); configs.len()];
    let mut ratios = vec![Vec::new(); configs.len()];
    for round in 0..rounds.max(1) {
        let tg128 = || ch08_gguf::bench::decode_at_depth(engine, threads, 0);
        let first = if round % 2 == 0 { Some(tg128()?) } else { None };
        let mut this = Vec::new();
        for config in configs {
            this.push(in_pool(threads, || {
                decode_tok_s(engine, tokenizer, prompt, config, 1)
            })??);
        }
        let t = match first {
            Some(t) => t,
            None => tg128()?,
        };
        tg.push(t);
        for ((s, r), v) in streamed.iter_mut().zip(&mut ratios).zip(this) {
            s.push(v);
            r.push(v / t);
        }
    }
    Ok(BesideTg128 {
        tg128_tok_s: median(&mut tg),
        streamed_tok_s: streamed.iter_mut().map(|s| median(s)).collect(),
        ratios: ratios.iter_mut().map(|r| median(r)).collect(),
    })
}
