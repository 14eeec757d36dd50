//! pp512 and tg128 of any model this chapter runs, and the race with llama-bench on the
//! same file: chapter 7's measurement, with the file's own weights.

use std::path::Path;
use std::time::Instant;

use ch07_simd_parallel::bench::EndToEnd;
use ch07_simd_parallel::compare::{Comparison, llama_bench_depth, llama_bench_path};
use ch07_simd_parallel::pool::in_pool;
use ch07_simd_parallel::profile::OpTime;
use ch07_simd_parallel::stats::median;

use crate::engine::Engine;
use crate::step_parts::{self, StepParts};

// ANCHOR: e2e
/// pp512 and tg128 in llama-bench's terms (a 512-token prompt from an empty cache; 128
/// decode steps from an empty cache), medians of `runs`, after one unmeasured run.
pub fn end_to_end(engine: &Engine, threads: usize, runs: usize) -> Result<EndToEnd, String> {
    let prompt = bench_prompt(engine, 512);
    let err = |e: crate::Error| e.to_string();
    in_pool(threads, || -> Result<EndToEnd, String> {
        let (mut pp, mut tg) = (Vec::new(), Vec::new());
        for run in 0..=runs {
            let pp_s = timed_prefill(engine, &prompt)?;
            let mut cache = engine.new_cache(128).map_err(err)?;
            let tg_s = timed_decode(engine, &mut cache, prompt[0], 0)?;
            if run > 0 {
                pp.push(512.0 / pp_s);
                tg.push(128.0 / tg_s);
            }
        }
        Ok(EndToEnd {
            isa: engine.kernels.name(),
            threads,
            pp512_tok_s: median(&mut pp),
            tg128_tok_s: median(&mut tg),
        })
    })?
}
// ANCHOR_END: e2e

/// A prefill of `n` tokens from an empty cache, tokens per second: the median of `runs`
/// after one unmeasured run. A chat turn's prompt is tens to a few hundred tokens, and the
/// products choose how to split a prefill by its length ([`crate::matrix::FEW`]), so pp512
/// alone does not show what a short prompt meets.
pub fn prefill_rate(engine: &Engine, threads: usize, runs: usize, n: usize) -> Result<f64, String> {
    let prompt = bench_prompt(engine, n);
    in_pool(threads, || -> Result<f64, String> {
        let mut rates = Vec::new();
        for run in 0..=runs {
            let s = timed_prefill(engine, &prompt)?;
            if run > 0 {
                rates.push(n as f64 / s);
            }
        }
        Ok(median(&mut rates))
    })?
}

/// tg128 alone, one run: 128 decode steps from an empty cache, tokens per second. For a
/// measurement that alternates with another (chapter 9's `roofline`), where one median
/// over several runs would pair a slow run of one with a fast run of the other.
pub fn tg128(engine: &Engine, threads: usize) -> Result<f64, String> {
    let first = bench_prompt(engine, 1)[0];
    in_pool(threads, || -> Result<f64, String> {
        let mut cache = engine.new_cache(128).map_err(|e| e.to_string())?;
        Ok(128.0 / timed_decode(engine, &mut cache, first, 0)?)
    })?
}

/// The token ids a benchmark prompt of `n` tokens is made of: spread over the vocabulary,
/// the same on every run.
pub fn bench_prompt(engine: &Engine, n: usize) -> Vec<u32> {
    let vocab = engine.model.config.vocab_size as u64;
    (0..n as u64)
        .map(|i| ((i * 7919 + 13) % vocab) as u32)
        .collect()
}

/// Seconds for a prefill of `prompt` into an empty cache of its length.
fn timed_prefill(engine: &Engine, prompt: &[u32]) -> Result<f64, String> {
    let mut cache = engine.new_cache(prompt.len()).map_err(|e| e.to_string())?;
    let start = Instant::now();
    engine
        .forward(&mut cache, prompt, 0)
        .map_err(|e| e.to_string())?;
    Ok(start.elapsed().as_secs_f64())
}

