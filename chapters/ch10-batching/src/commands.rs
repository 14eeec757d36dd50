//! The binary's subcommands: `run`, `bench`, `trace`.

use std::time::Instant;

use ch01_tensors::models;
use ch07_simd_parallel::stats::percentile;
use ch09_generate::SamplerConfig;
use ch10_batching::bench::{closed_loop, closed_loop_config, llama_batched_bench};
use ch10_batching::trace;
use ch10_batching::{BatchEngine, Config, Event, Request};
use serde_json::{Value, json};

use crate::{Args, model_path};

/// The most requests one `run` takes.
const MAX_REQUESTS: usize = 4096;
/// The largest requests file `run` reads.
const MAX_REQUESTS_FILE: u64 = 16 << 20;

/// One line of a requests file → (prompt text, request without its tokens).
fn parse_request(line: &str) -> Result<(String, Request), String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let prompt = v["prompt"]
        .as_str()
        .ok_or("\"prompt\" (a string) is missing")?
        .to_string();
    let num = |k: &str, default: f64| -> Result<f64, String> {
        match &v[k] {
            Value::Null => Ok(default),
            x => x.as_f64().ok_or(format!("\"{k}\" is not a number")),
        }
    };
    let int = |k: &str, default: f64, max: f64| -> Result<usize, String> {
        let x = num(k, default)?;
        if x.fract() != 0.0 || !(0.0..=max).contains(&x) {
            return Err(format!(
                "\"{k}\" must be a whole number from 0 to {max}, not {x}"
            ));
        }
        Ok(x as usize)
    };
    let d = SamplerConfig::default();
    let s = SamplerConfig {
        temperature: num("temperature", d.temperature as f64)? as f32,
        top_k: int("top_k", d.top_k as f64, (1 << 20) as f64)?,
        top_p: num("top_p", d.top_p as f64)? as f32,
        min_p: num("min_p", d.min_p as f64)? as f32,
        repeat_penalty: num("repeat_penalty", d.repeat_penalty as f64)? as f32,
        frequency_penalty: num("frequency_penalty", 0.0)? as f32,
        presence_penalty: num("presence_penalty", 0.0)? as f32,
        repeat_last_n: int("repeat_last_n", d.repeat_last_n as f64, 65536.0)?,
        seed: int("seed", 0.0, 2f64.powi(53))? as u64,
    };
    let in_range = (0.0..=100.0).contains(&s.temperature)
        && s.top_p > 0.0
        && s.top_p <= 1.0
        && (0.0..=1.0).contains(&s.min_p);
    if !in_range {
        return Err("temperature must be 0 to 100, top_p in (0, 1], min_p in [0, 1]".into());
    }
    if !(s.repeat_penalty.is_finite()
        && s.repeat_penalty > 0.0
        && s.frequency_penalty.is_finite()
        && s.presence_penalty.is_finite())
    {
        return Err("the penalties must be finite, repeat_penalty positive".into());
    }
    let stops = match &v["stop"] {
        Value::Null => Vec::new(),
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a
            .iter()
            .map(|s| s.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or("\"stop\" must be strings")?,
        _ => return Err("\"stop\" must be a string or a list of strings".into()),
    };
    if stops.len() > 16 || stops.iter().any(|s| s.is_empty() || s.len() > 256) {
        return Err("at most 16 stop strings of 1 to 256 bytes".into());
    }
    let max_tokens = int("max_tokens", 128.0, 65536.0)?;
    let req = Request {
        prompt: Vec::new(),
        max_tokens,
        sampling: s,
        stops,
        ignore_eos: false,
        keep_logits: false,
    };
    Ok((prompt, req))
}

/// What `run` collects for one request.
#[derive(Default)]
struct Outcome {
    ids: Vec<u32>,
    text: String,
    finish: String,
    ttft_ms: f64,
    cached: usize,
    preemptions: usize,
}

