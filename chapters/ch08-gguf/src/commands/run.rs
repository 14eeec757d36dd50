//! Running the file's model: `logits`, `generate` and `load`.

use std::io::Write;
use std::time::Instant;

use ch01_tensors::models;
use ch02_tokenizer::StreamDecoder;
use ch04_forward::model::{argmax, highest, position_lines, positions_json};
use ch07_simd_parallel::pool::in_pool;
use ch08_gguf::{GgufFile, memory};
use serde_json::{Value as Json, json};

use super::model::{model_path, open_model};
use crate::Args;

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
        positions.push((argmax(row), highest(row, a.top)));
    }
    if a.json {
        println!(
            "{}",
            json!({"ids": ids, "positions": positions_json(&positions)})
        );
        return Ok(());
    }
    for line in position_lines(&ids, &positions) {
        println!("{line}");
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
    let shown = |e: std::io::Error| format!("{}: {e}", models::shown(&path));
    if a.cold {
        memory::evict(&path).map_err(shown)?;
    } else {
        // warm: read the file once, so every page is in the page cache before the clock starts
        let mut f = ch01_tensors::files::open_regular(&path).map_err(shown)?;
        std::io::copy(&mut f, &mut std::io::sink()).map_err(shown)?;
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
