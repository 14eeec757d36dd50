//! Ours against llama.cpp's `llama-bench`, in one run: same weights, same thread count,
//! alternating rounds, medians, ratios.
//!
//! llama-bench is built by `scripts/llamacpp.sh` at the version the fixtures were made with.
//! It reads the shipped GGUF; ours runs chapter 6's in-memory Q4_1 model, whose blocks are
//! the shipped file's bit for bit (chapter 6 tests it), so both multiply the same numbers.

use std::path::{Path, PathBuf};
use std::process::Command;

use ch06_quantization::{Kernels, QModel};
use serde::Serialize;

use crate::bench::end_to_end;
use crate::stats::median;

/// The llama-bench binary: `$LLM_BOOK_LLAMA_BENCH` when set (a build carried to a machine
/// that has no source tree, as `scripts/cpu-scale.sh` does), else the one
/// `scripts/llamacpp.sh` built, or an error saying how to build it.
pub fn llama_bench_path() -> Result<PathBuf, String> {
    llama_bench_built("LLM_BOOK_LLAMA_BENCH", &[])
}

/// A llama-bench binary: the one the environment variable `var` names when set, else the one
/// `scripts/llamacpp.sh` built with `flags` (`--vulkan`: chapter 13's GPU build), or an
/// error saying how to build it.
pub fn llama_bench_built(var: &str, flags: &[&str]) -> Result<PathBuf, String> {
    if let Some(bin) = std::env::var_os(var).filter(|v| !v.is_empty()) {
        let bin = PathBuf::from(bin);
        if !bin.is_file() {
            return Err(format!(
                "{var} names {}, which is not a file",
                bin.display()
            ));
        }
        return Ok(bin);
    }
    let script = ch01_tensors::models::workspace_root().join("scripts/llamacpp.sh");
    let out = Command::new("bash")
        .arg(&script)
        .args(flags)
        .arg("--path")
        .output()
        .map_err(|e| format!("running {}: {e}", script.display()))?;
    if !out.status.success() {
        let build = ["bash scripts/llamacpp.sh"].iter().chain(flags).copied();
        return Err(format!(
            "llama-bench is not built: run `{}` once (about 15 minutes)",
            build.collect::<Vec<_>>().join(" ")
        ));
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// What to say when one of llama.cpp's tools (`bin`) did not succeed: its last line of
/// output, and, when a signal ended it (an illegal instruction from a build for another CPU,
/// or a crash), which tool it was and how to rebuild it for this machine.
pub fn llama_tool_failed(bin: &Path, status: std::process::ExitStatus, stderr: &[u8]) -> String {
    let last = String::from_utf8_lossy(stderr);
    let last = last.lines().last().unwrap_or("").to_string();
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            let name = match sig {
                4 => " (SIGILL: an instruction this CPU does not have)",
                11 => " (SIGSEGV)",
                6 => " (SIGABRT)",
                _ => "",
            };
            return format!(
                "{} crashed with signal {sig}{name}: it may have been built for another CPU; \
                 rebuild llama.cpp for this one with `bash scripts/llamacpp.sh` (last output: {last:?})",
                bin.display()
            );
        }
    }
    format!("{} failed ({status}): {last}", bin.display())
}

/// One llama-bench run of `gguf` on `threads` with the test flags `tests` (`-p 512 -n 128`,
/// say): the JSON it prints, one object per test.
pub fn llama_bench_json(
    bin: &Path,
    gguf: &Path,
    threads: usize,
    tests: &[&str],
) -> Result<serde_json::Value, String> {
    let out = Command::new(bin)
        .args(["-m"])
        .arg(gguf)
        .args(tests)
        .args(["-r", "1", "-o", "json", "-t", &threads.to_string()])
        .output()
        .map_err(|e| format!("running {}: {e}", bin.display()))?;
    if !out.status.success() {
        return Err(llama_tool_failed(bin, out.status, &out.stderr));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("llama-bench's JSON: {e}"))
}

/// The tokens per second of the test with `prompt` prompt and `generated` generated tokens
/// in llama-bench's JSON `v` (`name` for the message when it is missing).
pub fn llama_bench_rate(
    v: &serde_json::Value,
    prompt: u64,
    generated: u64,
    name: &str,
) -> Result<f64, String> {
    v.as_array()
        .and_then(|a| {
            a.iter().find(|t| {
                t["n_prompt"].as_u64() == Some(prompt) && t["n_gen"].as_u64() == Some(generated)
            })
        })
        .and_then(|t| t["avg_ts"].as_f64())
        .ok_or_else(|| format!("llama-bench printed no {name} result"))
}

