//! The binary's measuring commands: `bench` (bandwidth, kernel GB/s, pp512 and tg128),
//! `compare` (against llama-bench, alternating rounds) and `profile` (time per operation).

use ch01_tensors::models;
use ch06_quantization::{Format, Kernels};
use ch07_simd_parallel::bench::{end_to_end, kernel_rate, prefill_rates, read_bandwidth};
use ch07_simd_parallel::kernels::{detect, for_isa};
use ch07_simd_parallel::pool::in_pool;
use ch07_simd_parallel::{Isa, compare};
use serde_json::json;

use crate::Args;
use crate::commands::load;

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
    // a prefill's products: four tokens a dot against eight tokens a register
    let (four, eight) = prefill_rates(best, a.runs)?;
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
        md += &format!(
            "| {isa} q4_1 prefill product, 64 tokens: four a dot / eight a register | 1 | \
             {four:.1} / {eight:.1} GMAC/s ({:.2}×) |\n",
            eight / four
        );
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
                    "prefill_gmac_s": { "four_a_dot": four, "eight_a_register": eight },
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
        "\na Q4_1 prefill product (1536 × 576, 64 tokens, 1 thread, {isa}): four tokens a dot \
         {four:.1} GMAC/s, eight a register {eight:.1} GMAC/s ({:.2}x)",
        eight / four
    );
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

/// `regions`: what one parallel region costs, on the team and on rayon.
pub fn regions(a: &Args) -> Result<(), String> {
    let costs = ch07_simd_parallel::regions::region_costs(a.threads, a.runs)?;
    let (machine, task_us) = (
        ch05_kv_cache::bench::machine(),
        ch07_simd_parallel::regions::TASK.as_micros(),
    );
    if a.json {
        let out = json!({"cpu": machine, "runs": a.runs, "task_us": task_us, "regions": costs});
        println!("{out:#}");
        return Ok(());
    }
    println!(
        "What one region costs over its tasks' {task_us} µs, one task a thread ({machine}), median of {} runs:\n",
        a.runs
    );
    println!("| threads | team | rayon |\n|---:|---:|---:|");
    for c in &costs {
        println!(
            "| {} | {:.2} µs | {:.2} µs |",
            c.threads, c.team_us, c.rayon_us
        );
    }
    Ok(())
}
