//! The binary's commands that run the model: the CPU's kernel levels on real weights
//! (the default) and `generate`. The measuring ones are in `measure.rs`.

use std::io::Write;
use std::time::Instant;

use ch01_tensors::models;
use ch02_tokenizer::{StreamDecoder, Tokenizer};
use ch04_forward::Model;
use ch06_quantization::forward::QEngine;
use ch06_quantization::{Format, QModel, Scalar, ScaleRule};
use ch07_simd_parallel::Isa;
use ch07_simd_parallel::isa::names;
use ch07_simd_parallel::kernels::{detect, for_isa};
use ch07_simd_parallel::pool::in_pool;
use serde_json::json;

use crate::Args;

/// SmolLM2 with chapter 6's Q4_1 weights (the shipped file's blocks), and its tokenizer.
pub(crate) fn load() -> Result<(QModel, Tokenizer), String> {
    let dir = models::ensure_smollm2_hf()?;
    let model = Model::load(&dir).map_err(|e| e.to_string())?;
    let tok = Tokenizer::from_file(dir.join("tokenizer.json")).map_err(|e| e.to_string())?;
    let q = QModel::quantize(&model, Format::Q4_1, ScaleRule::Absmax).map_err(|e| e.to_string())?;
    Ok((q, tok))
}

// ANCHOR: levels
/// The CPU's levels and, for each, layer 0's up projection (Q4_1, 1536 × 576) times a real
/// activation row, one weight row at a time through that level's own one-row kernel
/// (`dot_q4_1_q8_1`): equal to the scalar result bit for bit, and the time it takes. (A
/// matrix product goes four rows at a time, and the AVX-512 set borrows AVX2's four-row
/// kernel, so timing `matmul_with` would time AVX2's code under both names.)
pub fn levels(a: &Args) -> Result<(), String> {
    let (isa, _) = detect()?;
    let (model, tok) = load()?;
    // A real activation: the embedding of "The" (what layer 0's FFN input resembles).
    let id = tok.encode("The", false).first().copied().unwrap_or(0);
    let x = model.embed(&[id]).map_err(|e| e.to_string())?;
    let up = &model.layers[0].w_up;
    let mut reference = vec![0.0f32; up.rows()];
    up.matmul_with(&Scalar, &mut reference, &x, 1);
    let mut rows = Vec::new();
    for level in Isa::available() {
        let k = for_isa(level).ok_or("a level the CPU has must have kernels")?;
        let mut out = vec![0.0f32; up.rows()];
        let times = in_pool(1, || {
            (0..200)
                .map(|_| {
                    let start = Instant::now();
                    let acts = up.quantize_activations(k, &x);
                    for (r, o) in out.iter_mut().enumerate() {
                        *o = up.dot_row(k, r, &acts, 0);
                    }
                    start.elapsed().as_secs_f64()
                })
                .fold(f64::MAX, f64::min)
        })?;
        let same = out
            .iter()
            .zip(&reference)
            .filter(|(p, q)| p.to_bits() == q.to_bits())
            .count();
        rows.push(json!({ "isa": level.name(), "equal_bits": same, "outputs": out.len(), "microseconds": times * 1e6,
                          "gmac_s": (up.rows() * up.cols()) as f64 / times / 1e9 }));
    }
    if a.json {
        println!(
            "{:#}",
            json!({ "available": names(&Isa::available()), "chosen": isa.name(), "levels": rows })
        );
        return Ok(());
    }
    println!("this CPU runs: {}", names(&Isa::available()));
    let choices = if cfg!(target_arch = "aarch64") {
        "scalar|neon|dotprod"
    } else {
        "scalar|avx2|avx512"
    };
    println!("chosen: {isa} (set LLM_BOOK_ISA={choices} to force one)\n");
    println!(
        "layer 0 up_proj (Q4_1, 1536 x 576) times the embedding of \"The\", one thread,\n\
         one row at a time through each level's own dot_q4_1_q8_1:"
    );
    for r in &rows {
        println!(
            "  {:<7} {:>4}/{} outputs equal to scalar, bit for bit   {:>7.1} µs  {:>5.2} GMAC/s",
            r["isa"].as_str().unwrap_or(""),
            r["equal_bits"],
            r["outputs"],
            r["microseconds"].as_f64().unwrap_or(0.0),
            r["gmac_s"].as_f64().unwrap_or(0.0)
        );
    }
    Ok(())
}
// ANCHOR_END: levels

pub fn generate(a: &Args) -> Result<(), String> {
    let (isa, k) = detect()?;
    let (model, tok) = load()?;
    let prompt = tok.encode(
        a.prompt.as_deref().unwrap_or("The capital of France is"),
        true,
    );
    if prompt.is_empty() {
        return Err("the prompt is empty: the model needs at least one token".into());
    }
    let engine = QEngine::with_kernels(&model, k);
    if !a.json {
        print!("{}", tok.decode(&prompt).map_err(|e| e.to_string())?);
    }
    let mut dec = StreamDecoder::new(&tok);
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
    let prefill = prompt.len() as f64 / run.prefill_seconds.max(1e-9);
    if a.json {
        println!(
            "{:#}",
            json!({ "isa": isa.name(), "threads": a.threads, "prompt_ids": prompt, "generated_ids": run.ids,
                                  "text": tok.decode(&run.ids).unwrap_or_default(), "prefill_tok_s": prefill, "decode_tok_s": run.decode_tok_s() })
        );
        return Ok(());
    }
    println!("\n---\n{isa} kernels, {} threads", a.threads);
    println!(
        "prefill: {} tokens in {:.1} ms = {prefill:.1} tok/s",
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
