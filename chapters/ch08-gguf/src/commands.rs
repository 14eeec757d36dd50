//! The binary's commands.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use ch01_tensors::models;
use ch02_tokenizer::StreamDecoder;
use ch02_tokenizer::show::visible;
use ch04_forward::model::argmax;
use ch07_simd_parallel::bench::in_pool;
use ch08_gguf::gguf::{Array, Value};
use ch08_gguf::{GgufFile, hexdump, memory};
use serde_json::{Value as Json, json};

use crate::Args;

/// The file to read: `--model`, or the default SmolLM2 GGUF (fetched on first use).
fn model_path(a: &Args) -> Result<PathBuf, String> {
    match &a.model {
        Some(p) => Ok(p.clone()),
        None => {
            let p = models::smollm2_gguf();
            if !p.exists() {
                models::fetch("smollm2-gguf")?; // the GGUF alone: hf/ is for chapters 1-5
            }
            models::require(&p)
        }
    }
}

fn open_model(a: &Args) -> Result<ch08_gguf::Loaded, String> {
    ch08_gguf::load(&model_path(a)?).map_err(|e| e.to_string())
}

/// A metadata value for people: arrays longer than 6 shown by their first elements.
fn show_value(v: &Value) -> String {
    fn first<T: std::fmt::Debug>(v: &[T]) -> String {
        let shown: Vec<String> = v.iter().take(6).map(|x| format!("{x:?}")).collect();
        let more = if v.len() > 6 { ", …" } else { "" };
        format!("[{}{more}]", shown.join(", "))
    }
    match v {
        Value::String(s) if s.chars().count() > 60 => {
            format!(
                "{:?}… ({} bytes)",
                s.chars().take(60).collect::<String>(),
                s.len()
            )
        }
        Value::String(s) => format!("{s:?}"),
        Value::Array(a) => {
            let items = match a {
                Array::String(v) => first(v),
                Array::I32(v) => first(v),
                Array::F32(v) => first(v),
                Array::U32(v) => first(v),
                Array::U8(v) => first(v),
                Array::I8(v) => first(v),
                Array::U16(v) => first(v),
                Array::I16(v) => first(v),
                Array::U64(v) => first(v),
                Array::I64(v) => first(v),
                Array::F64(v) => first(v),
                Array::Bool(v) => first(v),
                Array::Array(v) => format!("[{} arrays]", v.len()),
            };
            format!("{} × {}: {items}", a.len(), a.type_name())
        }
        Value::F32(x) => format!("{x:e}"),
        Value::F64(x) => format!("{x:e}"),
        Value::Bool(b) => b.to_string(),
        other => other
            .as_i128()
            .map_or_else(|| format!("{other:?}"), |n| n.to_string()),
    }
}

/// A metadata value as JSON: scalars as they are, arrays as their type, length and first
/// elements.
fn json_value(v: &Value) -> Json {
    match v {
        Value::String(s) => json!(s),
        Value::Bool(b) => json!(b),
        Value::F32(x) => json!(x),
        Value::F64(x) => json!(x),
        Value::Array(a) => json!({"type": a.type_name(), "len": a.len(), "shown": show_value(v)}),
        other => other.as_i128().map_or(Json::Null, |n| json!(n as f64)),
    }
}

