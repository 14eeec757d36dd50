//! `regions`: the parallel regions of one decode step, and the threads each gets.
//!
//! A decode step hands its work to the threads in regions (each layer's products, its
//! attention, the LM head). Every region costs a hand-out and a wait on top of its work, so
//! the step's synchronisation is about its regions times what one costs; and a region cut
//! into fewer tasks than there are threads leaves threads idle. This command counts both,
//! on the real model, at 1, 2, 4, … threads: it runs decode steps in a pool of each size
//! and records every region's tasks (chapter 7's `team::record_step`).
//!
//! It also times each kind of part of the step (a product, the attention; [`step_parts`]),
//! the median of [`STEPS`] steps, against the step's wall time, and prints the lines of
//! `lscpu` that say how the CPUs are cores: whether sixteen of them are sixteen cores or
//! eight with two hyperthreads each decides what a thread past the eighth can add.

use ch01_tensors::models;
use ch07_simd_parallel::pool::in_pool;
use ch07_simd_parallel::regions::{region_cost, thread_counts};
use ch07_simd_parallel::team::Runner;
use ch08_gguf::step_parts::{self, KINDS, StepParts, median};
use serde_json::json;

use super::model::open_model;
use crate::Args;

/// The prompt a step follows: this many tokens, then one decode step unrecorded (so the
/// team exists and its helpers are awake), then the one recorded.
const PROMPT: usize = 8;

/// Decode steps timed at each thread count; their medians are reported.
pub const STEPS: usize = 7;

/// One thread count's steps.
struct Step {
    threads: usize,
    /// Each region's tasks in the first step, in the order the step ran them.
    tasks: Vec<usize>,
    /// Every step recorded.
    steps: Vec<StepParts>,
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
        let recorded = in_pool(threads, || {
            step_parts::record_decode(&engine, &prompt, STEPS)
        })?;
        let recorded = recorded.map_err(err)?;
        let tasks = recorded
            .first()
            .map(|s| s.regions.clone())
            .unwrap_or_default();
        let region_us = if threads <= cores {
            Some(region_cost(Runner::Team, threads, 3)?)
        } else {
            None
        };
        steps.push(Step {
            threads,
            tasks,
            steps: recorded,
            region_us,
        });
    }
    let shown = models::shown(&m.file.path);
    let topology = topology();
    if a.json {
        let rows: Vec<_> = steps
            .iter()
            .map(|s| {
                let kinds: serde_json::Map<String, serde_json::Value> = kinds(&s.steps)
                    .into_iter()
                    .map(|k| {
                        (
                            k.to_string(),
                            json!(median_us(&s.steps, |p| p.seconds_of(k))),
                        )
                    })
                    .collect();
                json!({"threads": s.threads, "regions": s.tasks.len(), "tasks": s.tasks,
                       "region_us": s.region_us, "kinds_us": kinds,
                       "step_us": median_us(&s.steps, |p| p.seconds),
                       "rest_us": median_us(&s.steps, |p| p.seconds - p.parts_seconds())})
            })
            .collect();
        println!(
            "{:#}",
            json!({"file": shown, "cores": cores, "topology": topology, "steps": rows})
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
    print_parts(&steps);
    println!(
        "\nThe CPUs (`lscpu`):\n\n```text\n{}\n```",
        topology.join("\n")
    );
    Ok(())
}

/// The kinds of part the steps have: [`KINDS`] in their order, then any other.
fn kinds(steps: &[StepParts]) -> Vec<&'static str> {
    let mut kinds: Vec<&'static str> = KINDS.to_vec();
    for p in steps.iter().flat_map(|s| &s.parts) {
        if !kinds.contains(&p.kind) {
            kinds.push(p.kind);
        }
    }
    kinds
}

/// The median over `steps` of `f`'s seconds, in microseconds.
fn median_us(steps: &[StepParts], f: impl Fn(&StepParts) -> f64) -> f64 {
    median(steps.iter().map(|s| f(s) * 1e6).collect())
}

/// The second table: each kind's time in a step at each thread count (the median of the
/// steps), with the most tasks its regions had; the rest of the step; the step.
fn print_parts(steps: &[Step]) {
    let all: Vec<StepParts> = steps.iter().flat_map(|s| s.steps.clone()).collect();
    println!(
        "\nWhere a step's time goes: each kind's parts together, from the caller's start to its \
         join, µs a step (the most tasks of its regions), the median of {STEPS} steps:\n"
    );
    let head: Vec<String> = steps
        .iter()
        .map(|s| match s.threads {
            1 => "1 thread".to_string(),
            t => format!("{t} threads"),
        })
        .collect();
    println!("| part | {} |", head.join(" | "));
    println!("|---|{}", "---:|".repeat(steps.len()));
    let row = |name: &str, cell: &dyn Fn(&[StepParts]) -> String| {
        let cells: Vec<String> = steps.iter().map(|s| cell(&s.steps)).collect();
        println!("| {name} | {} |", cells.join(" | "));
    };
    for kind in kinds(&all) {
        row(kind, &|s| match s.first().and_then(|f| f.tasks_of(kind)) {
            None => "–".into(),
            Some(t) => format!("{:.0} µs ({t})", median_us(s, |p| p.seconds_of(kind))),
        });
    }
    row("all parts", &|s| {
        format!("{:.0} µs", median_us(s, StepParts::parts_seconds))
    });
    row("the rest", &|s| {
        format!("{:.0} µs", median_us(s, |p| p.seconds - p.parts_seconds()))
    });
    row("the step", &|s| {
        format!("{:.0} µs", median_us(s, |p| p.seconds))
    });
}

/// The lines of `lscpu` that say how the CPUs are cores and sockets, and which CPUs share
/// CPU 0's core (from `/sys`); a line saying what could not be read otherwise.
fn topology() -> Vec<String> {
    const KEEP: [&str; 6] = [
        "Model name",
        "CPU(s):",
        "Thread(s) per core",
        "Core(s) per socket",
        "Socket(s)",
        "NUMA node(s)",
    ];
    let mut lines: Vec<String> = match std::process::Command::new("lscpu").output() {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| KEEP.iter().any(|k| l.trim_start().starts_with(k)))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect(),
        _ => vec!["lscpu: not found or failed".into()],
    };
    let siblings = "/sys/devices/system/cpu/cpu0/topology/thread_siblings_list";
    lines.push(match std::fs::read_to_string(siblings) {
        Ok(s) => format!("CPU 0's core runs CPUs: {}", s.trim()),
        Err(e) => format!("{siblings}: {e}"),
    });
    lines
}
