//! `ch07-simd-parallel`: chapter 6's quantized SmolLM2 on SIMD kernels and both cores.
//!
//! ```text
//! ch07-simd-parallel                           the CPU's levels, and each kernel set on real weights
//! ch07-simd-parallel bench [--e2e] [--json]    bandwidth, kernel GB/s, pp512 and tg128
//! ch07-simd-parallel compare [--rounds N]      ours vs llama-bench, alternating, medians, ratios
//! ch07-simd-parallel generate --prompt TEXT -n N
//! ch07-simd-parallel regions [--threads N]     what one parallel region costs, team and rayon
//! ```

use std::process::ExitCode;

mod commands;
mod measure;

const USAGE: &str = "\
usage: ch07-simd-parallel [command] [options]

commands:
  levels     (the default) the instruction-set levels this CPU has, the one chosen, and every
             level's kernels on SmolLM2's real weights: the same bits as scalar, and how fast
  bench      the machine's read bandwidth, each kernel's GB/s and GMAC/s (1 and 2 threads),
             and end to end on SmolLM2 Q4_1: pp512 (prefill) and tg128 (decode) tok/s
  compare    llama.cpp's llama-bench and ours on the same weights and thread count,
             alternating rounds; medians and ratios (build llama-bench first:
             bash scripts/llamacpp.sh)
  profile    where one decode step (after 64 positions) and one 512-token prefill spend
             their time, op by op, against the whole step timed alone
  generate   greedy generation with the chosen kernels, streamed
  regions    what one parallel region costs over its tasks' own time, on the team and on
             rayon, at 1, 2, 4, ... threads up to --threads (no model needed)

options:
  --threads N     threads (default: the machine's physical cores)
  --e2e           bench: only the end-to-end part (pp512_tok_s, tg128_tok_s)
  --runs N        bench, profile, regions: runs per measurement (default 3)
  --rounds N      compare: rounds (default 5)
  --prompt TEXT   generate: the prompt (default \"The capital of France is\")
  -n N            generate: tokens to generate (default 32)
  --svg FILE      bench: also draw the roofline (GB/s of each kernel and of decode) as SVG
  --markdown FILE bench, compare, profile: also write the result as a Markdown table
  --json          machine-readable output
  -h, --help      this text

environment:
  LLM_BOOK_ISA=scalar|avx2|avx512   force a kernel level (an error if the CPU lacks it)";

/// Parsed command line.
pub struct Args {
    pub command: String,
    pub threads: usize,
    pub e2e: bool,
    pub runs: usize,
    pub rounds: usize,
    pub prompt: Option<String>,
    pub n: usize,
    pub json: bool,
    pub svg: Option<std::path::PathBuf>,
    pub markdown: Option<std::path::PathBuf>,
}

/// Upper bounds for the numeric flags: each sizes a loop or a pool.
const MAX_THREADS: usize = 256;
const MAX_RUNS: usize = 1000;
const MAX_NEW_TOKENS: usize = 1 << 16;

fn parse_args() -> Result<Option<Args>, lexopt::Error> {
    use lexopt::prelude::*;
    let mut a = Args {
        command: String::new(),
        threads: ch07_simd_parallel::cores::physical_cores(),
        e2e: false,
        runs: 3,
        rounds: 5,
        prompt: None,
        n: 32,
        json: false,
        svg: None,
        markdown: None,
    };
    let mut seen = Vec::new();
    let mut parser = lexopt::Parser::from_env();
    while let Some(arg) = parser.next()? {
        match &arg {
            Long(name) => seen.push(format!("--{name}")),
            Short(c) => seen.push(format!("-{c}")),
            Value(_) => {}
        }
        match arg {
            Value(cmd) if a.command.is_empty() => a.command = cmd.string()?,
            Long("threads") => a.threads = parser.value()?.parse()?,
            Long("e2e") => a.e2e = true,
            Long("runs") => a.runs = parser.value()?.parse()?,
            Long("rounds") => a.rounds = parser.value()?.parse()?,
            Long("prompt") => a.prompt = Some(parser.value()?.string()?),
            Short('n') => a.n = parser.value()?.parse()?,
            Long("json") => a.json = true,
            Long("svg") => a.svg = Some(parser.value()?.into()),
            Long("markdown") => a.markdown = Some(parser.value()?.into()),
            Short('h') | Long("help") => return Ok(None),
            _ => return Err(arg.unexpected()),
        }
    }
    if a.command.is_empty() {
        a.command = "levels".into();
    }
    let allowed: &[&str] = match a.command.as_str() {
        "levels" => &["--json"],
        "bench" => &[
            "--threads",
            "--e2e",
            "--runs",
            "--json",
            "--svg",
            "--markdown",
        ],
        "compare" => &["--threads", "--rounds", "--json", "--markdown"],
        "profile" => &["--threads", "--runs", "--json", "--markdown"],
        "generate" => &["--threads", "--prompt", "-n", "--json"],
        "regions" => &["--threads", "--runs", "--json"],
        other => {
            return Err(format!(
                "unknown command {other:?} (levels, bench, compare, profile, generate or regions)"
            )
            .into());
        }
    };
    if let Some(flag) = seen.iter().find(|f| !allowed.contains(&f.as_str())) {
        return Err(format!("{flag} does not go with `{}`", a.command).into());
    }
    if !(1..=MAX_THREADS).contains(&a.threads) {
        return Err(format!("--threads must be between 1 and {MAX_THREADS}").into());
    }
    if !(1..=MAX_RUNS).contains(&a.runs) || !(1..=MAX_RUNS).contains(&a.rounds) {
        return Err(format!("--runs and --rounds must be between 1 and {MAX_RUNS}").into());
    }
    if !(1..=MAX_NEW_TOKENS).contains(&a.n) {
        return Err(format!("-n must be between 1 and {MAX_NEW_TOKENS}").into());
    }
    Ok(Some(a))
}

fn main() -> ExitCode {
    ch01_tensors::pipe::quiet_when_closed();
    let args = match parse_args() {
        Ok(Some(a)) => a,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let result = match args.command.as_str() {
        "levels" => commands::levels(&args),
        "bench" => measure::bench(&args),
        "compare" => measure::compare(&args),
        "profile" => measure::profile(&args),
        "regions" => measure::regions(&args),
        _ => commands::generate(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
