//! The binary's measuring subcommands: `curve`, `kv-cost`, `prefix`.

use ch09_generate::SamplerConfig;
use ch10_batching::bench::{closed_loop, closed_loop_config, llama_batched_bench};
use ch10_batching::seq::KvPrecision;
use serde_json::{Value, json};

use crate::{Args, model_path};

// ANCHOR: curve
/// `curve`: decode tok/s at 1, 2, 4, 8 and 16 sequences, beside the memory and arithmetic
/// ceilings (and llama-batched-bench with `--compare`); chapter 9's generator alone first,
/// for the cost of going through the batched engine with one sequence.
pub fn curve(a: &Args) -> Result<(), String> {
    let path = model_path(a)?;
    let m = ch08_gguf::load(&path).map_err(|e| e.to_string())?;
    let engine = m.engine()?;
    let (p, r, sizes) = (a.prompt, a.reply, [1, 2, 4, 8, 16]);
    let bandwidth = ch07_simd_parallel::bench::read_bandwidth(a.threads, 3)?;
    let e2e = ch08_gguf::bench::end_to_end(&engine, a.threads, 1)?;
    let per_token = m.model.bytes_read_per_token();
    let decode = |n: usize| -> Result<f64, String> {
        let cfg = closed_loop_config(&engine, n, p, r, None, None, a.kv)?;
        let res = ch07_simd_parallel::pool::in_pool(a.threads, || {
            closed_loop(m.engine()?, &m.tokenizer.tokenizer, cfg, n, p, r)
        })??;
        eprintln!("curve: {n} sequences, decode {:.1} tok/s", res.s_tg_tok_s);
        Ok(res.s_tg_tok_s)
    };
    // one sequence: chapter 9's generator and the batched engine in turn, three times each,
    // medians (the difference between them is small, the machine's noise is not)
    let (mut alone, mut one) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        alone.push(ch07_simd_parallel::pool::in_pool(a.threads, || {
            alone_decode_tok_s(&m, p, r)
        })??);
        one.push(decode(1)?);
    }
    let median = ch07_simd_parallel::stats::median;
    let (alone, one) = (median(&mut alone), median(&mut one));
    let mut points = vec![ch10_batching::curve::Point {
        sequences: 1,
        ours_tok_s: one,
        llamacpp_tok_s: None,
    }];
    for n in sizes.into_iter().skip(1) {
        points.push(ch10_batching::curve::Point {
            sequences: n,
            ours_tok_s: decode(n)?,
            llamacpp_tok_s: None,
        });
    }
    if a.compare {
        for (n, _, tg) in llama_batched_bench(&path, a.threads, p, r, &sizes)? {
            if let Some(pt) = points.iter_mut().find(|pt| pt.sequences == n) {
                pt.llamacpp_tok_s = Some(tg);
            }
        }
    }
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    if let Some(out) = &a.svg {
        let title = format!(
            "{name}: decode tok/s against sequences, {} threads",
            a.threads
        );
        let svg = ch10_batching::curve::svg(&title, &points, bandwidth, per_token, e2e.pp512_tok_s);
        std::fs::write(out, svg).map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    }
    let rows: Vec<Value> = points
        .iter()
        .map(|pt| {
            json!({"sequences": pt.sequences, "ours_s_tg_tok_s": pt.ours_tok_s, "llamacpp_s_tg_tok_s": pt.llamacpp_tok_s,
                   "ratio": pt.llamacpp_tok_s.map(|t| pt.ours_tok_s / t),
                   "memory_ceiling_tok_s": ch10_batching::curve::memory_ceiling(pt.sequences, bandwidth, per_token)})
        })
        .collect();
    let j = json!({"model": name, "threads": a.threads, "prompt": p, "reply": r, "read_bandwidth_gb_s": bandwidth,
        "mb_per_token": per_token as f64 / 1e6, "pp512_tok_s": e2e.pp512_tok_s, "tg128_tok_s": e2e.tg128_tok_s,
        "chapter9_alone_tok_s": alone, "points": rows});
    if a.json {
        println!("{j:#}");
        return Ok(());
    }
    println!(
        "{name}, {} threads: read bandwidth {bandwidth:.1} GB/s, pp512 {:.1} tok/s, tg128 {:.1} tok/s",
        a.threads, e2e.pp512_tok_s, e2e.tg128_tok_s
    );
    println!(
        "one sequence, {p}-token prompt (medians of 3): chapter 9's generator {alone:.1} tok/s, the batched engine {one:.1} tok/s ({:.2}x)",
        one / alone
    );
    for pt in &points {
        let theirs = pt.llamacpp_tok_s.map_or(String::new(), |t| {
            format!("   llama.cpp {t:.1} tok/s ({:.2}x)", pt.ours_tok_s / t)
        });
        println!(
            "{:>2} sequences: decode {:.1} tok/s ({:.2}x pp512){theirs}",
            pt.sequences,
            pt.ours_tok_s,
            pt.ours_tok_s / e2e.pp512_tok_s
        );
    }
    Ok(())
}
// ANCHOR_END: curve

