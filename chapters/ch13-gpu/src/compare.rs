//! `ch13-gpu bench --compare`: ours against llama.cpp's Vulkan backend on the same file, in
//! one run: `rounds` rounds, each llama-bench once (every layer on the GPU, `-ngl 99`) and
//! then ours once ([`decode_bench::run`]), alternating, so a slow minute of the machine
//! falls on both; medians and ratios.
//!
//! llama-bench is the Vulkan build `scripts/llamacpp.sh --vulkan` makes at the fixtures'
//! version (or the one `LLM_BOOK_LLAMA_BENCH_VULKAN` names). It takes the machine's first
//! Vulkan GPU, ours the adapter `Gpu::open` picks: the same one where the machine has one
//! GPU. llama.cpp's Vulkan backend skips drivers that run on the CPU, such as lavapipe, so
//! on a machine without a GPU there is nothing to race, and the command says so.

use std::path::Path;

use ch07_simd_parallel::compare::{llama_bench_built, llama_bench_json, llama_bench_rate};
use ch07_simd_parallel::stats::median;
use serde_json::{Value, json};

use crate::decode_bench;
use crate::gpu::{Error, Gpu, Result};
use crate::model::GpuModel;

/// The most rounds `--rounds` takes.
pub const MAX_ROUNDS: usize = 20;

/// An error unless llama.cpp's Vulkan backend would run on `gpu`: it skips drivers that
/// run on the CPU.
pub fn raceable(gpu: &Gpu) -> Result<()> {
    if gpu.info.device_type == wgpu::DeviceType::Cpu {
        return Err(Error::NoAdapter(format!(
            "{} runs on the CPU, and llama.cpp's Vulkan backend skips such drivers: there is \
             no GPU here to race on",
            gpu.info.name
        )));
    }
    Ok(())
}

// ANCHOR: compare
/// The race on `gguf` (uploaded as `model`): `pp` prompt tokens and `tg` generated, `rounds`
/// times each; `progress` hears each round's numbers.
pub fn run(
    gpu: &Gpu,
    model: &GpuModel,
    gguf: &Path,
    (pp, tg): (usize, usize),
    rounds: usize,
    progress: &mut dyn FnMut(&str),
) -> Result<Value> {
    if !(1..=MAX_ROUNDS).contains(&rounds) {
        return Err(Error::Input(format!("--rounds: 1 to {MAX_ROUNDS}")));
    }
    raceable(gpu)?;
    let bin =
        llama_bench_built("LLM_BOOK_LLAMA_BENCH_VULKAN", &["--vulkan"]).map_err(Error::Gpu)?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (p, n) = (pp.to_string(), tg.to_string());
    let tests = ["-p", &p, "-n", &n, "-ngl", "99"];
    let mut rows = Vec::new(); // [ours pp, ours tg, llama.cpp pp, llama.cpp tg] a round
    for round in 1..=rounds {
        let theirs = llama_bench_json(&bin, gguf, threads, &tests).map_err(Error::Gpu)?;
        let lp = llama_bench_rate(&theirs, pp as u64, 0, "prompt").map_err(Error::Gpu)?;
        let lt = llama_bench_rate(&theirs, 0, tg as u64, "generation").map_err(Error::Gpu)?;
        let ours = decode_bench::run(gpu, model, pp, tg, Default::default(), &mut |_| {})?;
        let (op, ot) = (ours["pp_tok_s"].as_f64(), ours["tg_tok_s"].as_f64());
        let (Some(op), Some(ot)) = (op, ot) else {
            return Err(Error::Gpu("the bench gave no rates".into()));
        };
        progress(&format!(
            "round {round}/{rounds}: ours pp{pp} {op:.1} tg{tg} {ot:.1} tok/s; llama.cpp \
             pp{pp} {lp:.1} tg{tg} {lt:.1} tok/s"
        ));
        rows.push([op, ot, lp, lt]);
    }
    let mid = |i: usize| median(&mut rows.iter().map(|r| r[i]).collect::<Vec<_>>());
    let [op, ot, lp, lt] = [mid(0), mid(1), mid(2), mid(3)];
    Ok(json!({
        "adapter": gpu.info.name,
        "llama_bench": bin.display().to_string(),
        "rounds": rounds, "pp": pp, "tg": tg,
        "ours_pp_tok_s": op, "ours_tg_tok_s": ot,
        "llamacpp_pp_tok_s": lp, "llamacpp_tg_tok_s": lt,
        "pp_ratio": op / lp, "tg_ratio": ot / lt,
        "per_round": rows,
    }))
}
// ANCHOR_END: compare

/// The race as lines of text.
pub fn text(r: &Value) -> String {
    let f = |k: &str| r[k].as_f64().unwrap_or(0.0);
    format!(
        "{} against llama.cpp's Vulkan backend, medians of {} alternating rounds:\n  \
         pp{} ours {:.1} tok/s, llama.cpp {:.1} tok/s: {:.2}×\n  \
         tg{} ours {:.1} tok/s, llama.cpp {:.1} tok/s: {:.2}×\n",
        r["adapter"].as_str().unwrap_or_default(),
        r["rounds"],
        r["pp"],
        f("ours_pp_tok_s"),
        f("llamacpp_pp_tok_s"),
        f("pp_ratio"),
        r["tg"],
        f("ours_tg_tok_s"),
        f("llamacpp_tg_tok_s"),
        f("tg_ratio"),
    )
}