/// Seconds for 128 greedy decode steps from `next` at position `pos0` on, into `cache`.
fn timed_decode(
    engine: &Engine,
    cache: &mut ch05_kv_cache::RingCache,
    mut next: u32,
    pos0: usize,
) -> Result<f64, String> {
    let start = Instant::now();
    for pos in pos0..pos0 + 128 {
        let logits = engine
            .forward(cache, &[next], pos)
            .map_err(|e| e.to_string())?;
        next = ch04_forward::model::argmax(&logits) as u32;
    }
    Ok(start.elapsed().as_secs_f64())
}

/// One matrix's decode-shaped product (one token) timed alone: (format, rows, cols, GB/s
/// of weights streamed), median of `runs`.
pub fn matrix_rates(
    engine: &Engine,
    threads: usize,
    runs: usize,
) -> Result<Vec<(String, usize, usize, f64)>, String> {
    let layer = engine
        .model
        .layers
        .first()
        .ok_or("the model has no layers")?;
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for m in [
        &layer.wq,
        &layer.wk,
        &layer.wv,
        &layer.wo,
        &layer.w_gate,
        &layer.w_up,
        &layer.w_down,
    ]
    .into_iter()
    .chain(std::iter::once(engine.model.lm_head()))
    .chain(engine.model.layers.iter().map(|l| &l.w_down))
    {
        let key = (m.format_name(), m.rows(), m.cols());
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        let x: Vec<f32> = (0..m.cols())
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
            .collect();
        let mut y = vec![0.0f32; m.rows()];
        let mut t: Vec<f64> = in_pool(threads, || {
            (0..=runs)
                .map(|_| {
                    let start = Instant::now();
                    m.matmul(engine.kernels, engine.kkernels, &mut y, &x, 1);
                    start.elapsed().as_secs_f64()
                })
                .skip(1)
                .collect()
        })?;
        let s = median(&mut t);
        out.push((
            m.format_name().to_string(),
            m.rows(),
            m.cols(),
            m.bytes() as f64 / s / 1e9,
        ));
    }
    Ok(out)
}

/// Milliseconds the final norm and LM head take for one token (median of `runs`): the
/// largest single read of a decode step.
pub fn lm_head_ms(engine: &Engine, threads: usize, runs: usize) -> Result<f64, String> {
    let x = vec![0.5f32; engine.model.config.hidden_size];
    in_pool(threads, || {
        let mut t: Vec<f64> = (0..=runs)
            .map(|_| {
                let start = Instant::now();
                std::hint::black_box(engine.head(&x));
                start.elapsed().as_secs_f64() * 1e3
            })
            .skip(1)
            .collect();
        median(&mut t)
    })
}

/// `rounds` rounds, llama-bench then ours on the same file, alternating; medians, ratios.
pub fn compare(
    engine: &Engine,
    gguf: &Path,
    threads: usize,
    rounds: usize,
) -> Result<Comparison, String> {
    let bin = llama_bench_path()?;
    end_to_end(engine, threads, 1)?; // warm up once
    let per_round = race_rounds(engine, gguf, &bin, threads, rounds)?;
    Ok(Comparison::of_rounds(
        threads,
        engine.kernels.name(),
        per_round,
    ))
}

/// `rounds` rounds, each llama-bench (`bin`) once on `gguf` and ours once: every round's
/// (ours pp512, ours tg128, llama.cpp pp512, llama.cpp tg128), tokens per second.
pub fn race_rounds(
    engine: &Engine,
    gguf: &Path,
    bin: &Path,
    threads: usize,
    rounds: usize,
) -> Result<Vec<[f64; 4]>, String> {
    ch07_simd_parallel::compare::race_rounds(bin, gguf, threads, rounds, &mut || {
        let r = end_to_end(engine, threads, 1)?;
        Ok((r.pp512_tok_s, r.tg128_tok_s))
    })
}

