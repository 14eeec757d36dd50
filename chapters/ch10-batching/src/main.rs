//! `ch10-batching`: many requests through one batched engine.

use std::path::PathBuf;
use std::process::ExitCode;

use ch01_tensors::models;

mod commands;
mod measure;

const USAGE: &str = "\
usage: ch10-batching run [-m FILE] --requests FILE.jsonl [--kv-mb MB] [--max-batch-tokens N]
                         [--no-prefix-sharing] [-t THREADS] [--json]
           every request at once through the scheduler; one JSON object a line in, e.g.
           {\"prompt\": \"...\", \"max_tokens\": 32, \"temperature\": 0.8, \"seed\": 1}
           (also top_k, top_p, min_p, repeat_penalty, stop: chapter 9's sampling fields)
       ch10-batching bench [-m FILE] --sequences N [--prompt 128] [--reply 128] [-t THREADS]
                         [--kv-mb MB] [--max-batch-tokens N] [--compare] [--json]
           a closed loop of N sequences: prefill and decode tok/s, time to first token
           and inter-token latency; --compare runs llama-batched-bench beside it
       ch10-batching curve [-m FILE] [--prompt 128] [--reply 128] [-t THREADS] [--compare]
                         [--svg FILE] [--json]
           decode tok/s at 1, 2, 4, 8 and 16 sequences beside the memory and arithmetic
           ceilings (and llama-batched-bench's, with --compare)
       ch10-batching kv-cost [-m FILE] --text FILE [-t THREADS] [--json]
           the memory and the perplexity of f32 and of f16 keys and values
       ch10-batching prefix [-m FILE] [--prompt 128] [-t THREADS] [--json]
           time to first token when the prompt's first --prompt tokens are cached, and not
       ch10-batching trace [--svg FILE]
           the scheduler on a fixed workload, step by step (no model needed)

options (defaults in brackets):
  -m, --model FILE        the GGUF file [SmolLM2-135M-Instruct Q4_1, fetched on first use]
  --kv-mb MB              the KV pool, in MB of keys and values as --kv stores them
                          [256; bench: what every sequence needs]
  --max-batch-tokens N    rows in one step, decode and prompt tokens together [512;
                          bench: every prompt at once, up to 8192]
  --kv f32|f16            how keys and values are stored: f16 is half the memory [f32]
  --no-prefix-sharing     never share the KV blocks of a common prompt prefix
  -t, --threads N         threads [the machine's physical cores]
  --json                  machine-readable output
  -h, --help              this text";

pub struct Args {
    pub command: String,
    pub model: Option<PathBuf>,
    pub requests: Option<PathBuf>,
    pub kv_mb: usize,
    pub kv_mb_given: bool,
    pub max_batch_tokens: Option<usize>,
    pub prefix_sharing: bool,
    pub threads: usize,
    pub json: bool,
    pub sequences: usize,
    pub prompt: usize,
    pub reply: usize,
    pub compare: bool,
    pub svg: Option<PathBuf>,
    pub text: Option<PathBuf>,
    pub kv: ch10_batching::seq::KvPrecision,
}

fn number<T: std::str::FromStr>(p: &mut lexopt::Parser, flag: &str) -> Result<T, lexopt::Error> {
    use lexopt::ValueExt;
    let v = p.value()?.string()?;
    v.parse()
        .map_err(|_| format!("{flag}: {v:?} is not a valid number").into())
}

fn parse_args() -> Result<Option<Args>, lexopt::Error> {
    use lexopt::prelude::*;
    let mut a = Args {
        command: String::new(),
        model: None,
        requests: None,
        kv_mb: 256,
        kv_mb_given: false,
        max_batch_tokens: None,
        prefix_sharing: true,
        threads: ch07_simd_parallel::cores::physical_cores(),
        json: false,
        sequences: 0,
        prompt: 128,
        reply: 128,
        compare: false,
        svg: None,
        text: None,
        kv: ch10_batching::seq::KvPrecision::F32,
    };
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next()? {
        match arg {
            Short('m') | Long("model") => a.model = Some(p.value()?.into()),
            Long("requests") => a.requests = Some(p.value()?.into()),
            Long("kv-mb") => {
                a.kv_mb = number(&mut p, "--kv-mb")?;
                a.kv_mb_given = true;
            }
            Long("max-batch-tokens") => {
                a.max_batch_tokens = Some(number(&mut p, "--max-batch-tokens")?)
            }
            Long("no-prefix-sharing") => a.prefix_sharing = false,
            Short('t') | Long("threads") => a.threads = number(&mut p, "--threads")?,
            Long("json") => a.json = true,
            Long("sequences") => a.sequences = number(&mut p, "--sequences")?,
            Long("prompt") => a.prompt = number(&mut p, "--prompt")?,
            Long("reply") => a.reply = number(&mut p, "--reply")?,
            Long("compare") => a.compare = true,
            Long("svg") => a.svg = Some(p.value()?.into()),
            Long("text") => a.text = Some(p.value()?.into()),
            Long("kv") => {
                use lexopt::ValueExt;
                a.kv = match p.value()?.string()?.as_str() {
                    "f32" => ch10_batching::seq::KvPrecision::F32,
                    "f16" => ch10_batching::seq::KvPrecision::F16,
                    other => return Err(format!("--kv: {other:?} is not f32 or f16").into()),
                }
            }
            Value(v) if a.command.is_empty() => {
                let v = v.string()?;
                match v.as_str() {
                    "run" | "bench" | "trace" | "curve" | "kv-cost" | "prefix" => a.command = v,
                    other => {
                        return Err(format!(
                            "unknown command {other:?} (run, bench, curve, kv-cost, prefix or trace)"
                        )
                        .into());
                    }
                }
            }
            Short('h') | Long("help") => return Ok(None),
            _ => return Err(arg.unexpected()),
        }
    }
    let check = |ok: bool, msg: &str| -> Result<(), lexopt::Error> {
        if ok {
            Ok(())
        } else {
            Err(msg.to_string().into())
        }
    };
    check(
        !a.command.is_empty(),
        "a command is needed: run, bench, curve, kv-cost, prefix or trace",
    )?;
    check(
        a.command != "kv-cost" || a.text.is_some(),
        "kv-cost needs --text FILE",
    )?;
    check(
        a.text.is_none() || a.command == "kv-cost",
        "--text goes with kv-cost",
    )?;
    check(
        a.command != "run" || a.requests.is_some(),
        "run needs --requests FILE.jsonl",
    )?;
    check(
        a.requests.is_none() || a.command == "run",
        "--requests goes with run",
    )?;
    check(
        a.command != "bench" || (1..=256).contains(&a.sequences),
        "bench needs --sequences N, 1 to 256",
    )?;
    check(
        (1..=65536).contains(&a.prompt) && (1..=65536).contains(&a.reply),
        "--prompt and --reply must be 1 to 65536",
    )?;
    check(
        !a.compare || matches!(a.command.as_str(), "bench" | "curve"),
        "--compare goes with bench or curve",
    )?;
    check(
        a.svg.is_none() || matches!(a.command.as_str(), "trace" | "curve"),
        "--svg goes with trace or curve",
    )?;
    check(
        (1..=256).contains(&a.threads),
        "--threads must be between 1 and 256",
    )?;
    check(
        (1..=1 << 16).contains(&a.kv_mb),
        "--kv-mb must be 1 to 65536",
    )?;
    check(
        a.max_batch_tokens
            .is_none_or(|n| (1..=ch10_batching::config::MAX_BATCH_TOKENS).contains(&n)),
        "--max-batch-tokens must be 1 to 8192",
    )?;
    Ok(Some(a))
}

pub fn model_path(a: &Args) -> Result<PathBuf, String> {
    match &a.model {
        Some(p) => Ok(p.clone()),
        None => {
            let p = models::smollm2_gguf();
            if !p.exists() {
                models::fetch("smollm2")?;
            }
            models::require(&p)
        }
    }
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
        "run" => commands::run(&args),
        "bench" => commands::bench(&args),
        "curve" => measure::curve(&args),
        "kv-cost" => measure::kv_cost(&args),
        "prefix" => measure::prefix(&args),
        _ => commands::trace(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