// ANCHOR: inspect
/// `inspect`: the header, the metadata and the tensor table of a file.
pub fn inspect(a: &Args) -> Result<(), String> {
    let path = model_path(a)?;
    let f = GgufFile::open(&path).map_err(|e| e.to_string())?;
    let g = &f.gguf;
    // Bytes and parameters per tensor type.
    let mut types: BTreeMap<&str, (usize, u64, u64)> = BTreeMap::new();
    for t in &g.tensors {
        let e = types.entry(t.ty.name()).or_default();
        *e = (e.0 + 1, e.1 + t.elements(), e.2 + t.size);
    }
    let params: u64 = g.tensors.iter().map(|t| t.elements()).sum();
    if a.json {
        let metadata: serde_json::Map<String, Json> = g
            .metadata
            .iter()
            .map(|(k, v)| (k.clone(), json_value(v)))
            .collect();
        let types: Vec<Json> = types
            .iter()
            .map(|(ty, (n, p, b))| json!({"type": ty, "tensors": n, "parameters": p, "bytes": b}))
            .collect();
        let mut out = json!({
            "file": models::shown(&path), "version": g.version, "file_bytes": g.file_len,
            "alignment": g.alignment, "header_end": g.header_end, "data_offset": g.data_offset,
            "tensor_count": g.tensors.len(), "parameters": params,
            "metadata": metadata, "types": types,
        });
        if a.tensors {
            out["tensors"] = g
                .tensors
                .iter()
                .map(|t| {
                    json!({"name": t.name, "type": t.ty.name(), "dims": t.dims,
                                "offset": t.offset, "bytes": t.size})
                })
                .collect();
        }
        println!("{out:#}");
        return Ok(());
    }
    println!(
        "{}: GGUF v{}, {} bytes; {} metadata keys, {} tensors; header ends at byte {}, \
         data section at byte {} (alignment {})",
        models::shown(&path),
        g.version,
        g.file_len,
        g.metadata.len(),
        g.tensors.len(),
        g.header_end,
        g.data_offset,
        g.alignment
    );
    println!("\nmetadata:");
    for (k, v) in &g.metadata {
        println!("  {k:<42} {}", show_value(v));
    }
    println!("\ntensor types:");
    for (ty, (n, p, b)) in &types {
        println!(
            "  {ty:<6} {n:>4} tensors {:>12} parameters {:>12} bytes  ({:.2} bits per weight)",
            p,
            b,
            *b as f64 * 8.0 / *p as f64
        );
    }
    println!(
        "  total  {:>4} tensors {params:>12} parameters {:>12} bytes",
        g.tensors.len(),
        g.tensors.iter().map(|t| t.size).sum::<u64>()
    );
    if a.tensors {
        println!(
            "\n  {:<28} {:<6} {:<16} {:>12} {:>10}",
            "name", "type", "dims (ggml)", "offset", "bytes"
        );
        for t in &g.tensors {
            println!(
                "  {:<28} {:<6} {:<16} {:>12} {:>10}",
                t.name,
                t.ty.name(),
                format!("{:?}", t.dims),
                t.offset,
                t.size
            );
        }
    }
    Ok(())
}
// ANCHOR_END: inspect

/// `hex`: the first bytes of the file, annotated.
pub fn hex(a: &Args) -> Result<(), String> {
    let path = model_path(a)?;
    let f = GgufFile::open(&path).map_err(|e| e.to_string())?;
    let fields = hexdump::walk(f.bytes(), a.keys).map_err(|e| e.to_string())?;
    print!("{}", hexdump::render(&fields));
    Ok(())
}

/// `tokenize`: ids of a text with the file's tokenizer (no BOS, like the fixtures).
pub fn tokenize(a: &Args) -> Result<(), String> {
    let path = model_path(a)?;
    let f = GgufFile::open(&path).map_err(|e| e.to_string())?;
    let tok = ch08_gguf::tokenizer(&f.gguf).map_err(|e| e.to_string())?;
    let text = match &a.text {
        Some(t) => t.clone(),
        None => read_stdin()?,
    };
    let ids = tok.tokenizer.encode(&text, a.special);
    if a.json {
        println!("{}", json!({ "ids": ids }));
        return Ok(());
    }
    for &id in &ids {
        let piece = tok.tokenizer.piece(id).map_err(|e| e.to_string())?;
        println!("{id:>7}  {}", visible(piece));
    }
    println!("{} tokens", ids.len());
    Ok(())
}

/// Standard input as text, at most `MAX_TEXT_FILE` bytes of UTF-8.
fn read_stdin() -> Result<String, String> {
    use std::io::Read;
    let max = ch01_tensors::files::MAX_TEXT_FILE;
    let mut bytes = Vec::new();
    std::io::stdin()
        .take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("reading standard input: {e}"))?;
    if bytes.len() as u64 > max {
        return Err(format!("standard input is longer than {max} bytes"));
    }
    String::from_utf8(bytes).map_err(|e| format!("standard input is not UTF-8: {e}"))
}

/// `logits`: the logits after every position of `--ids`, all positions in one pass.
pub fn logits(a: &Args) -> Result<(), String> {
    let m = open_model(a)?;
    let ids = a.ids.clone().unwrap_or_default();
    let engine = m.engine()?;
    let mut cache = engine.new_cache(ids.len()).map_err(|e| e.to_string())?;
    let logits = in_pool(a.threads, || engine.forward_all(&mut cache, &ids, 0))?
        .map_err(|e| e.to_string())?;
    let vocab = m.model.lm_head().rows();
    let mut positions = Vec::new();
    for row in logits.chunks_exact(vocab) {
        let mut order: Vec<usize> = (0..vocab).collect();
        // Highest first; equal logits keep the lower id first, like argmax.
        order.sort_by(|&i, &j| row[j].total_cmp(&row[i]).then(i.cmp(&j)));
        let top: Vec<(usize, f32)> = order.iter().take(a.top).map(|&i| (i, row[i])).collect();
        positions.push((argmax(row), top));
    }
    if a.json {
        let positions: Vec<_> = positions
            .iter()
            .map(|(am, top)| json!({"argmax": am, "top": top}))
            .collect();
        println!("{}", json!({"ids": ids, "positions": positions}));
        return Ok(());
    }
    for (t, (am, top)) in positions.iter().enumerate() {
        let top: Vec<String> = top.iter().map(|(i, l)| format!("{i}:{l:.3}")).collect();
        println!(
            "position {t:3} (id {:6}): argmax {am:6}   top {}",
            ids[t],
            top.join(" ")
        );
    }
    Ok(())
}