/// tg128 after `depth` tokens in the cache (llama-bench's `-d`): the prompt is prefilled
/// untimed, then 128 greedy decode steps are timed. Tokens per second.
pub fn decode_at_depth(engine: &Engine, threads: usize, depth: usize) -> Result<f64, String> {
    let limit = engine.model.max_positions();
    if depth.saturating_add(128) > limit {
        return Err(format!(
            "a depth of {depth} and 128 tokens need {} positions; this model has {limit}",
            depth.saturating_add(128)
        ));
    }
    let prompt = bench_prompt(engine, depth);
    let err = |e: crate::Error| e.to_string();
    in_pool(threads, || -> Result<f64, String> {
        let mut cache = engine.new_cache(depth + 128).map_err(err)?;
        let mut next = 1;
        if depth > 0 {
            let logits = engine.forward(&mut cache, &prompt, 0).map_err(err)?;
            next = ch04_forward::model::argmax(&logits) as u32;
        }
        Ok(128.0 / timed_decode(engine, &mut cache, next, depth)?)
    })?
}

/// tg128 at a depth, ours and llama-bench's, alternating `rounds` times: the medians
/// (ours, llama.cpp) and every round's pair.
pub fn compare_depth(
    engine: &Engine,
    gguf: &Path,
    threads: usize,
    depth: usize,
    rounds: usize,
) -> Result<(f64, f64, Vec<[f64; 2]>), String> {
    let bin = llama_bench_path()?;
    let mut per_round = Vec::new();
    for round in 0..rounds {
        let theirs = llama_bench_depth(&bin, gguf, threads, depth)?;
        let ours = decode_at_depth(engine, threads, depth)?;
        eprintln!(
            "round {}/{rounds}: tg128 at depth {depth}: ours {ours:.1}, llama.cpp {theirs:.1} tok/s",
            round + 1
        );
        per_round.push([ours, theirs]);
    }
    let med = |i: usize| median(&mut per_round.iter().map(|r| r[i]).collect::<Vec<_>>());
    Ok((med(0), med(1), per_round))
}

// ANCHOR: profile
/// Where a step of `tokens` new tokens after `context` cached ones spends its time, timed
/// inside real steps ([`crate::step_parts`]): each kind of matrix product over all layers
/// (gate and up with the activation their tasks apply), the attention, the LM head, and
/// "everything else" (norms, RoPE, the residual adds, the embedding row, the hand-overs
/// between parts): the step less its parts. A part timed alone, in a loop, would find some
/// of its weights still in the caches from its last run, as it never does inside a step.
/// Each row is the median of `runs` steps (decode steps one after another, or prefills
/// each into a cache holding the context); the step's time is the median step.
pub fn profile(
    engine: &Engine,
    threads: usize,
    tokens: usize,
    context: usize,
    runs: usize,
) -> Result<(Vec<OpTime>, f64), String> {
    let ids = bench_prompt(engine, context + tokens);
    let (context, prompt) = ids.split_at(context);
    let runs = runs.max(1);
    let steps = in_pool(threads, || match tokens {
        1 => step_parts::record_decode(engine, context, runs),
        _ => step_parts::record_prefill(engine, context, prompt, runs),
    })?
    .map_err(|e| e.to_string())?;
    let ms = |f: &dyn Fn(&StepParts) -> f64| {
        step_parts::median(steps.iter().map(|s| f(s) * 1e3).collect())
    };
    let m = engine.model;
    let sum = |f: &dyn Fn(&crate::engine::Layer) -> usize| m.layers.iter().map(f).sum::<usize>();
    let rows: [(&str, &str, usize); 6] = [
        (
            "Q, K, V",
            "q/k/v",
            sum(&|l| l.wq.bytes() + l.wk.bytes() + l.wv.bytes()),
        ),
        ("attention", "attention", 0),
        ("attention output", "o", sum(&|l| l.wo.bytes())),
        (
            "gate, up, activation",
            "gate/up",
            sum(&|l| l.w_gate.bytes() + l.w_up.bytes()),
        ),
        ("down", "down", sum(&|l| l.w_down.bytes())),
        ("LM head", "LM head", m.lm_head().bytes()),
    ];
    let mut ops: Vec<OpTime> = rows
        .iter()
        .map(|&(op, kind, weight_bytes)| OpTime {
            op,
            ms: ms(&|s| s.seconds_of(kind)),
            weight_bytes,
        })
        .collect();
    ops.push(OpTime {
        op: "everything else",
        ms: ms(&|s| s.seconds - s.parts_seconds()),
        weight_bytes: 0,
    });
    Ok((ops, ms(&|s| s.seconds)))
}
// ANCHOR_END: profile
