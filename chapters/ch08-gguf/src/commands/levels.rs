//! `levels`: the best kernel level's speed against every lower SIMD level this CPU runs, on the
//! same file, in alternating rounds. A CPU's best level must never decode slower than a level
//! below it: a level adds kernels only where they are faster, and runs the lower level's
//! everywhere else. A regression fails loudly (exit status 1).

use std::process::Command;

use ch07_simd_parallel::Isa;
use ch07_simd_parallel::stats::median;
use serde_json::json;

use crate::Args;

/// The least a best level may decode at, as a share of a lower level's speed, before it is a
/// regression: two percent, about what alternating rounds still move on a quiet machine.
const FLOOR: f64 = 0.98;

// ANCHOR: levels
/// One round a level: this program's `bench --json` run with `LLM_BOOK_ISA` forcing the
/// level, the levels' order turned by one each round; the medians of tg128 and pp512. A gate
/// that fails after `--rounds` rounds runs as many again and judges on all of them.
pub fn levels(a: &Args) -> Result<(), String> {
    // slowest first; the scalar level only where it is the one level (it is never the fast one)
    let mut levels = Isa::available();
    if levels.len() > 1 {
        levels.retain(|&l| l != Isa::Scalar);
    }
    let best = *levels.last().ok_or("no kernel level runs here")?;
    let exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
    let model = a
        .model
        .clone()
        .unwrap_or_else(ch01_tensors::models::smollm2_gguf);
    let mut runs: Vec<(Vec<f64>, Vec<f64>)> = vec![(Vec::new(), Vec::new()); levels.len()];
    let round = |round: usize, runs: &mut Vec<(Vec<f64>, Vec<f64>)>| -> Result<(), String> {
        for k in 0..levels.len() {
            let i = (k + round) % levels.len();
            let out = Command::new(&exe)
                .env("LLM_BOOK_ISA", levels[i].name())
                .args(["bench", "--json", "--runs", "3", "--threads"])
                .arg(a.threads.to_string())
                .arg("-m")
                .arg(&model)
                .output()
                .map_err(|e| format!("running {}: {e}", exe.display()))?;
            if !out.status.success() {
                let err = String::from_utf8_lossy(&out.stderr);
                return Err(format!("bench at {} failed: {}", levels[i], err.trim()));
            }
            let v: serde_json::Value = serde_json::from_slice(&out.stdout)
                .map_err(|e| format!("bench's JSON at {}: {e}", levels[i]))?;
            let rate = |k: &str| v[k].as_f64().ok_or(format!("bench's JSON has no {k}"));
            runs[i].0.push(rate("tg128_tok_s")?);
            runs[i].1.push(rate("pp512_tok_s")?);
        }
        Ok(())
    };
    // A shared host can put a lower level ahead for a few rounds by chance: a gate that
    // fails after the first rounds runs as many again and judges on all of them, so only a
    // regression that lasts fails it.
    let mut done = 0;
    let (med, slower) = loop {
        for r in done..done + a.rounds {
            round(r, &mut runs)?;
            eprintln!("round {}/{} done", r + 1, done + a.rounds);
        }
        done += a.rounds;
        let med: Vec<(f64, f64)> = runs
            .iter_mut()
            .map(|(tg, pp)| (median(tg), median(pp)))
            .collect();
        let best_tg = med[levels.len() - 1].0;
        let slower: Vec<String> = levels
            .iter()
            .zip(&med)
            .filter(|&(_, &(tg, _))| best_tg < FLOOR * tg)
            .map(|(isa, &(tg, _))| format!("{isa} ({tg:.1} tok/s)"))
            .collect();
        if slower.is_empty() || done > a.rounds {
            break (med, slower);
        }
        eprintln!(
            "{best} decodes below {FLOOR} of {} after {done} rounds: {} more before judging",
            slower.join(", "),
            a.rounds
        );
    };
    let (best_tg, best_pp) = med[levels.len() - 1];
    // ANCHOR_END: levels
    if a.json {
        let rows: Vec<_> = levels
            .iter()
            .zip(&med)
            .map(|(isa, &(tg, pp))| {
                json!({"level": isa.name(), "tg128_tok_s": tg, "pp512_tok_s": pp,
                       "best_over_level_tg128": best_tg / tg, "best_over_level_pp512": best_pp / pp})
            })
            .collect();
        println!(
            "{:#}",
            json!({"file": ch01_tensors::models::shown(&model), "best": best.name(),
                                "threads": a.threads, "rounds": done, "levels": rows})
        );
    } else {
        let table = table(&model, best, &levels, &med, a.threads, done);
        print!("{table}");
        if let Some(path) = &a.markdown {
            std::fs::write(path, &table).map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    if slower.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the best level, {best}, decodes at {best_tg:.1} tok/s: below {FLOOR} of {}: a regression",
            slower.join(", ")
        ))
    }
}

/// The result as a Markdown table, the best level's speed over each level's.
fn table(
    model: &std::path::Path,
    best: Isa,
    levels: &[Isa],
    med: &[(f64, f64)],
    threads: usize,
    rounds: usize,
) -> String {
    let (best_tg, best_pp) = med[levels.len() - 1];
    let mut s = format!(
        "{}, {} threads, {} alternating rounds, medians; each level forced with LLM_BOOK_ISA:\n\n\
         | level | tg128 | pp512 | {best} / level, tg128 | {best} / level, pp512 |\n|---|---:|---:|---:|---:|\n",
        model.file_name().unwrap_or_default().to_string_lossy(),
        threads,
        rounds
    );
    for (isa, &(tg, pp)) in levels.iter().zip(med).rev() {
        s += &format!(
            "| {isa} | {tg:.1} tok/s | {pp:.1} tok/s | {:.2}× | {:.2}× |\n",
            best_tg / tg,
            best_pp / pp
        );
    }
    s
}
