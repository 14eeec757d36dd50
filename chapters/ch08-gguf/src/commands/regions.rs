//! `regions`: the parallel regions of one decode step, and the threads each gets.
//!
//! A decode step hands its work to the threads in regions (each layer's products, its
//! attention, the LM head). Every region costs a hand-out and a wait on top of its work, so
//! the step's synchronisation is about its regions times what one costs; and a region cut
//! into fewer tasks than there are threads leaves threads idle. This command counts both,
//! on the real model, at 1, 2, 4, … threads: it runs one decode step in a pool of each size
//! and records every region's tasks (chapter 7's `team::record_regions`).

use ch01_tensors::models;
use ch07_simd_parallel::pool::in_pool;
use ch07_simd_parallel::regions::{region_cost, thread_counts};
use ch07_simd_parallel::team::{Runner, record_regions};
use serde_json::json;

use super::model::open_model;
use crate::Args;

/// The prompt a step follows: this many tokens, then one decode step unrecorded (so the
/// team exists and its helpers are awake), then the one recorded.
const PROMPT: usize = 8;

/// One thread count's step.
struct Step {
    threads: usize,
    /// Each region's tasks, in the order the step ran them.
    tasks: Vec<usize>,
    /// One region's cost on this machine (µs over its tasks' own time), where the thread
    /// count fits in its cores; `None` past them, where spinning threads share cores and
    /// the number would mean nothing.
    region_us: Option<f64>,
}

pub fn regions(a: &Args) -> Result<(), String> {
    let m = open_model(a)?;
    let engine = m.engine()?;
    let prompt = ch08_gguf::bench::bench_prompt(&engine, PROMPT);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let counts = thread_counts(a.threads);
    let err = |e: ch08_gguf::Error| e.to_string();
    let mut steps = Vec::new();
    for threads in counts {
        let tasks = in_pool(threads, || -> Result<Vec<usize>, String> {
            let mut cache = engine.new_cache(PROMPT + 2).map_err(err)?;
            let logits = engine.forward(&mut cache, &prompt, 0).map_err(err)?;
            let next = ch04_forward::model::argmax(&logits) as u32;
            engine.forward(&mut cache, &[next], PROMPT).map_err(err)?;
            let (step, tasks) = record_regions(|| engine.forward(&mut cache, &[next], PROMPT + 1));
            step.map_err(err)?;
            Ok(tasks)
        })??;
        let region_us = if threads <= cores {
            Some(region_cost(Runner::Team, threads, 3)?)
        } else {
            None
        };
        steps.push(Step {
            threads,
            tasks,
            region_us,
        });
    }
    let shown = models::shown(&m.file.path);
    if a.json {
        let rows: Vec<_> = steps
            .iter()
            .map(|s| {
                json!({"threads": s.threads, "regions": s.tasks.len(), "tasks": s.tasks,
                       "region_us": s.region_us})
            })
            .collect();
        println!(
            "{:#}",
            json!({"file": shown, "cores": cores, "steps": rows})
        );
        return Ok(());
    }
    println!("{shown}: one decode step after {PROMPT} tokens, {cores} cores\n");
    println!(
        "| threads | regions | tasks a region (median, fewest, most) | regions short of threads | one region | all regions |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    for s in &steps {
        let mut sorted = s.tasks.clone();
        sorted.sort_unstable();
        let (fewest, median, most) = match sorted.as_slice() {
            [] => (0, 0, 0),
            v => (v[0], v[v.len() / 2], v[v.len() - 1]),
        };
        let short = s.tasks.iter().filter(|&&t| t < s.threads).count();
        let (one, all) = match s.region_us {
            Some(us) => (
                format!("{us:.1} µs"),
                format!("{:.2} ms", us * s.tasks.len() as f64 / 1e3),
            ),
            None => ("–".into(), "–".into()),
        };
        println!(
            "| {} | {} | {median} ({fewest}, {most}) | {short} | {one} | {all} |",
            s.threads,
            s.tasks.len()
        );
    }
    Ok(())
}
