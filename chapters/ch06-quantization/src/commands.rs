//! The binary's commands: what `ch06-quantization [tour|eval|generate]` run.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use ch01_tensors::models;
use ch02_tokenizer::{StreamDecoder, Tokenizer};
use ch04_forward::Model;
use ch06_quantization::eval::{Scores, greedy, reference_logits, score};
use ch06_quantization::{Error, Format, QMatrix, QModel, ScaleRule};
use serde_json::json;

use crate::Args;

/// The prompt `generate` and eval's speed run use when none is given.
const DEFAULT_PROMPT: &str = "The capital of France is";
/// Tokens decoded for eval's speed figure.
const EVAL_DECODE: usize = 32;
/// The largest text `eval` reads (the committed one is 3 kB).
const MAX_TEXT_BYTES: u64 = 16 << 20;

fn load(a: &Args) -> Result<(PathBuf, Model, Tokenizer), Error> {
    let dir = match &a.model {
        Some(dir) => dir.clone(),
        None => models::ensure_smollm2_hf().map_err(Error::Config)?,
    };
    let model = Model::load(&dir)?;
    let tok = Tokenizer::from_file(dir.join("tokenizer.json"))
        .map_err(|e| Error::Tokenizer(e.to_string()))?;
    if tok.vocab_size() < model.config.vocab_size {
        return Err(Error::Tokenizer(format!(
            "the tokenizer has {} tokens but the model has {}",
            tok.vocab_size(),
            model.config.vocab_size
        )));
    }
    Ok((dir, model, tok))
}

fn rule(a: &Args) -> ScaleRule {
    if a.search {
        ScaleRule::Search
    } else {
        ScaleRule::Absmax
    }
}

/// Reads a text file whole: a regular file, at most [`MAX_TEXT_BYTES`], UTF-8.
fn read_text(path: &Path) -> Result<String, Error> {
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if !meta.is_file() {
        return Err(Error::Config(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    if meta.len() > MAX_TEXT_BYTES {
        return Err(Error::Config(format!(
            "{} is {} bytes; eval reads texts of at most {MAX_TEXT_BYTES} bytes",
            path.display(),
            meta.len()
        )));
    }
    let bytes = std::fs::read(path).map_err(io)?;
    String::from_utf8(bytes)
        .map_err(|e| Error::Config(format!("{} is not UTF-8: {e}", path.display())))
}

// ANCHOR: tour
/// One row of layer 0's query projection in every format: bytes, the first block as
/// stored, and how far the values come back from where they were.
pub fn tour(a: &Args) -> Result<(), Error> {
    let (dir, model, _) = load(a)?;
    let row = &model.weights.layers[0].wq[..model.config.hidden_size]; // (dim): output 0 of q_proj
    let rms = (row.iter().map(|x| x * x).sum::<f32>() / row.len() as f32).sqrt();
    let mut report = Vec::new();
    for format in Format::ALL {
        let m = QMatrix::quantize(row, 1, row.len(), format, ScaleRule::Absmax)
            .map_err(Error::Config)?;
        let mut back = vec![0.0f32; row.len()];
        m.dequantize_row(0, &mut back);
        let err: Vec<f32> = row.iter().zip(&back).map(|(x, y)| y - x).collect();
        let max_err = err.iter().fold(0.0f32, |m, e| m.max(e.abs()));
        let rms_err = (err.iter().map(|e| e * e).sum::<f32>() / err.len() as f32).sqrt();
        let first = &m.row_bytes(0)[..format.row_bytes(32).min(20)];
        report.push(json!({
            "format": format.name(), "row_bytes": m.bytes(), "bits_per_weight": m.bytes() as f64 * 8.0 / row.len() as f64,
            "first_bytes_hex": first.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" "),
            "first_values": &back[..4], "max_abs_error": max_err, "rms_error": rms_err,
            "rms_error_over_rms": rms_err / rms,
        }));
    }
    if a.json {
        println!(
            "{:#}",
            json!({ "model": models::shown(&dir), "tensor": "model.layers.0.self_attn.q_proj.weight", "row": 0,
                                  "values": row.len(), "rms": rms, "first_values": &row[..4], "formats": report })
        );
        return Ok(());
    }
    println!("model: {}", models::shown(&dir));
    println!(
        "row 0 of model.layers.0.self_attn.q_proj.weight: {} values, rms {rms:.5}",
        row.len()
    );
    println!("first values as stored in f32: {:?}\n", &row[..4]);
    println!(
        "{:<6} {:>6} {:>6}  {:<62} {:>10} {:>10} {:>8}",
        "format", "bytes", "bits", "first bytes (hex)", "max error", "rms error", "rms/rms"
    );
    for r in &report {
        println!(
            "{:<6} {:>6} {:>6.2}  {:<62} {:>10.6} {:>10.6} {:>7.2}%",
            r["format"].as_str().unwrap_or(""),
            r["row_bytes"],
            r["bits_per_weight"].as_f64().unwrap_or(0.0),
            r["first_bytes_hex"].as_str().unwrap_or(""),
            r["max_abs_error"].as_f64().unwrap_or(0.0),
            r["rms_error"].as_f64().unwrap_or(0.0),
            100.0 * r["rms_error_over_rms"].as_f64().unwrap_or(0.0),
        );
    }
    println!("\nthe first four values back from each format:");
    for r in &report {
        let v: Vec<String> = r["first_values"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|x| format!("{:>10.6}", x.as_f64().unwrap_or(0.0)))
                    .collect()
            })
            .unwrap_or_default();
        println!(
            "  {:<6} {}",
            r["format"].as_str().unwrap_or(""),
            v.join(" ")
        );
    }
    Ok(())
}
// ANCHOR_END: tour