/// One llama-bench run of `gguf`: (pp512, tg128) tokens per second.
pub fn llama_bench_once(bin: &Path, gguf: &Path, threads: usize) -> Result<(f64, f64), String> {
    let v = llama_bench_json(bin, gguf, threads, &["-p", "512", "-n", "128"])?;
    Ok((
        llama_bench_rate(&v, 512, 0, "pp512")?,
        llama_bench_rate(&v, 0, 128, "tg128")?,
    ))
}

/// One llama-bench run of `gguf`: tg128 after `depth` tokens already in the cache
/// (`-d`), tokens per second.
pub fn llama_bench_depth(
    bin: &Path,
    gguf: &Path,
    threads: usize,
    depth: usize,
) -> Result<f64, String> {
    let depth = depth.to_string();
    let v = llama_bench_json(bin, gguf, threads, &["-p", "0", "-n", "128", "-d", &depth])?;
    llama_bench_rate(&v, 0, 128, "tg128 at depth")
}

/// The side-by-side result.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub threads: usize,
    pub rounds: usize,
    pub isa: &'static str,
    pub ours_pp512_tok_s: f64,
    pub ours_tg128_tok_s: f64,
    pub llama_cpp_pp512_tok_s: f64,
    pub llama_cpp_tg128_tok_s: f64,
    pub pp512_ratio: f64,
    pub tg128_ratio: f64,
    /// Every round's numbers, in order: (ours pp, ours tg, llama.cpp pp, llama.cpp tg).
    pub per_round: Vec<[f64; 4]>,
}

impl Comparison {
    /// The medians and ratios of [`race_rounds`]'s rounds.
    pub fn of_rounds(threads: usize, isa: &'static str, per_round: Vec<[f64; 4]>) -> Comparison {
        let med = |i: usize| median(&mut per_round.iter().map(|r| r[i]).collect::<Vec<_>>());
        let (op, ot, lp, lt) = (med(0), med(1), med(2), med(3));
        Comparison {
            threads,
            rounds: per_round.len(),
            isa,
            ours_pp512_tok_s: op,
            ours_tg128_tok_s: ot,
            llama_cpp_pp512_tok_s: lp,
            llama_cpp_tg128_tok_s: lt,
            pp512_ratio: op / lp,
            tg128_ratio: ot / lt,
            per_round,
        }
    }
}

// ANCHOR: compare
/// `rounds` rounds, each llama-bench (`bin`) once on `gguf` and then ours once (`ours`
/// gives its pp512 and tg128), alternating, each printed as it ends: every round's
/// (ours pp512, ours tg128, llama.cpp pp512, llama.cpp tg128), tokens per second.
pub fn race_rounds(
    bin: &Path,
    gguf: &Path,
    threads: usize,
    rounds: usize,
    ours: &mut dyn FnMut() -> Result<(f64, f64), String>,
) -> Result<Vec<[f64; 4]>, String> {
    let mut per_round = Vec::new();
    for round in 0..rounds {
        let (lp, lt) = llama_bench_once(bin, gguf, threads)?;
        let (op, ot) = ours()?;
        eprintln!(
            "round {}/{rounds}: ours pp512 {op:.1} tg128 {ot:.1} tok/s; llama.cpp pp512 {lp:.1} tg128 {lt:.1} tok/s",
            round + 1
        );
        per_round.push([op, ot, lp, lt]);
    }
    Ok(per_round)
}

/// `rounds` rounds, each llama-bench once and ours once, alternating; medians and ratios.
pub fn compare(
    model: &QModel,
    k: &'static dyn Kernels,
    gguf: &Path,
    threads: usize,
    rounds: usize,
) -> Result<Comparison, String> {
    let bin = llama_bench_path()?;
    end_to_end(model, k, threads, 1, false)?; // warm ours up once
    let per_round = race_rounds(&bin, gguf, threads, rounds, &mut || {
        let r = end_to_end(model, k, threads, 1, false)?;
        Ok((r.pp512_tok_s, r.tg128_tok_s))
    })?;
    Ok(Comparison::of_rounds(threads, k.name(), per_round))
}
// ANCHOR_END: compare
