//! The binary's commands.

use std::io::Write;
use std::time::Instant;

use ch01_tensors::models;
use ch02_tokenizer::{StreamDecoder, Tokenizer};
use ch04_forward::Model;
use ch06_quantization::forward::QEngine;
use ch06_quantization::{Format, Kernels, QModel, Scalar, ScaleRule};
use ch07_simd_parallel::bench::{end_to_end, in_pool, kernel_rate, read_bandwidth};
use ch07_simd_parallel::isa::names;
use ch07_simd_parallel::kernels::{detect, for_isa};
use ch07_simd_parallel::{Isa, compare};
use serde_json::json;

use crate::Args;

/// SmolLM2 with chapter 6's Q4_1 weights (the shipped file's blocks), and its tokenizer.
fn load() -> Result<(QModel, Tokenizer), String> {
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
    println!("chosen: {isa} (set LLM_BOOK_ISA=scalar|avx2|avx512 to force one)\n");
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

pub fn bench(a: &Args) -> Result<(), String> {
    let (isa, best) = detect()?;
    let (model, _) = load()?;
    if a.e2e {
        let e = end_to_end(&model, best, a.threads, a.runs, true)?;
        if a.json {
            println!("{:#}", json!(e));
        } else {
            println!(
                "{isa}, {} threads: pp512 {:.1} tok/s, tg128 {:.1} tok/s",
                a.threads, e.pp512_tok_s, e.tg128_tok_s
            );
        }
        return Ok(());
    }
    let threads: Vec<usize> = if a.threads == 1 {
        vec![1]
    } else {
        vec![1, a.threads]
    };
    let mut bandwidth = Vec::new();
    for &t in &threads {
        bandwidth.push(json!({ "threads": t, "gb_s": read_bandwidth(t, a.runs)? }));
    }
    let mut kernels = Vec::new();
    for level in Isa::available() {
        let k: &dyn Kernels = for_isa(level).ok_or("no kernels")?;
        for format in [Format::Q8_0, Format::Q4_0, Format::Q4_1] {
            for &t in &threads {
                kernels.push(kernel_rate(k, format, t, 64, a.runs)?);
            }
        }
    }
    let mut e2e = Vec::new();
    // End to end on the SIMD levels (chapter 6's eval measures the scalar one).
    for level in Isa::available().into_iter().filter(|&l| l != Isa::Scalar) {
        for &t in &threads {
            e2e.push(end_to_end(
                &model,
                for_isa(level).ok_or("no kernels")?,
                t,
                a.runs,
                true,
            )?);
        }
    }
    // The decode ceiling: bytes a token must read, at the measured bandwidth.
    let per_token = model.bytes_read_per_token() as f64;
    let best_bw = bandwidth
        .iter()
        .filter_map(|b| b["gb_s"].as_f64())
        .fold(0.0, f64::max);
    let ceiling = best_bw * 1e9 / per_token;
    if let Some(path) = &a.markdown {
        let mut md = String::from("| measurement | threads | result |\n|---|---:|---:|\n");
        for b in &bandwidth {
            md += &format!(
                "| read bandwidth, 256 MiB | {} | {:.1} GB/s |\n",
                b["threads"],
                b["gb_s"].as_f64().unwrap_or(0.0)
            );
        }
        for k in &kernels {
            md += &format!(
                "| {} {} kernel, 64 MiB of weights | {} | {:.1} GB/s, {:.2} GMAC/s |\n",
                k.isa, k.format, k.threads, k.gb_s, k.gmac_s
            );
        }
        for e in &e2e {
            md += &format!(
                "| {} end to end: pp512 / tg128 | {} | {:.1} / {:.1} tok/s |\n",
                e.isa, e.threads, e.pp512_tok_s, e.tg128_tok_s
            );
        }
        md += &format!(
            "| decode ceiling: {:.1} MB a token at {best_bw:.1} GB/s | | {ceiling:.0} tok/s |\n",
            per_token / 1e6
        );
        write_output(path, &md)?;
    }
    if let Some(path) = &a.svg {
        let mut bars: Vec<(String, f64)> = kernels
            .iter()
            .filter(|k| k.threads == a.threads)
            .map(|k| (format!("{} {} kernel", k.isa, k.format), k.gb_s))
            .collect();
        for e in e2e.iter().filter(|e| e.threads == a.threads) {
            bars.push((
                // The decode bar's GB/s is tg128 × bytes per token, so its label can say the
                // same thing in tokens: tg128 against the ceiling, bytes per token ÷ bandwidth.
                format!(
                    "{} decode: {:.0} of {ceiling:.0} tok/s",
                    e.isa, e.tg128_tok_s
                ),
                e.tg128_tok_s * per_token / 1e9,
            ));
        }
        let title = format!(
            "{} threads: weights streamed per second vs the machine's read bandwidth",
            a.threads
        );
        write_output(
            path,
            &ch07_simd_parallel::roofline::svg(&title, &bars, best_bw),
        )?;
    }
    if a.json {
        println!(
            "{:#}",
            json!({ "chosen": isa.name(), "bandwidth": bandwidth, "kernels": kernels, "end_to_end": e2e,
                                  "bytes_per_token": per_token, "decode_ceiling_tok_s": ceiling })
        );
        return Ok(());
    }
    println!("read bandwidth (256 MiB, summed):");
    for b in &bandwidth {
        println!(
            "  {} thread(s): {:.1} GB/s",
            b["threads"],
            b["gb_s"].as_f64().unwrap_or(0.0)
        );
    }
    println!("\nmatrix-vector products on 64 MiB of weights (576 columns):");
    println!(
        "  {:<7} {:<5} {:>7} {:>9} {:>10}",
        "isa", "fmt", "threads", "GB/s", "GMAC/s"
    );
    for k in &kernels {
        println!(
            "  {:<7} {:<5} {:>7} {:>6.1} GB/s {:>10.2}",
            k.isa, k.format, k.threads, k.gb_s, k.gmac_s
        );
    }
    println!(
        "\nSmolLM2 Q4_1 end to end ({:.1} MB of weights read per token; at {best_bw:.1} GB/s the decode ceiling is {ceiling:.0} tok/s):",
        per_token / 1e6
    );
    for e in &e2e {
        println!(
            "  {:<7} {} thread(s): pp512 {:>6.1} tok/s   tg128 {:>6.1} tok/s",
            e.isa, e.threads, e.pp512_tok_s, e.tg128_tok_s
        );
    }
    Ok(())
}

/// [`ch01_tensors::files::write_output`], with this binary's error.
fn write_output(path: &std::path::Path, text: &str) -> Result<(), String> {
    ch01_tensors::files::write_output(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

pub fn compare(a: &Args) -> Result<(), String> {
    let (_, best) = detect()?;
    let (model, _) = load()?;
    let gguf = models::require(&models::smollm2_gguf())?;
    let c = compare::compare(&model, best, &gguf, a.threads, a.rounds)?;
    if let Some(path) = &a.markdown {
        let md = format!(
            "SmolLM2-135M Q4_1, {} threads, {} alternating rounds, medians ({} kernels):\n\n\
             | test | ours | llama.cpp | ours / llama.cpp |\n|---|---:|---:|---:|\n\
             | pp512 | {:.1} tok/s | {:.1} tok/s | {:.2}× |\n| tg128 | {:.1} tok/s | {:.1} tok/s | {:.2}× |\n",
            c.threads,
            c.rounds,
            c.isa,
            c.ours_pp512_tok_s,
            c.llama_cpp_pp512_tok_s,
            c.pp512_ratio,
            c.ours_tg128_tok_s,
            c.llama_cpp_tg128_tok_s,
            c.tg128_ratio
        );
        write_output(path, &md)?;
    }
    if a.json {
        println!("{:#}", json!(c));
        return Ok(());
    }
    println!(
        "SmolLM2-135M Q4_1, {} threads, {} alternating rounds, medians ({} kernels):",
        c.threads, c.rounds, c.isa
    );
    println!(
        "  {:<6} {:>14} {:>14} {:>8}",
        "test", "ours", "llama.cpp", "ratio"
    );
    println!(
        "  {:<6} {:>8.1} tok/s {:>8.1} tok/s {:>7.2}x",
        "pp512", c.ours_pp512_tok_s, c.llama_cpp_pp512_tok_s, c.pp512_ratio
    );
    println!(
        "  {:<6} {:>8.1} tok/s {:>8.1} tok/s {:>7.2}x",
        "tg128", c.ours_tg128_tok_s, c.llama_cpp_tg128_tok_s, c.tg128_ratio
    );
    Ok(())
}

pub fn profile(a: &Args) -> Result<(), String> {
    let (isa, k) = detect()?;
    let (model, _) = load()?;
    let steps = in_pool(a.threads, || -> Result<_, String> {
        Ok([
            ch07_simd_parallel::profile::profile(&model, k, 1, 64, a.runs)?,
            ch07_simd_parallel::profile::profile(&model, k, 512, 0, a.runs.min(2))?,
        ])
    })??;
    if let Some(path) = &a.markdown {
        let mut md = String::new();
        for p in &steps {
            let what = if p.tokens == 1 {
                format!("One decode step after {} positions", p.context)
            } else {
                format!("A {}-token prefill", p.tokens)
            };
            md += &format!(
                "{what}, {isa} kernels, {} threads:\n\n| op | time | share |\n|---|---:|---:|\n",
                a.threads
            );
            for o in &p.ops {
                md += &format!(
                    "| {} | {:.3} ms | {:.1}% |\n",
                    o.op,
                    o.ms,
                    100.0 * o.ms / p.total_ms
                );
            }
            md += &format!(
                "| **sum** | {:.3} ms | |\n| the whole step, timed alone | {:.3} ms | |\n\n",
                p.total_ms, p.forward_ms
            );
        }
        write_output(path, &md)?;
    }
    if a.json {
        println!(
            "{:#}",
            json!({ "isa": isa.name(), "threads": a.threads, "steps": steps })
        );
        return Ok(());
    }
    for p in &steps {
        let what = if p.tokens == 1 {
            format!("one decode step after {} positions", p.context)
        } else {
            format!("a {}-token prefill", p.tokens)
        };
        println!("{what}, {isa} kernels, {} threads:", a.threads);
        println!(
            "  {:<22} {:>10} {:>7} {:>12}",
            "op", "time", "share", "weights"
        );
        for o in &p.ops {
            let gb_s = if o.weight_bytes > 0 && p.tokens == 1 {
                format!("{:.1} GB/s", o.weight_bytes as f64 / (o.ms / 1e3) / 1e9)
            } else {
                String::new()
            };
            println!(
                "  {:<22} {:>7.3} ms {:>6.1}% {:>12}",
                o.op,
                o.ms,
                100.0 * o.ms / p.total_ms,
                gb_s
            );
        }
        println!(
            "  {:<22} {:>7.3} ms   (the whole step timed alone: {:.3} ms)\n",
            "sum", p.total_ms, p.forward_ms
        );
    }
    Ok(())
}

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
