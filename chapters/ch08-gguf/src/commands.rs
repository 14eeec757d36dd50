//! The binary's commands, in three groups: reading the file (`inspect`, `hex`, `tokenize`,
//! here), running its model (`logits`, `generate`, `load`: [`run`]) and measuring it
//! (`bench`, `profile`, `compare`: [`speed`]).

use std::collections::BTreeMap;

use ch01_tensors::models;
use ch02_tokenizer::show::visible;
use ch08_gguf::gguf::{Array, Value};
use ch08_gguf::{GgufFile, hexdump};
use serde_json::{Value as Json, json};

use crate::Args;

mod levels;
mod model;
mod regions;
mod run;
mod speed;
pub mod synth;

pub use levels::levels;
use model::model_path;
pub use regions::regions;
pub use run::{generate, load, logits};
pub use speed::{bench, compare, depth, profile};

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
        out["family"] = match ch08_gguf::families::describe(&f) {
            Ok((name, adds)) => json!({"name": name, "adds": adds}),
            Err(e) => json!({"unsupported": e.to_string()}),
        };
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
    match ch08_gguf::families::describe(&f) {
        Ok((name, adds)) => {
            println!("\nfamily: {name}");
            adds.iter().for_each(|a| println!("  {a}"));
        }
        Err(e) => println!("\nfamily: this chapter cannot run it ({e})"),
    }
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