/// `run`: every request of the file at once through the engine.
pub fn run(a: &Args) -> Result<(), String> {
    let path = a.requests.as_deref().expect("checked in parse_args");
    let text = ch01_tensors::files::read_to_string(path, MAX_REQUESTS_FILE)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut parsed = Vec::new();
    for (n, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        if parsed.len() == MAX_REQUESTS {
            return Err(format!(
                "{}: more than {MAX_REQUESTS} requests",
                path.display()
            ));
        }
        parsed.push(
            parse_request(line).map_err(|e| format!("{} line {}: {e}", path.display(), n + 1))?,
        );
    }
    let m = ch08_gguf::load(&model_path(a)?).map_err(|e| e.to_string())?;
    let engine = m.engine()?;
    let mut cfg = Config::with_kv(&engine, a.kv_mb, a.kv, a.max_batch_tokens.unwrap_or(512))
        .map_err(|e| e.to_string())?;
    cfg.prefix_sharing = a.prefix_sharing;
    let mut be =
        BatchEngine::new(engine, &m.tokenizer.tokenizer, cfg).map_err(|e| e.to_string())?;
    let start = Instant::now();
    let mut rxs = Vec::new();
    for (i, (prompt, mut req)) in parsed.iter().cloned().enumerate() {
        req.prompt = m.tokenizer.encode_prompt(&prompt, true);
        rxs.push(
            be.submit(req)
                .map_err(|e| format!("request {} refused: {e}", i + 1))?
                .1,
        );
    }
    let mut out: Vec<Outcome> = parsed.iter().map(|_| Outcome::default()).collect();
    let mut steps = 0;
    let (out, steps) =
        ch07_simd_parallel::pool::in_pool(a.threads, move || -> Result<_, String> {
            while be.pending() > 0 {
                be.step().map_err(|e| e.to_string())?;
                steps += 1;
                let ms = start.elapsed().as_secs_f64() * 1e3;
                for (rx, o) in rxs.iter().zip(&mut out) {
                    for ev in rx.try_iter() {
                        match ev {
                            Event::Token { id, text, .. } => {
                                if o.ids.is_empty() {
                                    o.ttft_ms = ms;
                                }
                                o.ids.push(id);
                                o.text += &text;
                            }
                            Event::Done(f) => {
                                o.text += &f.text;
                                (o.finish, o.cached, o.preemptions) =
                                    (f.reason.name().into(), f.cached_tokens, f.preemptions);
                            }
                        }
                    }
                }
            }
            Ok((out, steps))
        })??;
    let seconds = start.elapsed().as_secs_f64();
    for ((prompt, _), o) in parsed.iter().zip(&out) {
        if a.json {
            println!(
                "{}",
                json!({"generated_ids": o.ids, "text": o.text, "finish_reason": o.finish, "ttft_ms": o.ttft_ms,
                "cached_tokens": o.cached, "preemptions": o.preemptions})
            );
        } else {
            println!(
                "{prompt}{}\n    [{} tokens, {}; {} prompt tokens from the prefix cache]",
                o.text,
                o.ids.len(),
                o.finish,
                o.cached
            );
        }
    }
    let generated: usize = out.iter().map(|o| o.ids.len()).sum();
    eprintln!(
        "{} requests, {generated} tokens generated in {steps} steps, {:.1} ms ({:.1} tok/s); {} preemptions",
        out.len(),
        seconds * 1e3,
        generated as f64 / seconds,
        out.iter().map(|o| o.preemptions).sum::<usize>()
    );
    Ok(())
}

/// `bench`: the closed loop, and with `--compare` llama-batched-bench beside it.
pub fn bench(a: &Args) -> Result<(), String> {
    let path = model_path(a)?;
    let m = ch08_gguf::load(&path).map_err(|e| e.to_string())?;
    let engine = m.engine()?;
    let (n, p, r) = (a.sequences, a.prompt, a.reply);
    if p.saturating_add(r) > m.model.max_positions() {
        return Err(format!(
            "--prompt {p} plus --reply {r} is more than the model's {} positions",
            m.model.max_positions()
        ));
    }
    let kv_mb = a.kv_mb_given.then_some(a.kv_mb);
    let cfg = closed_loop_config(&engine, n, p, r, a.max_batch_tokens, kv_mb, a.kv)?;
    let res = ch07_simd_parallel::pool::in_pool(a.threads, || {
        closed_loop(engine, &m.tokenizer.tokenizer, cfg, n, p, r)
    })??;
    let theirs = if a.compare {
        Some(llama_batched_bench(&path, a.threads, p, r, &[n])?)
    } else {
        None
    };
    let theirs = theirs.as_ref().and_then(|t| t.first().copied());
    if a.json {
        let mut j = res.json();
        j["model"] = json!(models::shown(&path));
        j["threads"] = json!(a.threads);
        if let Some((_, pp, tg)) = theirs {
            j["llamacpp"] = json!({"s_pp_tok_s": pp, "s_tg_tok_s": tg,
                "s_pp_ratio": res.s_pp_tok_s / pp, "s_tg_ratio": res.s_tg_tok_s / tg});
        }
        println!("{j:#}");
        return Ok(());
    }
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    println!("{name}: {n} sequences, {p}-token prompts, {r}-token replies");
    println!(
        "  prefill {:.1} tok/s   decode {:.1} tok/s   ({} steps)",
        res.s_pp_tok_s, res.s_tg_tok_s, res.steps
    );
    println!(
        "  time to first token p50 {:.1} ms, p99 {:.1} ms; between tokens p50 {:.1} ms, p99 {:.1} ms",
        percentile(&res.ttft_ms, 0.5),
        percentile(&res.ttft_ms, 0.99),
        percentile(&res.itl_ms, 0.5),
        percentile(&res.itl_ms, 0.99)
    );
    if let Some((_, pp, tg)) = theirs {
        println!(
            "  llama-batched-bench: S_PP {pp:.1} tok/s ({:.2}x ours/theirs)   S_TG {tg:.1} tok/s ({:.2}x)",
            res.s_pp_tok_s / pp,
            res.s_tg_tok_s / tg
        );
    }
    Ok(())
}

/// `trace`: the scheduler on the book's workload, as a table and with `--svg` a figure.
pub fn trace(a: &Args) -> Result<(), String> {
    let (arrivals, limits, n_blocks) = trace::book_workload();
    let t = trace::simulate(&arrivals, limits, n_blocks, 500);
    let prompts: Vec<usize> = arrivals.iter().map(|a| a.prompt).collect();
    println!(
        "{} requests (step arrived: prompt + reply tokens): {}",
        arrivals.len(),
        arrivals
            .iter()
            .enumerate()
            .map(|(i, a)| format!("{i} (step {}: {} + {})", a.step, a.prompt, a.reply))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "budget {} rows a step, pool of {n_blocks} blocks of {} positions\n",
        limits.max_batch_tokens, limits.block_size
    );
    print!("{}", trace::table(&t, &prompts));
    if let Some(out) = &a.svg {
        std::fs::write(out, trace::svg(&t, limits, &prompts))
            .map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    }
    Ok(())
}
