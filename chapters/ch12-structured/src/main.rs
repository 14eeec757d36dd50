//! `ch12-structured`: the grammar's mask on a real vocabulary, byte by byte.
//!
//! ```text
//! ch12-structured masks [-m FILE] [--schema FILE.json] [--doc TEXT] [--json]
//! ```
//!
//! `masks` tokenizes a document with the model's tokenizer and, before each of its tokens,
//! builds the mask the grammar allows: how many tokens it lets through and how long it
//! took. Without `--schema` the grammar is "any JSON object"; without `--doc`, a sample.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use ch01_tensors::models;
use ch08_gguf::GgufFile;
use ch12_structured::grammar::Grammar;
use ch12_structured::mask::{TokenIndex, TokenSet};
use ch12_structured::matcher::Matcher;
use ch12_structured::schema::{Limits, compile_text};

const USAGE: &str =
    "usage: ch12-structured masks [-m FILE] [--schema FILE.json] [--doc TEXT] [--json]";
const SAMPLE: &str = r#"{"name": "Ada Lovelace", "born": 1815, "fields": ["mathematics", "computing"], "note": null}"#;

struct Args {
    model: PathBuf,
    schema: Option<PathBuf>,
    doc: String,
    json: bool,
}

fn parse() -> Result<Args, lexopt::Error> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_env();
    let mut args = Args {
        model: models::smollm2_gguf(),
        schema: None,
        doc: SAMPLE.into(),
        json: false,
    };
    let mut command = None;
    while let Some(arg) = p.next()? {
        match arg {
            Short('m') | Long("model") => args.model = p.value()?.into(),
            Long("schema") => args.schema = Some(p.value()?.into()),
            Long("doc") => args.doc = p.value()?.string()?,
            Long("json") => args.json = true,
            Value(v) if command.is_none() => command = Some(v.string()?),
            _ => return Err(arg.unexpected()),
        }
    }
    match command.as_deref() {
        Some("masks") => Ok(args),
        Some(other) => Err(format!("unknown command `{other}`").into()),
        None => Err("a command is required".into()),
    }
}

fn run(args: Args) -> Result<(), String> {
    let path = models::require(&args.model)?;
    let file = GgufFile::open(&path).map_err(|e| e.to_string())?;
    let tok = ch08_gguf::tokenizer(&file.gguf).map_err(|e| e.to_string())?;
    let started = Instant::now();
    let index = TokenIndex::from_tokenizer(&tok.tokenizer, tok.end_ids.clone());
    let index_ms = started.elapsed().as_secs_f64() * 1e3;
    let grammar = match &args.schema {
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
            compile_text(&text, Limits::default()).map_err(|e| format!("{}: {e}", p.display()))?
        }
        None => Grammar::any_object(),
    };
    let ids = tok.tokenizer.encode(&args.doc, false);
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
    let total_us: f64 = rows.iter().map(|r| r.2).sum();
    if args.json {
        let steps: Vec<_> = rows
            .iter()
            .map(|(p, n, us)| serde_json::json!({"token": p, "allowed": n, "mask_us": us}))
            .collect();
        let out = serde_json::json!({
            "vocab_size": index.vocab_size(), "plain_tokens": index.plain_count(),
            "index_ms": index_ms, "mask_us_per_token": total_us / rows.len().max(1) as f64, "steps": steps,
        });
        println!("{out:#}");
    } else {
        println!(
            "{} tokens in the vocabulary, {} plain ones (index built in {index_ms:.0} ms)",
            index.vocab_size(),
            index.plain_count()
        );
        println!("{:>16}  {:>8}  {:>9}", "next token", "allowed", "mask (µs)");
        for (p, n, us) in &rows {
            println!("{:>16}  {n:>8}  {us:>9.1}", format!("{p:?}"));
        }
        println!(
            "mean mask: {:.1} µs a token",
            total_us / rows.len().max(1) as f64
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
