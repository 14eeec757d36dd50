//! The closed-loop benchmark: `C` sequences of `P`-token prompts, each generating `R`
//! tokens, all submitted at once — llama.cpp's `llama-batched-bench -npp P -ntg R -npl C`
//! measured the same way: prefill speed over the steps that run prompt rows, decode speed
//! over the steps that run only decode rows, and per-request latencies.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use ch08_gguf::engine::Engine;
use ch09_generate::rng::Rng;
use serde_json::{Value, json};

use ch07_simd_parallel::stats::percentile;

use crate::config::{Config, MAX_BATCH_TOKENS};
use crate::engine::BatchEngine;
use crate::request::{Event, Request};
use crate::seq::KvPrecision;

/// One closed-loop run.
#[derive(Clone, Debug)]
pub struct BenchResult {
    pub sequences: usize,
    pub prompt: usize,
    pub reply: usize,
    /// Prompt tokens per second over the steps with prompt rows.
    pub s_pp_tok_s: f64,
    /// Generated tokens per second over the steps with decode rows only.
    pub s_tg_tok_s: f64,
    pub ttft_ms: Vec<f64>,
    pub itl_ms: Vec<f64>,
    pub steps: usize,
}

impl BenchResult {
    pub fn json(&self) -> Value {
        json!({
            "sequences": self.sequences, "prompt": self.prompt, "reply": self.reply,
            "s_pp_tok_s": self.s_pp_tok_s, "s_tg_tok_s": self.s_tg_tok_s,
            "ttft_ms_p50": percentile(&self.ttft_ms, 0.5), "ttft_ms_p99": percentile(&self.ttft_ms, 0.99),
            "itl_ms_p50": percentile(&self.itl_ms, 0.5), "itl_ms_p99": percentile(&self.itl_ms, 0.99),
            "steps": self.steps,
        })
    }
}

/// The engine settings of a closed loop: every prompt in one step (up to the engine's
/// limit) unless `budget` says otherwise, a pool that holds every sequence whole unless
/// `kv_mb` says otherwise, no prefix sharing (random prompts share nothing, and neither
/// does llama-batched-bench's).
pub fn closed_loop_config(
    engine: &Engine,
    sequences: usize,
    prompt: usize,
    reply: usize,
    budget: Option<usize>,
    kv_mb: Option<usize>,
    precision: KvPrecision,
) -> Result<Config, String> {
    let budget = budget.unwrap_or((sequences * (prompt + 1)).min(MAX_BATCH_TOKENS));
    let need =
        sequences * (prompt + reply + 16) * engine.layout().floats_per_token() * precision.bytes();
    let kv_mb = kv_mb.unwrap_or(need.div_ceil(1_000_000));
    let mut cfg = Config::with_kv(engine, kv_mb, precision, budget).map_err(|e| e.to_string())?;
    cfg.prefix_sharing = false;
    cfg.max_seqs = cfg.max_seqs.max(sequences.min(budget));
    Ok(cfg)
}

/// `sequences` random prompts of `prompt` tokens (fixed seed, no two alike), `reply`
/// tokens each; one step may hold every prompt, as llama-batched-bench's one batch does.
/// Run inside the caller's thread pool.
pub fn closed_loop(
    engine: Engine,
    tokenizer: &ch02_tokenizer::Tokenizer,
    cfg: Config,
    sequences: usize,
    prompt: usize,
    reply: usize,
) -> Result<BenchResult, String> {
    let vocab = engine.model.config.vocab_size as u64;
    let mut rng = Rng::new(42);
    let mut be = BatchEngine::new(engine, tokenizer, cfg).map_err(|e| e.to_string())?;
    let start = Instant::now();
    let mut rxs = Vec::new();
    for _ in 0..sequences {
        let ids = (0..prompt)
            .map(|_| (rng.next_u64() % vocab) as u32)
            .collect();
        let mut r = Request::greedy(ids, reply);
        r.ignore_eos = true;
        rxs.push(be.submit(r).map_err(|e| e.to_string())?.1);
    }
    let mut last: Vec<Option<Instant>> = vec![None; sequences];
    let (mut ttft, mut itl) = (Vec::new(), Vec::new());
    let (mut pp_tokens, mut pp_s, mut tg_tokens, mut tg_s, mut steps) = (0, 0.0, 0, 0.0, 0);
    while be.pending() > 0 {
        let t = Instant::now();
        let plan = be.step().map_err(|e| e.to_string())?;
        let seconds = t.elapsed().as_secs_f64();
        steps += 1;
        let now = Instant::now();
        let prefill: usize = plan
            .rows
            .iter()
            .filter(|c| c.start < prompt)
            .map(|c| c.len)
            .sum();
        if prefill > 0 {
            (pp_tokens, pp_s) = (pp_tokens + prefill, pp_s + seconds);
        } else {
            (tg_tokens, tg_s) = (tg_tokens + plan.tokens(), tg_s + seconds);
        }
        for (rx, last) in rxs.iter().zip(&mut last) {
            for ev in rx.try_iter() {
                if let Event::Token { .. } = ev {
                    match last {
                        None => ttft.push((now - start).as_secs_f64() * 1e3),
                        Some(l) => itl.push((now - *l).as_secs_f64() * 1e3),
                    }
                    *last = Some(now);
                }
            }
        }
    }
    Ok(BenchResult {
        sequences,
        prompt,
        reply,
        s_pp_tok_s: pp_tokens as f64 / pp_s.max(1e-9),
        s_tg_tok_s: tg_tokens as f64 / tg_s.max(1e-9),
        ttft_ms: ttft,
        itl_ms: itl,
        steps,
    })
}