/// llama.cpp's perplexity on the committed text for this format, if the fixtures have one.
fn llama_cpp_perplexity(format: Format) -> Option<f64> {
    let key = match format {
        Format::F32 => "smollm2-f32",
        Format::Q4_1 => "smollm2-q4_1",
        Format::Int8 | Format::Q8_0 | Format::Q4_0 | Format::Q5_0 | Format::Q4_K | Format::Q6_K => {
            return None;
        }
    };
    let path = models::workspace_root().join("fixtures/reference/perplexity.json");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    v["models"][key]["perplexity"].as_f64()
}

pub fn eval(a: &Args) -> Result<(), Error> {
    let (dir, model, tok) = load(a)?;
    let default_text = models::workspace_root().join("fixtures/reference/perplexity-text.txt");
    let text_path = a.text.clone().unwrap_or(default_text);
    let ids = tok.encode(&read_text(&text_path)?, false); // no BOS, no special tokens: the fixtures' method
    let prompt = tok.encode(DEFAULT_PROMPT, false);
    let f32_model = QModel::quantize(&model, Format::F32, ScaleRule::Absmax)?; // no copy
    let reference = reference_logits(&f32_model, &ids)?;
    let mut rows = Vec::new();
    for &format in &a.formats {
        let start = Instant::now();
        let qm = QModel::quantize(&model, format, rule(a))?;
        let quantize_seconds = start.elapsed().as_secs_f64();
        let s: Scores = score(&qm, &reference, &ids)?;
        let run = greedy(&qm, &prompt, EVAL_DECODE, false, &mut |_| {})?;
        let llama = if a.text.is_none() && !a.search {
            llama_cpp_perplexity(format)
        } else {
            None
        };
        rows.push(json!({
            "format": format.name(), "scale_rule": if a.search { "search" } else { "absmax" },
            "weight_bytes": qm.weight_bytes(), "bytes_per_token": qm.bytes_read_per_token(),
            "perplexity": s.perplexity, "kl_mean": s.kl_mean, "top1_agreement": s.top1_agreement,
            "decode_tok_s": run.decode_tok_s(), "tokens": s.tokens, "quantize_seconds": quantize_seconds,
            "llama_cpp_perplexity": llama,
        }));
    }
    if let Some(path) = &a.markdown {
        let mut md = String::from(
            "| format | weights (MB) | read per token (MB) | perplexity | llama.cpp | KL (nats) | top-1 | decode |\n|---|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for r in &rows {
            md += &format!(
                "| {} | {:.1} | {:.1} | {:.3} | {} | {:.5} | {:.1}% | {:.1} tok/s |\n",
                r["format"].as_str().unwrap_or(""),
                r["weight_bytes"].as_f64().unwrap_or(0.0) / 1e6,
                r["bytes_per_token"].as_f64().unwrap_or(0.0) / 1e6,
                r["perplexity"].as_f64().unwrap_or(0.0),
                r["llama_cpp_perplexity"]
                    .as_f64()
                    .map_or("-".to_string(), |p| format!("{p:.2}")),
                r["kl_mean"].as_f64().unwrap_or(0.0),
                100.0 * r["top1_agreement"].as_f64().unwrap_or(0.0),
                r["decode_tok_s"].as_f64().unwrap_or(0.0),
            );
        }
        write_output(path, &md)?;
    }
    if a.json {
        match rows.as_slice() {
            [one] => println!("{one:#}"),
            _ => println!("{:#}", serde_json::Value::Array(rows)),
        }
        return Ok(());
    }
    println!("model: {}", models::shown(&dir));
    println!(
        "text: {} ({} tokens, windows of 256; {} scored)",
        models::shown(&text_path),
        ids.len(),
        rows[0]["tokens"]
    );
    println!(
        "scale rule: {}\n",
        if a.search {
            "search"
        } else {
            "absmax (llama.cpp's)"
        }
    );
    println!(
        "{:<6} {:>11} {:>11} {:>10} {:>10} {:>9} {:>9} {:>13}",
        "format", "weights MB", "MB/token", "perplexity", "llama.cpp", "KL", "top-1", "decode"
    );
    for r in &rows {
        let llama = r["llama_cpp_perplexity"]
            .as_f64()
            .map_or("-".to_string(), |p| format!("{p:.2}"));
        println!(
            "{:<6} {:>11.1} {:>11.1} {:>10.3} {:>10} {:>9.5} {:>8.1}% {:>7.1} tok/s",
            r["format"].as_str().unwrap_or(""),
            r["weight_bytes"].as_f64().unwrap_or(0.0) / 1e6,
            r["bytes_per_token"].as_f64().unwrap_or(0.0) / 1e6,
            r["perplexity"].as_f64().unwrap_or(0.0),
            llama,
            r["kl_mean"].as_f64().unwrap_or(0.0),
            100.0 * r["top1_agreement"].as_f64().unwrap_or(0.0),
            r["decode_tok_s"].as_f64().unwrap_or(0.0),
        );
    }
    Ok(())
}

