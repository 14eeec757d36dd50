//! `ch05-kv-cache`: generation with a KV cache, compared with chapter 4's loop without one.
//!
//! ```text
//! ch05-kv-cache generate --prompt TEXT -n N     stream a greedy continuation, report prefill/decode speed
//! ch05-kv-cache compare  --prompt TEXT -n N     chapter 4's uncached loop vs the cached one
//! ch05-kv-cache session  --prompt A --then B    two turns in one session: the second reuses the first
//! ch05-kv-cache memory                          what the cache costs: per token, paged, windowed
//! ch05-kv-cache bench    [--svg FILE]           decode tokens/s vs context length, prefill speed
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

mod commands;

const USAGE: &str = "\
usage: ch05-kv-cache <command> [options]

commands:
  generate   greedy generation with the KV cache, streamed; prints prefill and decode tok/s
  compare    chapter 4's uncached loop and the cached one on the same prompt: both token
             sequences, whether they are identical, and the time of every step
  session    two turns in one session (--prompt, then --then): the second turn computes
             only its new tokens; checks the result against one pass over everything
  memory     the KV cache's cost per token (from config.json), paged vs contiguous
             allocation, and ring buffers for sliding-window layers (Gemma-3-270M)
  bench      decode tok/s with and without the cache at several context lengths, and a
             128-token prefill batched vs token by token

options:
  --model DIR        model directory (default: models/smollm2-135m-instruct/hf, fetched on first use)
  --prompt TEXT      the prompt (default \"The capital of France is\"; for session, a chat turn)
  --ids LIST         token ids instead of --prompt, comma-separated (generate, compare)
  --then TEXT        the second turn of session (default: a follow-up chat question)
  -n N               tokens to generate (default 32)
  --chunk N          prefill at most N tokens at a time (default 512)
  --ctx N            positions the cache holds (default 2048)
  --paged            generate with the paged cache (blocks of 16 positions) instead
  --positions LIST   bench: context lengths (default 16,64,256,512)
  --prefill N        bench: prompt length for the prefill measurement (default 128)
  --svg FILE         bench: also draw the decode curve as an SVG chart
  --markdown FILE    bench: also write the numbers as a Markdown table
  --from FILE        bench: measure nothing; redraw from a report saved by `bench --json`
  --json             machine-readable output
  -h, --help         this text";

struct Args {
    command: String,
    model: Option<PathBuf>,
    prompt: Option<String>,
    ids: Option<Vec<u32>>,
    then: Option<String>,
    n: usize,
    chunk: usize,
    ctx: usize,
    paged: bool,
    positions: Vec<usize>,
    prefill: usize,
    svg: Option<PathBuf>,
    from: Option<PathBuf>,
    markdown: Option<PathBuf>,
    json: bool,
}

fn parse_args() -> Result<Option<Args>, lexopt::Error> {
    use lexopt::prelude::*;
    let mut a = Args {
        command: String::new(),
        model: None,
        prompt: None,
        ids: None,
        then: None,
        n: 32,
        chunk: 512,
        ctx: 2048,
        paged: false,
        positions: vec![16, 64, 256, 512],
        prefill: 128,
        svg: None,
        from: None,
        markdown: None,
        json: false,
    };
    let mut parser = lexopt::Parser::from_env();
    while let Some(arg) = parser.next()? {
        match arg {
            Value(cmd) if a.command.is_empty() => a.command = cmd.string()?,
            Long("model") => a.model = Some(parser.value()?.into()),
            Long("prompt") => a.prompt = Some(parser.value()?.string()?),
            Long("ids") => {
                let list = parser.value()?.string()?;
                let ids = list
                    .split(',')
                    .map(|s| s.trim().parse::<u32>())
                    .collect::<Result<_, _>>()
                    .map_err(|e| format!("--ids {list:?}: {e} (expected e.g. 504,3575,282)"))?;
                a.ids = Some(ids);
            }
            Long("then") => a.then = Some(parser.value()?.string()?),
            Short('n') => a.n = parser.value()?.parse()?,
            Long("chunk") => a.chunk = parser.value()?.parse()?,
            Long("ctx") => a.ctx = parser.value()?.parse()?,
            Long("paged") => a.paged = true,
            Long("positions") => {
                let list = parser.value()?.string()?;
                a.positions = list
                    .split(',')
                    .map(|s| s.trim().parse::<usize>())
                    .collect::<Result<_, _>>()
                    .map_err(|e| format!("--positions {list:?}: {e} (expected e.g. 16,64,256)"))?;
            }
            Long("prefill") => a.prefill = parser.value()?.parse()?,
            Long("svg") => a.svg = Some(parser.value()?.into()),
            Long("markdown") => a.markdown = Some(parser.value()?.into()),
            Long("from") => a.from = Some(parser.value()?.into()),
            Long("json") => a.json = true,
            Short('h') | Long("help") => return Ok(None),
            _ => return Err(arg.unexpected()),
        }
    }
    if a.command.is_empty() {
        return Err("no command given (generate, compare, session, memory or bench)".into());
    }
    if a.n == 0 || a.chunk == 0 || a.ctx == 0 || a.prefill == 0 || a.positions.contains(&0) {
        return Err("-n, --chunk, --ctx, --prefill and --positions must be at least 1".into());
    }
    if a.n > a.ctx {
        return Err(format!(
            "-n {} is more tokens than the cache holds (--ctx {})",
            a.n, a.ctx
        )
        .into());
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
        "generate" => commands::generate(&args),
        "compare" => commands::compare(&args),
        "session" => commands::session(&args),
        "memory" => commands::memory_report(&args),
        "bench" => commands::bench_cmd(&args),
        other => {
            eprintln!("error: unknown command {other:?}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