// ANCHOR: generate
/// `generate`: greedy, streamed, from the file alone.
pub fn generate(a: &Args) -> Result<(), String> {
    let m = open_model(a)?;
    let tok = &m.tokenizer;
    let prompt = match (&a.ids, &a.prompt) {
        (Some(ids), _) => ids.clone(),
        (None, text) => {
            tok.encode_prompt(text.as_deref().unwrap_or("The capital of France is"), true)
        }
    };
    if prompt.is_empty() {
        return Err("the prompt is empty: the model needs at least one token".into());
    }
    let engine = m.engine()?;
    let isa = engine.kernels.name();
    let mut dec = StreamDecoder::new(&tok.tokenizer);
    if !a.json {
        // The prompt as text, without the BOS the file asks for (its text is "<bos>").
        let shown = match prompt.split_first() {
            Some((&first, rest)) if Some(first) == tok.bos && tok.add_bos => rest,
            _ => &prompt[..],
        };
        print!(
            "{}",
            tok.tokenizer.decode(shown).map_err(|e| e.to_string())?
        );
    }
    let mut out = std::io::stdout();
    let run = in_pool(a.threads, || {
        engine.greedy(&prompt, a.n, true, &mut |id| {
            if !a.json {
                let _ = write!(out, "{}", dec.push(id).unwrap_or_default());
                let _ = out.flush();
            }
        })
    })?
    .map_err(|e| e.to_string())?;
    let text = tok.tokenizer.decode(&run.ids).unwrap_or_default();
    if a.json {
        println!(
            "{:#}",
            json!({ "prompt_ids": prompt, "generated_ids": run.ids, "text": text,
                    "isa": isa, "threads": a.threads,
                    "prefill_tok_s": prompt.len() as f64 / run.prefill_seconds.max(1e-9),
                    "decode_tok_s": run.decode_tok_s() })
        );
        return Ok(());
    }
    println!(
        "\n---\n{} prompt tokens, {} generated; decode {:.1} tok/s ({isa} kernels, {} threads)",
        prompt.len(),
        run.ids.len(),
        run.decode_tok_s(),
        a.threads
    );
    Ok(())
}
// ANCHOR_END: generate

// ANCHOR: load
/// `load`: each step from a path to the first token, with its time and what it made
/// resident: the process's memory, and how much of the file is in the page cache.
pub fn load(a: &Args) -> Result<(), String> {
    let path = model_path(a)?;
    if a.cold {
        memory::evict(&path).map_err(|e| format!("{}: {e}", models::shown(&path)))?;
    }
    let (k, kk) = ch08_gguf::kernels()?;
    let mut steps: Vec<(&str, f64, memory::Usage)> = Vec::new();
    let start = Instant::now();
    let mut mark = |name, file: Option<&GgufFile>| {
        steps.push((name, start.elapsed().as_secs_f64(), memory::usage(file)));
    };
    mark("start", None);
    let file = GgufFile::open_with(&path, a.access).map_err(|e| e.to_string())?;
    mark("open + parse header", Some(&file));
    let model = ch08_gguf::arch::load_model(&file).map_err(|e| e.to_string())?;
    mark("weights (views)", Some(&file));
    let tok = ch08_gguf::tokenizer(&file.gguf).map_err(|e| e.to_string())?;
    mark("tokenizer", Some(&file));
    let prompt = tok.encode_prompt("The capital of France is", true);
    let engine = ch08_gguf::engine::Engine::new(&model, k, kk);
    let mut cache = engine.new_cache(prompt.len()).map_err(|e| e.to_string())?;
    let logits = in_pool(a.threads, || engine.forward(&mut cache, &prompt, 0))?
        .map_err(|e| e.to_string())?;
    let first = argmax(&logits);
    mark("first token", Some(&file));
    let file_mb = file.gguf.file_len as f64 / 1e6;
    if a.json {
        let steps: Vec<Json> = steps
            .iter()
            .map(|(name, t, u)| {
                json!({"step": name, "seconds": t, "rss_bytes": u.rss,
                                       "rss_file_bytes": u.rss_file, "rss_anon_bytes": u.rss_anon,
                                       "file_cached_bytes": u.file_cached})
            })
            .collect();
        println!(
            "{:#}",
            json!({"file": models::shown(&path), "file_bytes": file.gguf.file_len, "cold": a.cold,
                   "access": format!("{:?}", a.access).to_lowercase(),
                   "first_token": first, "steps": steps})
        );
        return Ok(());
    }
    println!(
        "{} ({file_mb:.1} MB), {} start, {:?} access:",
        models::shown(&path),
        if a.cold {
            "cold (evicted from the page cache)"
        } else {
            "warm"
        },
        a.access
    );
    println!(
        "  {:<22} {:>10} {:>10} {:>10} {:>10} {:>14}",
        "step", "ms", "RSS MB", "file MB", "anon MB", "file cached MB"
    );
    for (name, t, u) in &steps {
        println!(
            "  {name:<22} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>14}",
            t * 1e3,
            u.rss as f64 / 1e6,
            u.rss_file as f64 / 1e6,
            u.rss_anon as f64 / 1e6,
            u.file_cached
                .map_or("–".to_string(), |b| format!("{:.1}", b as f64 / 1e6))
        );
    }
    println!(
        "  first token: {first} {:?}",
        String::from_utf8_lossy(tok.tokenizer.piece(first as u32).unwrap_or_default())
    );
    Ok(())
}
// ANCHOR_END: load