/// [`ch01_tensors::files::write_output`], with this chapter's error.
fn write_output(path: &Path, text: &str) -> Result<(), Error> {
    ch01_tensors::files::write_output(path, text).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })
}

pub fn histogram(a: &Args) -> Result<(), Error> {
    let (dir, model, _) = load(a)?;
    let l = &model.weights.layers[0];
    let mut all = Vec::new();
    for m in [&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down] {
        all.extend_from_slice(m);
    }
    let counts = ch06_quantization::histogram::block_histogram(&all, 64);
    if let Some(path) = &a.svg {
        let title = "SmolLM2 layer 0: each weight / its block's largest magnitude";
        write_output(path, &ch06_quantization::histogram::svg(&counts, title))?;
    }
    let total: u64 = counts.iter().sum();
    let distinct = ch06_quantization::histogram::most_distinct_per_block(&all);
    if a.json {
        println!(
            "{:#}",
            json!({ "model": models::shown(&dir), "weights": total, "bins": counts,
                    "most_distinct_per_block": distinct })
        );
        return Ok(());
    }
    println!("model: {}", models::shown(&dir));
    println!(
        "layer 0's seven matrices, {total} weights, each divided by its block's max |x|, 64 bins over [-1, 1]:"
    );
    let max = counts.iter().copied().max().unwrap_or(1).max(1);
    for (i, c) in counts.iter().enumerate().step_by(2) {
        let c = c + counts.get(i + 1).copied().unwrap_or(0);
        let lo = -1.0 + 2.0 * i as f64 / 64.0;
        println!(
            "  {lo:>+6.3} {:>8} {}",
            c,
            "#".repeat((c * 60 / (2 * max)) as usize)
        );
    }
    let inner = counts[16..48].iter().sum::<u64>() as f64 / total.max(1) as f64;
    println!(
        "{:.1}% of the weights lie within half of their block's largest magnitude",
        100.0 * inner
    );
    println!("at most {distinct} distinct values in any block of 32");
    Ok(())
}

pub fn generate(a: &Args) -> Result<(), Error> {
    let (dir, model, tok) = load(a)?;
    let format = a.formats[0];
    let prompt = match &a.ids {
        Some(ids) => ids.clone(),
        None => tok.encode(a.prompt.as_deref().unwrap_or(DEFAULT_PROMPT), true),
    };
    if prompt.is_empty() {
        return Err(Error::Config(
            "the prompt is empty: the model needs at least one token".into(),
        ));
    }
    let qm = QModel::quantize(&model, format, rule(a))?;
    if !a.json {
        println!(
            "model: {} with {} weights ({:.1} MB)",
            models::shown(&dir),
            format.name(),
            qm.weight_bytes() as f64 / 1e6
        );
        print!(
            "{}",
            tok.decode(&prompt)
                .map_err(|e| Error::Tokenizer(e.to_string()))?
        );
    }
    let mut dec = StreamDecoder::new(&tok);
    let mut out = std::io::stdout();
    let run = greedy(&qm, &prompt, a.n, true, &mut |id| {
        if !a.json {
            let _ = write!(out, "{}", dec.push(id).unwrap_or_default());
            let _ = out.flush();
        }
    })?;
    let prefill_tok_s = prompt.len() as f64 / run.prefill_seconds.max(1e-9);
    if a.json {
        let v = json!({ "format": format.name(), "prompt_ids": prompt, "generated_ids": run.ids,
                        "text": tok.decode(&run.ids).unwrap_or_default(),
                        "prefill_tok_s": prefill_tok_s, "decode_tok_s": run.decode_tok_s() });
        println!("{v:#}");
        return Ok(());
    }
    println!("\n---");
    println!(
        "prefill: {} tokens in {:.1} ms = {prefill_tok_s:.1} tok/s",
        prompt.len(),
        run.prefill_seconds * 1e3
    );
    println!(
        "decode: {} tokens in {:.1} ms = {:.1} tok/s",
        run.ids.len().saturating_sub(1),
        run.decode_seconds * 1e3,
        run.decode_tok_s()
    );
    Ok(())
}
