//! The commands that measure: `bench` (time to first token, pp512, tg128, memory, and the
//! race against llama.cpp) and `roofline` (decode against the memory's read bandwidth).

use ch01_tensors::models;
use ch07_simd_parallel::stats::{median, percentile};
use ch09_generate::{Sampler, SamplerConfig};
use serde_json::json;

use crate::cli::Args;
use crate::commands::model_path;

/// Peak resident memory of this process so far (`VmHWM`), in bytes.
fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// Milliseconds from `start` to the first token of a 32-token prompt: load, prefill, sample.
fn time_to_first_token(
    path: &std::path::Path,
    threads: usize,
    start: std::time::Instant,
) -> Result<f64, String> {
    let m = ch08_gguf::load(path).map_err(|e| e.to_string())?;
    let engine = m.engine()?;
    let vocab = m.model.config.vocab_size as u64;
    let prompt: Vec<u32> = (0..32u64)
        .map(|i| ((i * 7919 + 13) % vocab) as u32)
        .collect();
    let mut sampler = Sampler::new(SamplerConfig {
        temperature: 0.0,
        ..Default::default()
    });
    ch07_simd_parallel::pool::in_pool(threads, || -> Result<(), String> {
        let mut cache = engine.new_cache(prompt.len()).map_err(|e| e.to_string())?;
        let logits = engine
            .forward(&mut cache, &prompt, 0)
            .map_err(|e| e.to_string())?;
        std::hint::black_box(sampler.sample(&logits, &prompt));
        Ok(())
    })??;
    Ok(start.elapsed().as_secs_f64() * 1e3)
}

