//! Measuring the file's model: `bench`, `profile` and `compare`.

use std::time::Instant;

use ch01_tensors::models;
use serde_json::json;

use super::model::open_model;
use crate::Args;

/// `bench`: pp512 and tg128 of the file.
pub fn bench(a: &Args) -> Result<(), String> {
    let m = open_model(a)?;
    let engine = m.engine()?;
    let r = ch08_gguf::bench::end_to_end(&engine, a.threads, a.runs)?;
    let short = match a.short {
        Some(n) => Some((
            n,
            ch08_gguf::bench::prefill_rate(&engine, a.threads, a.runs, n)?,
        )),
        None => None,
    };
    let head_ms = ch08_gguf::bench::lm_head_ms(&engine, a.threads, 5 * a.runs)?;
    let head_share = head_ms / (1e3 / r.tg128_tok_s);
    let rates = ch08_gguf::bench::matrix_rates(&engine, a.threads, 20 * a.runs)?;
    // The tokenizer on the committed perplexity text, 20 times: its vocabulary is what
    // differs most between the two families (49 152 BPE tokens, 262 144 SentencePiece ones).
    // Skipped where the text is not there (a binary carried away from the source tree).
    let encode = match perplexity_text()? {
        Some(text) => {
            let start = Instant::now();
            let mut n_tokens = 0;
            for _ in 0..20 {
                n_tokens = std::hint::black_box(m.tokenizer.tokenizer.encode(&text, false)).len();
            }
            let encode_s = start.elapsed().as_secs_f64() / 20.0;
            Some((text.len(), n_tokens, encode_s))
        }
        None => None,
    };
    let encode_mb_s = encode.map(|(bytes, _, s)| bytes as f64 / s / 1e6);
    let mb = m.model.bytes_read_per_token() as f64 / 1e6;
    if a.json {
        println!(
            "{:#}",
            json!({"file": models::shown(&m.file.path), "architecture": m.model.family.name,
                   "isa": r.isa, "threads": r.threads, "pp512_tok_s": r.pp512_tok_s,
                   "tg128_tok_s": r.tg128_tok_s,
                   "short_pp": short.map(|(n, v)| json!({"tokens": n, "tok_s": v})),
                   "mb_read_per_token": mb,
                   "lm_head_mb": m.model.lm_head().bytes() as f64 / 1e6,
                   "lm_head_ms": head_ms, "lm_head_share_of_decode": head_share,
                   "encode_mb_s": encode_mb_s, "encode_tokens": encode.map(|e| e.1),
                   "matrices": rates.iter().map(|(f, r, c, g)| json!({"format": f, "rows": r, "cols": c, "gb_s": g})).collect::<Vec<_>>(),
                   "vocab": m.model.config.vocab_size})
        );
        return Ok(());
    }
    println!(
        "{} ({}, {mb:.1} MB of weights read per token, {:.1} MB of them the LM head), {} kernels, {} threads:",
        models::shown(&m.file.path),
        m.model.family.name,
        m.model.lm_head().bytes() as f64 / 1e6,
        r.isa,
        r.threads
    );
    println!(
        "  pp512 {:.1} tok/s   tg128 {:.1} tok/s",
        r.pp512_tok_s, r.tg128_tok_s
    );
    if let Some((n, v)) = short {
        println!("  pp{n} {v:.1} tok/s");
    }
    println!(
        "  LM head alone: {head_ms:.2} ms a token, {:.0}% of a decode step, {:.1} GB/s",
        100.0 * head_share,
        m.model.lm_head().bytes() as f64 / head_ms / 1e6
    );
    for (f, r, c, g) in &rates {
        println!("  one-token product, {f} ({r} × {c}): {g:.1} GB/s");
    }
    match (encode, encode_mb_s) {
        (Some((bytes, n_tokens, encode_s)), Some(mb_s)) => println!(
            "  tokenizer ({} tokens): the perplexity text, {bytes} bytes, to {n_tokens} ids in {:.2} ms ({mb_s:.1} MB/s)",
            m.model.config.vocab_size,
            encode_s * 1e3
        ),
        _ => println!("  tokenizer: not measured ({PERPLEXITY_TEXT} is not here)"),
    }
    Ok(())
}

/// Where the tokenizer's test text is, from the workspace root or the current folder.
const PERPLEXITY_TEXT: &str = "fixtures/reference/perplexity-text.txt";

/// The perplexity text, from the workspace this binary was built in or else the current
/// folder; `None` when neither has it.
fn perplexity_text() -> Result<Option<String>, String> {
    for path in [
        models::workspace_root().join(PERPLEXITY_TEXT),
        PERPLEXITY_TEXT.into(),
    ] {
        if path.is_file() {
            return ch01_tensors::files::read_to_string(&path, ch01_tensors::files::MAX_TEXT_FILE)
                .map(Some)
                .map_err(|e| format!("{}: {e}", path.display()));
        }
    }
    Ok(None)
}

