//! The binary's subcommands: `generate`, `masks`, `bench`.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use ch01_tensors::models;
use ch07_simd_parallel::pool::in_pool;
use ch08_gguf::GgufFile;
use ch09_generate::chat::{Chat, Message};
use ch10_batching::Request;
use ch12_structured::answer;
use ch12_structured::constrain::Constraint;
use ch12_structured::grammar::Grammar;
use ch12_structured::mask::{TokenIndex, TokenSet};
use ch12_structured::matcher::Matcher;
use ch12_structured::schema::{Limits, compile_text};

use crate::{Args, model_path};

/// What `masks` reads when no `--doc` is given.
const SAMPLE: &str = r#"{"name": "Ada Lovelace", "born": 1815, "fields": ["mathematics", "computing"], "note": null}"#;

/// A schema file, compiled; an error names the file, and the keyword and its place.
fn schema(path: &Path) -> Result<Grammar, String> {
    // a schema is a few KB; a file of more than a MiB is not one
    let size = std::fs::metadata(path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .len();
    if size > 1 << 20 {
        return Err(format!(
            "{}: {size} bytes; a schema is at most 1 MiB",
            path.display()
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    compile_text(&text, Limits::default()).map_err(|e| format!("{}: {e}", path.display()))
}

/// `generate`: one answer under the schema, printed.
pub fn generate(a: &Args) -> Result<(), String> {
    let grammar = schema(a.schema.as_deref().expect("checked by the parser"))?;
    let m = ch08_gguf::load(&model_path(a)?).map_err(|e| e.to_string())?;
    let chat = Chat::of_model(&m, None)?;
    let text = a.prompt.as_deref().expect("checked by the parser");
    let prompt = chat.prompt_ids(&m.tokenizer, &[Message::new("user", text)])?;
    let index = Arc::new(TokenIndex::from_tokenizer(
        &m.tokenizer.tokenizer,
        m.tokenizer.end_ids.clone(),
    ));
    let steer = Constraint::new(&grammar, index, Some(a.max_tokens)).map_err(|e| e.to_string())?;
    let mut request = Request::greedy(prompt, a.max_tokens);
    request.sampling.temperature = a.temperature;
    request.sampling.seed = a.seed;
    let engine = m.engine()?;
    let out = in_pool(a.threads, || {
        answer::run(engine, &m.tokenizer.tokenizer, request, Some(steer))
    })??;
    println!("{}", out.text);
    println!(
        "--- {} tokens at {:.1} tok/s; stopped: {}",
        out.ids.len(),
        out.decode_tok_s(),
        out.reason
    );
    Ok(())
}

/// `masks`: the mask before each token of a document, on the model's vocabulary.
pub fn masks(a: &Args) -> Result<(), String> {
    let path = model_path(a)?;
    let file = GgufFile::open(&path).map_err(|e| e.to_string())?;
    let tok = ch08_gguf::tokenizer(&file.gguf).map_err(|e| e.to_string())?;
    let started = Instant::now();
    let index = TokenIndex::from_tokenizer(&tok.tokenizer, tok.end_ids.clone());
    let index_ms = started.elapsed().as_secs_f64() * 1e3;
    let grammar = match &a.schema {
        Some(p) => schema(p)?,
        None => Grammar::any_object(),
    };
    let doc = a.doc.as_deref().unwrap_or(SAMPLE);
    let ids = tok.tokenizer.encode(doc, false);
    let mut m = Matcher::new(&grammar);
    let mut set = TokenSet::empty(index.vocab_size());
    let mut rows = Vec::new();
    for &id in &ids {
        let t = Instant::now();
        index.mask(&m, &mut set);
        let us = t.elapsed().as_secs_f64() * 1e6;
        let piece = String::from_utf8_lossy(index.piece(id)).into_owned();
        if !set.contains(id) {
            return Err(format!(
                "the document's token {piece:?} is not allowed by the grammar"
            ));
        }
        rows.push((piece, set.count(), us));
        m.accept(index.piece(id));
    }
    let mean_us = rows.iter().map(|r| r.2).sum::<f64>() / rows.len().max(1) as f64;
    if a.json {
        let steps: Vec<_> = rows
            .iter()
            .map(|(p, n, us)| serde_json::json!({"token": p, "allowed": n, "mask_us": us}))
            .collect();
        let out = serde_json::json!({
            "model": models::shown(&path), "vocab_size": index.vocab_size(),
            "plain_tokens": index.plain_count(), "index_ms": index_ms,
            "mask_us_per_token": mean_us, "steps": steps,
        });
        println!("{out:#}");
        return Ok(());
    }
    println!(
        "{} tokens in the vocabulary, {} plain ones (index built in {index_ms:.0} ms)",
        index.vocab_size(),
        index.plain_count()
    );
    println!("{:>16}  {:>8}  {:>10}", "next token", "allowed", "mask");
    for (p, n, us) in &rows {
        println!("{:>16}  {n:>8}  {us:>7.1} µs", format!("{p:?}"));
    }
    println!("mean mask: {mean_us:.1} µs a token");
    Ok(())
}

/// `bench`: plain and constrained decode, and the mask's cost.
pub fn bench(a: &Args) -> Result<(), String> {
    let path = model_path(a)?;
    let m = ch08_gguf::load(&path).map_err(|e| e.to_string())?;
    let r = ch12_structured::bench::bench(&m, a.threads, a.rounds)?;
    if a.json {
        let mut j = r.json();
        j["model"] = serde_json::json!(models::shown(&path));
        println!("{j:#}");
        return Ok(());
    }
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    println!(
        "{name}: {} tokens a run, {} thread{}, medians of {} round{}",
        ch12_structured::bench::TOKENS,
        r.threads,
        if r.threads == 1 { "" } else { "s" },
        r.rounds,
        if r.rounds == 1 { "" } else { "s" },
    );
    println!("  tg128 (chapter 8)          {:8.1} tok/s", r.tg128_tok_s);
    println!("  plain (chapter 10)         {:8.1} tok/s", r.plain_tok_s);
    println!(
        "  constrained (this chapter) {:8.1} tok/s   {:.3}x plain, {} tokens",
        r.constrained_tok_s, r.constrained_over_plain, r.constrained_tokens
    );
    println!(
        "  the whole mask ({} tokens)  {:8.1} µs a token, mean over the answer",
        r.vocab_size, r.mask_us_per_token
    );
    println!("the constrained answer:\n{}", r.answer);
    Ok(())
}