/// `bench`: time to first token cold and warm, pp512, tg128, peak memory, and with
/// `--compare` the race against llama-bench.
pub fn bench(a: &Args, process_start: std::time::Instant) -> Result<(), String> {
    let path = model_path(a)?;
    // Cold: the file dropped from the page cache; timed from process start.
    ch08_gguf::memory::evict(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let cold = time_to_first_token(&path, a.threads, process_start)?;
    let warm = time_to_first_token(&path, a.threads, std::time::Instant::now())?;
    // The whole-process race first, while this process maps nothing of the file: the kernel
    // does not drop the pages of a mapped file, and the race's starts would not be cold.
    let process = if a.compare {
        let completion = ch09_generate::race::llama_completion_path()?;
        Some(ch09_generate::race::race(&path, &completion, a.threads, 3)?)
    } else {
        None
    };
    let m = ch08_gguf::load(&path).map_err(|e| e.to_string())?;
    let engine = m.engine()?;
    let e2e = ch08_gguf::bench::end_to_end(&engine, a.threads, 3)?;
    // the same 128 tokens as tg128, through the sampler, the stream decoder and the stop
    // matcher: with the default sampling chain, and greedy; in rounds that alternate with
    // tg128 itself, so that the ratios compare the same minutes
    let prompt = m
        .tokenizer
        .encode_prompt(ch09_generate::streamed::PROMPT, true);
    let greedy = SamplerConfig {
        temperature: 0.0,
        ..Default::default()
    };
    let beside = ch09_generate::streamed::beside_tg128(
        &engine,
        &m.tokenizer.tokenizer,
        &prompt,
        &[a.sampling.clone(), greedy],
        a.threads,
        5,
    )?;
    let (streamed, streamed_greedy) = (beside.streamed_tok_s[0], beside.streamed_tok_s[1]);
    let (ratio, ratio_greedy) = (beside.ratios[0], beside.ratios[1]);
    let compare = if a.compare {
        Some(ch08_gguf::bench::compare(&engine, &path, a.threads, 3)?)
    } else {
        None
    };
    let rss = peak_rss();
    if a.json {
        println!(
            "{:#}",
            json!({"model": models::shown(&path), "threads": a.threads,
                   "ttft_cold_ms": cold, "ttft_warm_ms": warm,
                   "pp512_tok_s": e2e.pp512_tok_s, "tg128_tok_s": e2e.tg128_tok_s,
                   "streamed_tok_s": streamed, "streamed_greedy_tok_s": streamed_greedy,
                   "streamed_beside_tg128_tok_s": beside.tg128_tok_s,
                   "streamed_over_tg128": ratio, "streamed_greedy_over_tg128": ratio_greedy,
                   "peak_rss_bytes": rss, "compare": compare, "process": process})
        );
        return Ok(());
    }
    println!(
        "{} on {} threads ({} kernels):",
        models::shown(&path),
        a.threads,
        e2e.isa
    );
    println!(
        "  time to first token (32-token prompt): cold {cold:.0} ms (from process start, file evicted), warm {warm:.0} ms"
    );
    println!(
        "  pp512 {:.1} tok/s   tg128 {:.1} tok/s   peak RSS {:.1} MB",
        e2e.pp512_tok_s,
        e2e.tg128_tok_s,
        rss as f64 / 1e6
    );
    println!(
        "  streamed, 128 tokens through generate(), alternating with tg128 ({:.1} tok/s in the same rounds): {streamed:.1} tok/s sampled ({ratio:.2}x), {streamed_greedy:.1} tok/s greedy ({ratio_greedy:.2}x); each x is the median of the rounds' own ratios",
        beside.tg128_tok_s,
    );
    if let Some(c) = compare {
        println!(
            "  llama.cpp: pp512 {:.1} tok/s ({:.2}x ours/theirs)   tg128 {:.1} tok/s ({:.2}x)",
            c.llama_cpp_pp512_tok_s, c.pp512_ratio, c.llama_cpp_tg128_tok_s, c.tg128_ratio
        );
    }
    if let Some(p) = process {
        println!(
            "  whole process, file evicted, 32-token prompt, 1 token ({} rounds, medians): ours {:.0} ms, {:.1} MB peak; llama-completion {:.0} ms, {:.1} MB peak",
            p.rounds,
            p.ours_ttft_cold_ms,
            p.ours_peak_rss_bytes as f64 / 1e6,
            p.llama_cpp_ttft_cold_ms,
            p.llama_cpp_peak_rss_bytes as f64 / 1e6
        );
    }
    Ok(())
}

// ANCHOR: roofline
/// Rounds of `roofline` for each model: a read loop, then a tg128 run.
const ROOFLINE_ROUNDS: usize = 5;

/// `roofline`: how close each model's decode comes to the memory's limit. A decode step
/// reads every weight once, so bytes per token ÷ read bandwidth is the fastest it can go.
/// The bandwidth of a shared host moves from second to second, so each tg128 run is paired
/// with a read loop measured just before it, and a model's share of its ceiling is the
/// median of the rounds' own shares. The figure shows GB/s of weights streamed by the whole
/// step (tg128), by the layers' matrix products alone and by the LM head alone (from
/// `ch08-gguf profile`'s decode step).
pub fn roofline(a: &Args) -> Result<(), String> {
    let mut loops = Vec::new(); // every round's read bandwidth, GB/s
    let mut bars = Vec::new();
    let mut rows = Vec::new();
    for (name, path) in [
        ("SmolLM2", models::smollm2_gguf()),
        ("Gemma-3", models::gemma3_gguf()),
    ] {
        let path = models::require(&path)?;
        let m = ch08_gguf::load(&path).map_err(|e| e.to_string())?;
        let engine = m.engine()?;
        let per_token = m.model.bytes_read_per_token() as f64;
        ch08_gguf::bench::tg128(&engine, a.threads)?; // unmeasured: the weights paged in
        let (mut bw, mut tg, mut share) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..ROOFLINE_ROUNDS {
            let gb_s = ch07_simd_parallel::bench::read_bandwidth(a.threads, 3)?;
            let tok_s = ch08_gguf::bench::tg128(&engine, a.threads)?;
            share.push(tok_s * per_token / (gb_s * 1e9));
            bw.push(gb_s);
            tg.push(tok_s);
        }
        loops.extend_from_slice(&bw);
        let (lo, hi) = (percentile(&share, 0.0), percentile(&share, 1.0));
        let (bw, tg, share) = (median(&mut bw), median(&mut tg), median(&mut share));
        let (ops, _) = ch08_gguf::bench::profile(&engine, a.threads, 1, 64, 5)?;
        let gbs = |o: &[&ch07_simd_parallel::profile::OpTime]| {
            let bytes: usize = o.iter().map(|o| o.weight_bytes).sum();
            let ms: f64 = o.iter().map(|o| o.ms).sum();
            bytes as f64 / ms / 1e6
        };
        let (head, layers): (Vec<_>, Vec<_>) = ops
            .iter()
            .filter(|o| o.weight_bytes > 0)
            .partition(|o| o.op.contains("LM head"));
        let ceiling = bw * 1e9 / per_token;
        let step = tg * per_token / 1e9;
        bars.push((format!("{name}: {tg:.0} of {ceiling:.0} tok/s"), step));
        bars.push((format!("{name} layers"), gbs(&layers)));
        bars.push((format!("{name} LM head"), gbs(&head)));
        rows.push(
            json!({"model": models::shown(&path), "mb_per_token": per_token / 1e6,
            "read_bandwidth_gb_s": bw, "tg128_tok_s": tg, "ceiling_tok_s": ceiling,
            "share_of_ceiling": share, "share_lowest": lo, "share_highest": hi,
            "step_gb_s": step, "layers_gb_s": gbs(&layers), "lm_head_gb_s": gbs(&head)}),
        );
    }
    let (lo, hi, n_loops) = (
        percentile(&loops, 0.0),
        percentile(&loops, 1.0),
        loops.len(),
    );
    let bandwidth = median(&mut loops);
    if let Some(out) = &a.svg {
        let title = format!(
            "{} threads: weights streamed per second in a decode step",
            a.threads
        );
        std::fs::write(
            out,
            ch07_simd_parallel::roofline::svg(&title, &bars, bandwidth),
        )
        .map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    }
    if a.json {
        println!(
            "{:#}",
            json!({"threads": a.threads, "rounds": ROOFLINE_ROUNDS, "read_bandwidth_gb_s": bandwidth,
                   "read_bandwidth_lowest_gb_s": lo, "read_bandwidth_highest_gb_s": hi, "models": rows})
        );
        return Ok(());
    }
    println!(
        "read bandwidth, {} threads: {bandwidth:.1} GB/s (median of {} read loops, {lo:.1} to {hi:.1})",
        a.threads, n_loops
    );
    for r in &rows {
        let f = |k: &str| r[k].as_f64().unwrap_or(0.0);
        println!(
            "{}: {:.1} MB a token; at {:.1} GB/s, ceiling {:.0} tok/s; tg128 {:.1} tok/s; share of the ceiling {:.0}% (median of {ROOFLINE_ROUNDS} rounds' own, {:.0}% to {:.0}%); GB/s: step {:.1}, layers' products {:.1}, LM head {:.1}",
            r["model"].as_str().unwrap_or("?"),
            f("mb_per_token"),
            f("read_bandwidth_gb_s"),
            f("ceiling_tok_s"),
            f("tg128_tok_s"),
            100.0 * f("share_of_ceiling"),
            100.0 * f("share_lowest"),
            100.0 * f("share_highest"),
            f("step_gb_s"),
            f("layers_gb_s"),
            f("lm_head_gb_s"),
        );
    }
    Ok(())
}
// ANCHOR_END: roofline
