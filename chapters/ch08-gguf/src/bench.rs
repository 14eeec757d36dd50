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
/// Where a step of `tokens` new tokens after `context` cached ones spends its time: each
/// kind of matrix product over all layers, run as the forward pass runs it (same groups,
/// same shapes, the model's own weights; gate and up with the activation their tasks apply),
/// the LM head, and "everything else" (norms, RoPE, attention, the cache), which is the real
/// `forward` minus the products.
/// Best of `runs` for each (noise only adds time).
pub fn profile(
    engine: &Engine,
    threads: usize,
    tokens: usize,
    context: usize,
    runs: usize,
) -> Result<(Vec<OpTime>, f64), String> {
    let m = engine.model;
    let cfg = &m.config;
    let (dim, q_dim, kv_dim, ffn) = (
        cfg.hidden_size,
        cfg.q_dim(),
        cfg.kv_dim(),
        cfg.intermediate_size,
    );
    let input = |cols: usize| -> Vec<f32> {
        (0..tokens * cols)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
            .collect()
    };
    let (x, h, g) = (input(dim), input(q_dim), input(ffn));
    let (k, kk) = (engine.kernels, engine.kkernels);
    let best = |f: &mut dyn FnMut()| -> f64 {
        (0..=runs)
            .map(|_| {
                let start = Instant::now();
                f();
                start.elapsed().as_secs_f64() * 1e3
            })
            .skip(1)
            .fold(f64::INFINITY, f64::min)
    };
    let vocab = cfg.vocab_size as u64;
    let ids: Vec<u32> = (0..(context + tokens) as u64)
        .map(|i| ((i * 7919 + 13) % vocab) as u32)
        .collect();
    let err = |e: crate::Error| e.to_string();
    in_pool(threads, || -> Result<(Vec<OpTime>, f64), String> {
        let (mut q, mut kv, mut v) = (
            vec![0.0; tokens * q_dim],
            vec![0.0; tokens * kv_dim],
            vec![0.0; tokens * kv_dim],
        );
        let (mut o, mut gate, mut up) = (
            vec![0.0; tokens * dim],
            vec![0.0; tokens * ffn],
            vec![0.0; tokens * ffn],
        );
        let mut ops = Vec::new();
        let sum =
            |f: &dyn Fn(&crate::engine::Layer) -> usize| m.layers.iter().map(f).sum::<usize>();
        let ms = best(&mut || {
            for l in &m.layers {
                crate::matrix::matmul_group(
                    k,
                    kk,
                    &[&l.wq, &l.wk, &l.wv],
                    &mut [&mut q, &mut kv, &mut v],
                    &x,
                    tokens,
                );
            }
        });
        ops.push(OpTime {
            op: "Q, K, V",
            ms,
            weight_bytes: sum(&|l| l.wq.bytes() + l.wk.bytes() + l.wv.bytes()),
        });
        let ms = best(&mut || {
            for l in &m.layers {
                l.wo.matmul(k, kk, &mut o, &h, tokens);
            }
        });
        ops.push(OpTime {
            op: "attention output",
            ms,
            weight_bytes: sum(&|l| l.wo.bytes()),
        });
        let gated = |g: &mut [f32], u: &[f32]| engine.gated(g, u);
        let ms = best(&mut || {
            for l in &m.layers {
                crate::matrix::matmul_pair_then(
                    k,
                    kk,
                    [&l.w_gate, &l.w_up],
                    [&mut gate, &mut up],
                    &x,
                    tokens,
                    &gated,
                );
            }
        });
        ops.push(OpTime {
            op: "gate, up, activation",
            ms,
            weight_bytes: sum(&|l| l.w_gate.bytes() + l.w_up.bytes()),
        });
        let ms = best(&mut || {
            for l in &m.layers {
                l.w_down.matmul(k, kk, &mut o[..tokens * dim], &g, tokens);
            }
        });
        ops.push(OpTime {
            op: "down",
            ms,
            weight_bytes: sum(&|l| l.w_down.bytes()),
        });
        let ms = best(&mut || {
            std::hint::black_box(engine.head(&x[..dim])); // the last position's logits
        });
        ops.push(OpTime {
            op: "final norm + LM head",
            ms,
            weight_bytes: m.lm_head().bytes(),
        });
        let mut forward = Vec::new();
        for _ in 0..=runs {
            let mut cache = engine.new_cache(context + tokens).map_err(err)?;
            if context > 0 {
                engine
                    .forward(&mut cache, &ids[..context], 0)
                    .map_err(err)?;
            }
            let start = Instant::now();
            engine
                .forward(&mut cache, &ids[context..], context)
                .map_err(err)?;
            forward.push(start.elapsed().as_secs_f64() * 1e3);
        }
        let forward_ms = forward[1..].iter().copied().fold(f64::INFINITY, f64::min);
        let products: f64 = ops.iter().map(|o| o.ms).sum();
        ops.push(OpTime {
            op: "everything else",
            ms: (forward_ms - products).max(0.0),
            weight_bytes: 0,
        });
        Ok((ops, forward_ms))
    })?
}
// ANCHOR_END: profile
