//! The measurements behind the chapter's claims: decode speed with and without the cache
//! as the context grows, and prefill batched versus token by token.
//!
//! The binary's `bench` command runs these and prints (or `--json`s) the numbers; `--svg`
//! draws the decode curve for the book. Each number is the median of a few repeats of
//! one step: short runs, because the machine may be busy.

use std::time::Instant;

use ch04_forward::Model;
use ch04_forward::generate::{filler, time_step};
use serde::{Deserialize, Serialize};

use crate::Error;
use crate::contiguous::KvCache;
use crate::forward::Engine;
use crate::plot::{Series, line_chart};

/// Token ids the timing sequences are made of (the content does not change the cost).
pub const SEED_IDS: &[u32] = &[504, 3575, 282, 4649, 314, 253, 1345, 30];

/// Decode speed at one context length.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DecodePoint {
    /// Tokens in the context when the new token is chosen.
    pub positions: usize,
    /// One decode step over a cache holding `positions − 1` tokens.
    pub cached_tokens_per_s: f64,
    /// One forward pass over all `positions` tokens (chapter 4's loop).
    pub uncached_tokens_per_s: f64,
}

/// Prefill speed for one prompt length.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Prefill {
    pub tokens: usize,
    /// The whole prompt through the layers as one chunk: matrix-matrix products.
    pub batched_tokens_per_s: f64,
    /// The same prompt one token at a time: matrix-vector products.
    pub token_by_token_tokens_per_s: f64,
}

/// Everything `bench` measures.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    pub machine: String,
    pub decode: Vec<DecodePoint>,
    pub prefill: Prefill,
}