/// `profile`: where one decode step (after 64 positions) and one 512-token prefill spend
/// their time.
pub fn profile(a: &Args) -> Result<(), String> {
    let m = open_model(a)?;
    let engine = m.engine()?;
    let steps = [
        ("decode step (1 token after 64)", 1, 64, a.runs),
        ("prefill (512 tokens)", 512, 0, a.runs.min(2)),
    ];
    let mut out = Vec::new();
    for (name, tokens, context, runs) in steps {
        let (ops, forward_ms) =
            ch08_gguf::bench::profile(&engine, a.threads, tokens, context, runs)?;
        out.push((name, tokens, context, ops, forward_ms));
    }
    if a.json {
        let steps: Vec<_> = out
            .iter()
            .map(|(name, tokens, context, ops, ms)| json!({"step": name, "tokens": tokens, "context": context, "forward_ms": ms, "ops": ops}))
            .collect();
        println!(
            "{:#}",
            json!({"file": models::shown(&m.file.path), "threads": a.threads, "isa": engine.kernels.name(), "steps": steps})
        );
        return Ok(());
    }
    println!(
        "{} ({}), {} kernels, {} threads",
        models::shown(&m.file.path),
        m.model.family.name,
        engine.kernels.name(),
        a.threads
    );
    for (name, _, _, ops, forward_ms) in &out {
        println!("\n{name}: {forward_ms:.2} ms");
        println!(
            "  {:<22} {:>9} {:>7} {:>9} {:>7}",
            "op", "ms", "share", "MB", "GB/s"
        );
        for o in ops {
            let mb = o.weight_bytes as f64 / 1e6;
            let gbs = if o.weight_bytes > 0 {
                format!("{:.1}", mb / o.ms)
            } else {
                "–".into()
            };
            println!(
                "  {:<22} {:>9.3} {:>6.1}% {:>9.1} {:>7}",
                o.op,
                o.ms,
                100.0 * o.ms / forward_ms,
                mb,
                gbs
            );
        }
    }
    Ok(())
}

/// The first line of a race's table: the file, threads, rounds and kernels.
fn race_title(file: &std::path::Path, threads: usize, rounds: usize, isa: &str) -> String {
    let name = file
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let threads = match threads {
        1 => "1 thread".to_string(),
        n => format!("{n} threads"),
    };
    format!("{name}, {threads}, {rounds} alternating rounds, medians ({isa} kernels):")
}

/// `compare`: llama-bench and ours on the same file, alternating.
pub fn compare(a: &Args) -> Result<(), String> {
    let m = open_model(a)?;
    let engine = m.engine()?;
    let c = ch08_gguf::bench::compare(&engine, &m.file.path, a.threads, a.rounds)?;
    let title = race_title(&m.file.path, c.threads, c.rounds, c.isa);
    if let Some(path) = &a.markdown {
        let md = format!(
            "{title}\n\n| test | ours | llama.cpp | ours / llama.cpp |\n|---|---:|---:|---:|\n\
             | pp512 | {:.1} tok/s | {:.1} tok/s | {:.2}× |\n| tg128 | {:.1} tok/s | {:.1} tok/s | {:.2}× |\n",
            c.ours_pp512_tok_s,
            c.llama_cpp_pp512_tok_s,
            c.pp512_ratio,
            c.ours_tg128_tok_s,
            c.llama_cpp_tg128_tok_s,
            c.tg128_ratio
        );
        ch01_tensors::files::write_output(path, &md)
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&c).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    println!("{title}");
    println!("  test             ours      llama.cpp    ratio");
    println!(
        "  pp512   {:>9.1} tok/s {:>9.1} tok/s   {:.2}x",
        c.ours_pp512_tok_s, c.llama_cpp_pp512_tok_s, c.pp512_ratio
    );
    println!(
        "  tg128   {:>9.1} tok/s {:>9.1} tok/s   {:.2}x",
        c.ours_tg128_tok_s, c.llama_cpp_tg128_tok_s, c.tg128_ratio
    );
    Ok(())
}

/// `depth`: tg128 after `--depth` cached tokens, ours and llama-bench's `-d`, alternating.
pub fn depth(a: &Args) -> Result<(), String> {
    let m = open_model(a)?;
    let engine = m.engine()?;
    let (ours, theirs, per_round) =
        ch08_gguf::bench::compare_depth(&engine, &m.file.path, a.threads, a.depth, a.rounds)?;
    let title = race_title(&m.file.path, a.threads, a.rounds, engine.kernels.name());
    let test = format!("tg128 at depth {}", a.depth);
    if let Some(path) = &a.markdown {
        let md = format!(
            "{title}\n\n| test | ours | llama.cpp | ours / llama.cpp |\n|---|---:|---:|---:|\n\
             | {test} | {ours:.1} tok/s | {theirs:.1} tok/s | {:.2}× |\n",
            ours / theirs
        );
        ch01_tensors::files::write_output(path, &md)
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if a.json {
        let v = serde_json::json!({
            "depth": a.depth, "threads": a.threads, "rounds": a.rounds,
            "ours_tok_s": ours, "llama_cpp_tok_s": theirs, "ratio": ours / theirs,
            "per_round": per_round,
        });
        println!("{v:#}");
        return Ok(());
    }
    println!("{title}");
    println!(
        "  {test}: ours {ours:.1} tok/s, llama.cpp {theirs:.1} tok/s, {:.2}x",
        ours / theirs
    );
    Ok(())
}