// ANCHOR: prefix_ttft
/// Time to first token of a request whose `prefix`-token start another request has just
/// computed, against one whose start nobody has: `(uncached ms, cached ms)`. Each request
/// is the prefix and 8 tokens of its own; the first request runs alone to the end first.
pub fn prefix_ttft(
    engine: Engine,
    tokenizer: &ch02_tokenizer::Tokenizer,
    prefix: usize,
) -> Result<(f64, f64), String> {
    let vocab = engine.model.config.vocab_size as u64;
    let mut rng = Rng::new(7);
    let mut tokens =
        |n: usize| -> Vec<u32> { (0..n).map(|_| (rng.next_u64() % vocab) as u32).collect() };
    let (shared, other) = (tokens(prefix), tokens(prefix));
    let with_tail = |start: &[u32], tail: Vec<u32>| [start, &tail[..]].concat();
    let requests = [
        with_tail(&shared, tokens(8)),
        with_tail(&other, tokens(8)),
        with_tail(&shared, tokens(8)),
    ];
    let cfg = Config::with_kv(
        &engine,
        (4 * (prefix + 32) * engine.layout().bytes_per_token()).div_ceil(1_000_000),
        KvPrecision::F32,
        512,
    )
    .map_err(|e| e.to_string())?;
    let mut be = BatchEngine::new(engine, tokenizer, cfg).map_err(|e| e.to_string())?;
    let mut ttft = Vec::new();
    for prompt in requests {
        let start = Instant::now();
        let (_, rx) = be
            .submit(Request::greedy(prompt, 1))
            .map_err(|e| e.to_string())?;
        while be.pending() > 0 {
            be.step().map_err(|e| e.to_string())?;
        }
        ttft.push(start.elapsed().as_secs_f64() * 1e3);
        drop(rx);
    }
    // request 0 warms up; request 1 computes its whole prompt; request 2 finds request 0's
    Ok((ttft[1], ttft[2]))
}
// ANCHOR_END: prefix_ttft

// ANCHOR: compare
/// llama.cpp's `llama-batched-bench` on `gguf` with the same prompt, reply and sequence
/// counts: `(sequences, S_PP, S_TG)` for each count.
pub fn llama_batched_bench(
    gguf: &Path,
    threads: usize,
    prompt: usize,
    reply: usize,
    sequences: &[usize],
) -> Result<Vec<(usize, f64, f64)>, String> {
    let bench = ch07_simd_parallel::compare::llama_bench_path()?;
    let bin = bench.with_file_name("llama-batched-bench");
    let max = sequences.iter().copied().max().unwrap_or(1);
    let npl: Vec<String> = sequences.iter().map(|n| n.to_string()).collect();
    let out = Command::new(&bin)
        .arg("-m")
        .arg(gguf)
        .args([
            "-c",
            &(max * (prompt + reply)).to_string(),
            "-b",
            "2048",
            "-ub",
            "512",
        ])
        .args([
            "-npp",
            &prompt.to_string(),
            "-ntg",
            &reply.to_string(),
            "-npl",
            &npl.join(","),
        ])
        .args(["-t", &threads.to_string()])
        .output()
        .map_err(|e| format!("running {}: {e}", bin.display()))?;
    if !out.status.success() {
        return Err(ch07_simd_parallel::compare::llama_tool_failed(
            &bin,
            out.status,
            &out.stderr,
        ));
    }
    // the table goes to standard output or to the log, depending on the version
    let text = [&out.stdout[..], b"\n", &out.stderr[..]].concat();
    parse_batched_bench(&String::from_utf8_lossy(&text))
}
// ANCHOR_END: compare

/// The rows of llama-batched-bench's table: `|  PP |  TG |  B | N_KV | T_PP s | S_PP t/s | …`.
pub fn parse_batched_bench(table: &str) -> Result<Vec<(usize, f64, f64)>, String> {
    let cells = |l: &str| {
        l.split('|')
            .map(|c| c.trim().to_string())
            .collect::<Vec<_>>()
    };
    let header = table
        .lines()
        .map(cells)
        .find(|c| c.iter().any(|c| c == "S_TG t/s"))
        .ok_or("llama-batched-bench printed no table")?;
    let col = |name: &str| {
        header
            .iter()
            .position(|c| c == name)
            .ok_or(format!("no column {name}"))
    };
    let (b, pp, tg) = (col("B")?, col("S_PP t/s")?, col("S_TG t/s")?);
    let mut rows = Vec::new();
    for c in table.lines().map(cells) {
        if c.len() == header.len()
            && let (Ok(b), Ok(pp), Ok(tg)) = (c[b].parse(), c[pp].parse(), c[tg].parse())
        {
            rows.push((b, pp, tg));
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_batched_bench_table_is_read_by_its_column_names() {
        let t = "\n|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |\n|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|\n|   128 |    128 |    1 |    256 |    0.600 |   213.33 |    1.500 |    85.33 |    2.100 |   121.90 |\n|   128 |    128 |    2 |    512 |    1.000 |   256.00 |    2.700 |    94.81 |    3.700 |   138.38 |\n";
        assert_eq!(
            parse_batched_bench(t).unwrap(),
            vec![(1, 213.33, 85.33), (2, 256.0, 94.81)]
        );
        assert_eq!(percentile(&[3.0, 1.0, 2.0, 4.0], 0.5), 2.0);
        assert_eq!(percentile(&[3.0, 1.0, 2.0, 4.0], 0.99), 4.0);
    }
}