/// `bench`: pp512 and tg128 of the file.
pub fn bench(a: &Args) -> Result<(), String> {
    let m = open_model(a)?;
    let engine = m.engine()?;
    let r = ch08_gguf::bench::end_to_end(&engine, a.threads, a.runs)?;
    let head_ms = ch08_gguf::bench::lm_head_ms(&engine, a.threads, 5 * a.runs)?;
    let head_share = head_ms / (1e3 / r.tg128_tok_s);
    let rates = ch08_gguf::bench::matrix_rates(&engine, a.threads, 20 * a.runs)?;
    // The tokenizer on the committed perplexity text, 20 times: its vocabulary is what
    // differs most between the two families (49 152 BPE tokens, 262 144 SentencePiece ones).
    let text = ch01_tensors::files::read_to_string(
        &models::workspace_root().join("fixtures/reference/perplexity-text.txt"),
        ch01_tensors::files::MAX_TEXT_FILE,
    )
    .map_err(|e| format!("fixtures/reference/perplexity-text.txt: {e}"))?;
    let start = Instant::now();
    let mut n_tokens = 0;
    for _ in 0..20 {
        n_tokens = std::hint::black_box(m.tokenizer.tokenizer.encode(&text, false)).len();
    }
    let encode_s = start.elapsed().as_secs_f64() / 20.0;
    let encode_mb_s = text.len() as f64 / encode_s / 1e6;
    let mb = m.model.bytes_read_per_token() as f64 / 1e6;
    if a.json {
        println!(
            "{:#}",
            json!({"file": models::shown(&m.file.path), "architecture": m.model.family.name,
                   "isa": r.isa, "threads": r.threads, "pp512_tok_s": r.pp512_tok_s,
                   "tg128_tok_s": r.tg128_tok_s, "mb_read_per_token": mb,
                   "lm_head_mb": m.model.lm_head().bytes() as f64 / 1e6,
                   "lm_head_ms": head_ms, "lm_head_share_of_decode": head_share,
                   "encode_mb_s": encode_mb_s, "encode_tokens": n_tokens,
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
    println!(
        "  LM head alone: {head_ms:.2} ms a token, {:.0}% of a decode step, {:.1} GB/s",
        100.0 * head_share,
        m.model.lm_head().bytes() as f64 / head_ms / 1e6
    );
    for (f, r, c, g) in &rates {
        println!("  one-token product, {f} ({r} × {c}): {g:.1} GB/s");
    }
    println!(
        "  tokenizer ({} tokens): the perplexity text, {} bytes, to {n_tokens} ids in {:.2} ms ({encode_mb_s:.1} MB/s)",
        m.model.config.vocab_size,
        text.len(),
        encode_s * 1e3
    );
    Ok(())
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

/// `compare`: llama-bench and ours on the same file, alternating.
pub fn compare(a: &Args) -> Result<(), String> {
    let m = open_model(a)?;
    let engine = m.engine()?;
    let c = ch08_gguf::bench::compare(&engine, &m.file.path, a.threads, a.rounds)?;
    let name = m
        .file
        .path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let title = format!(
        "{name}, {} threads, {} alternating rounds, medians ({} kernels):",
        c.threads, c.rounds, c.isa
    );
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