/// Chapter 9's generator, greedy, on one random `prompt`-token prompt: decode tok/s.
fn alone_decode_tok_s(m: &ch08_gguf::Loaded, prompt: usize, reply: usize) -> Result<f64, String> {
    let vocab = m.model.config.vocab_size as u64;
    let mut rng = ch09_generate::rng::Rng::new(42);
    let ids: Vec<u32> = (0..prompt)
        .map(|_| (rng.next_u64() % vocab) as u32)
        .collect();
    let mut s = ch09_generate::Sampler::new(SamplerConfig {
        temperature: 0.0,
        ..SamplerConfig::default()
    });
    let g = ch09_generate::generate(
        &m.engine()?,
        &m.tokenizer.tokenizer,
        &[],
        &ids,
        reply,
        &mut s,
        &[],
        &mut |_| {},
    )?;
    Ok(g.decode_tok_s())
}

/// `kv-cost`: the memory and the perplexity of f32 and of f16 keys and values.
pub fn kv_cost(a: &Args) -> Result<(), String> {
    let path = model_path(a)?;
    let m = ch08_gguf::load(&path).map_err(|e| e.to_string())?;
    let engine = m.engine()?;
    let file = a.text.as_deref().expect("checked in parse_args");
    let text = ch01_tensors::files::read_to_string(file, ch01_tensors::files::MAX_TEXT_FILE)
        .map_err(|e| format!("{}: {e}", file.display()))?;
    let ids = m.tokenizer.tokenizer.encode(&text, false);
    let bos = m.tokenizer.bos.filter(|_| m.tokenizer.add_bos);
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let mut rows = Vec::new();
    for precision in [KvPrecision::F32, KvPrecision::F16] {
        let (ppl, scored) = ch07_simd_parallel::pool::in_pool(a.threads, || {
            ch10_batching::perplexity::perplexity(&engine, &ids, bos, precision)
        })??;
        let per_token = engine.layout().floats_per_token() * precision.bytes();
        rows.push(json!({"kv": precision.name(), "bytes_per_token": per_token, "perplexity": ppl, "scored_tokens": scored}));
        if !a.json {
            println!(
                "{name}, {} keys and values: {per_token} bytes a token ({:.1} MB for 4096 positions), perplexity {ppl:.4} over {scored} tokens",
                precision.name(),
                per_token as f64 * 4096.0 / 1e6
            );
        }
    }
    if a.json {
        println!("{:#}", json!({"model": name, "rows": rows}));
    }
    Ok(())
}

/// `prefix`: time to first token with and without a cached prompt prefix.
pub fn prefix(a: &Args) -> Result<(), String> {
    let path = model_path(a)?;
    let m = ch08_gguf::load(&path).map_err(|e| e.to_string())?;
    let p = a.prompt;
    if p + 16 > m.model.max_positions() {
        return Err(format!(
            "--prompt {p} leaves no room in the model's {} positions",
            m.model.max_positions()
        ));
    }
    let (cold, warm) = ch07_simd_parallel::pool::in_pool(a.threads, || {
        ch10_batching::bench::prefix_ttft(m.engine()?, &m.tokenizer.tokenizer, p)
    })??;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    if a.json {
        println!(
            "{:#}",
            json!({"model": name, "prefix": p, "ttft_uncached_ms": cold, "ttft_cached_ms": warm})
        );
        return Ok(());
    }
    println!("{name}: time to first token of a {p}-token prefix and 8 tokens of its own");
    println!("  prefix not cached: {cold:.1} ms");
    println!(
        "  prefix cached:     {warm:.1} ms ({:.1}x sooner)",
        cold / warm
    );
    Ok(())
}