/// Runs one token through the model, untimed, so that the first timed step does not pay
/// for reading the weights in: the file is memory-mapped, and the first touch of each
/// page is a page fault (or a disk read).
pub fn warm_up(model: &Model) -> Result<(), Error> {
    let engine = Engine::new(model);
    engine.forward(&mut KvCache::new(engine.layout(), 1), &SEED_IDS[..1], 0)?;
    Ok(())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

// ANCHOR: decode_cached
/// Seconds for one cached decode step with `positions − 1` tokens already in the cache:
/// prefill them once, then time the step at position `positions − 1` `repeats` times
/// (each repeat overwrites the same cache slot, so every one does the same work).
pub fn cached_step_seconds(model: &Model, positions: usize, repeats: usize) -> Result<f64, Error> {
    let ids = filler(SEED_IDS, positions);
    let engine = Engine::new(model);
    let mut cache = KvCache::new(engine.layout(), positions);
    if positions > 1 {
        engine.forward(&mut cache, &ids[..positions - 1], 0)?;
    }
    let mut times = Vec::with_capacity(repeats);
    for _ in 0..repeats.max(1) {
        let start = Instant::now();
        std::hint::black_box(engine.forward(&mut cache, &ids[positions - 1..], positions - 1)?);
        times.push(start.elapsed().as_secs_f64());
    }
    Ok(median(times))
}
// ANCHOR_END: decode_cached

/// Prefill of `tokens` filler tokens, batched and token by token: `(batched s, one-by-one s)`.
pub fn prefill_seconds(model: &Model, tokens: usize) -> Result<(f64, f64), Error> {
    let ids = filler(SEED_IDS, tokens);
    let mut engine = Engine::new(model);
    engine.chunk = tokens;
    let mut cache = KvCache::new(engine.layout(), tokens);
    let start = Instant::now();
    std::hint::black_box(engine.forward(&mut cache, &ids, 0)?);
    let batched = start.elapsed().as_secs_f64();
    let start = Instant::now();
    for (pos, id) in ids.iter().enumerate() {
        std::hint::black_box(engine.forward(&mut cache, std::slice::from_ref(id), pos)?);
    }
    Ok((batched, start.elapsed().as_secs_f64()))
}

/// Runs the whole benchmark. `progress` sees a line per measurement.
pub fn run(
    model: &Model,
    positions: &[usize],
    prefill_tokens: usize,
    progress: &mut dyn FnMut(&str),
) -> Result<Report, Error> {
    warm_up(model)?;
    let mut decode = Vec::new();
    for &p in positions {
        let cached = cached_step_seconds(model, p, 5)?;
        let uncached = time_step(model, SEED_IDS, p, if p <= 64 { 3 } else { 1 })?;
        progress(&format!(
            "decode at {p:>4} positions: cached {:.1} tok/s, uncached {:.2} tok/s",
            1.0 / cached,
            1.0 / uncached
        ));
        decode.push(DecodePoint {
            positions: p,
            cached_tokens_per_s: 1.0 / cached,
            uncached_tokens_per_s: 1.0 / uncached,
        });
    }
    let (batched, single) = prefill_seconds(model, prefill_tokens)?;
    let n = prefill_tokens as f64;
    progress(&format!(
        "prefill {prefill_tokens} tokens: batched {:.1} tok/s, token by token {:.1} tok/s",
        n / batched,
        n / single
    ));
    let prefill = Prefill {
        tokens: prefill_tokens,
        batched_tokens_per_s: n / batched,
        token_by_token_tokens_per_s: n / single,
    };
    Ok(Report {
        machine: machine(),
        decode,
        prefill,
    })
}

/// The decode curve of a report as an SVG chart.
pub fn decode_svg(report: &Report) -> String {
    let pts = |f: fn(&DecodePoint) -> f64| {
        report
            .decode
            .iter()
            .map(|d| (d.positions as f64, f(d)))
            .collect()
    };
    let series = [
        Series {
            name: "with KV cache".into(),
            color: "#1f77b4",
            points: pts(|d| d.cached_tokens_per_s),
        },
        Series {
            name: "without (chapter 4)".into(),
            color: "#d62728",
            points: pts(|d| d.uncached_tokens_per_s),
        },
    ];
    let ticks: Vec<f64> = report.decode.iter().map(|d| d.positions as f64).collect();
    let title = format!("SmolLM2-135M f32 decode speed, {}", report.machine);
    line_chart(
        &title,
        "tokens in the context",
        "tokens/s (log scale)",
        &ticks,
        &series,
    )
}

/// A short description of this machine: CPU model, cores, and AVX-512 if present.
pub fn machine() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = info
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .and_then(|r| r.split(':').nth(1))
        })
        .map(|m| m.trim().replace("(R)", ""))
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let avx512 = info
        .lines()
        .any(|l| l.starts_with("flags") && l.contains("avx512f"));
    format!(
        "{cores}-core {model}{}",
        if avx512 { " with AVX-512" } else { "" }
    )
}

/// A rate with three significant digits: `21.6`, `5.14`, `0.319`.
fn three_digits(x: f64) -> String {
    let decimals = if x >= 100.0 {
        0
    } else if x >= 10.0 {
        1
    } else if x >= 1.0 {
        2
    } else {
        3
    };
    format!("{x:.decimals$}")
}

/// The report as a Markdown table, for the book. It names no machine: `cargo xtask perf`
/// heads the file with one line that does.
pub fn markdown(report: &Report) -> String {
    let mut s = String::from(
        "| tokens in the context | with the cache | without (chapter 4) | speed-up |\n|---:|---:|---:|---:|\n",
    );
    for d in &report.decode {
        s.push_str(&format!(
            "| {} | {} tokens/s | {} tokens/s | {:.0}× |\n",
            d.positions,
            three_digits(d.cached_tokens_per_s),
            three_digits(d.uncached_tokens_per_s),
            d.cached_tokens_per_s / d.uncached_tokens_per_s
        ));
    }
    let p = &report.prefill;
    s.push_str(&format!(
        "\nPrefill of a {}-token prompt: {:.1} tokens/s as one batch, {:.1} tokens/s one token at a time ({:.1}×).\n",
        p.tokens,
        p.batched_tokens_per_s,
        p.token_by_token_tokens_per_s,
        p.batched_tokens_per_s / p.token_by_token_tokens_per_s
    ));
    s
}
