//! `cargo run --release -p ch01-tensors`: the chapter's ideas on real numbers.
//!
//! 1. Views: a transpose, a narrow and a row of one small tensor, sharing its storage.
//! 2. Matmul: naive i-j-k vs i-k-j vs blocked, in GFLOP/s on this machine.
//! 3. Safetensors: open SmolLM2's weights through mmap (or a small file we write, when
//!    the model has not been fetched) and list what is inside.
//!
//! Each has its own file: `views.rs`, `timing.rs` (with exercise 3's `--mine`), and
//! `listing.rs`; this one reads the options and runs them in order. `--markdown FILE`
//! measures the book's speed table instead (`measure.rs`).

use ch01_tensors::models;
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

mod listing;
mod measure;
mod timing;
mod views;

use listing::demo_safetensors;
use timing::{demo_matmul, time_mine};
use views::demo_views;

const USAGE: &str = "\
usage: ch01-tensors [--size N]... [--sizes A,B,...] [--model PATH] [--fetch] [--json]
       ch01-tensors --mine [--size N]...
       ch01-tensors --markdown FILE [--sizes A,B,...]

  --size N         matmul size to benchmark (N×N · N×N); repeatable. Default: 256 and 512
  --sizes A,B,...  several sizes at once, e.g. --sizes 128,256,512
  --model PATH     safetensors file to load (default: SmolLM2's model.safetensors)
  --fetch          fetch and convert SmolLM2 first if it is missing (runs scripts/models.sh)
  --json           print every number as one JSON object instead of text
  --mine           exercise 3: time YOUR matmul_ikj (src/exercises.rs) against the chapter's
  --markdown FILE  measure the book's table instead of the demos: the matmul kernels and matvec
                   at each size, GFLOP/s, best of at least 3 runs, written to FILE as Markdown
  -h, --help       this help";

const MAX_SIZE: usize = 2048; // the naive kernel needs about a minute at 2048

struct Args {
    sizes: Vec<usize>,
    model: Option<PathBuf>,
    fetch: bool,
    json: bool,
    mine: bool,
    markdown: Option<PathBuf>,
}

fn parse_args() -> Result<Args, lexopt::Error> {
    use lexopt::prelude::*;
    let mut args = Args {
        sizes: Vec::new(),
        model: None,
        fetch: false,
        json: false,
        mine: false,
        markdown: None,
    };
    let mut parser = lexopt::Parser::from_env();
    while let Some(arg) = parser.next()? {
        match arg {
            Long("size") => args.sizes.push(parse_size(&parser.value()?.string()?)?),
            Long("sizes") => {
                for s in parser.value()?.string()?.split(',') {
                    args.sizes.push(parse_size(s)?);
                }
            }
            Long("model") => args.model = Some(parser.value()?.into()),
            Long("fetch") => args.fetch = true,
            Long("json") => args.json = true,
            Long("mine") => args.mine = true,
            Long("markdown") => args.markdown = Some(parser.value()?.into()),
            Short('h') | Long("help") => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ => return Err(arg.unexpected()),
        }
    }
    if args.mine && args.markdown.is_some() {
        return Err("--mine and --markdown each choose what to time; give one".into());
    }
    if args.sizes.is_empty() {
        args.sizes = vec![256, 512];
    }
    Ok(args)
}

fn parse_size(s: &str) -> Result<usize, lexopt::Error> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_SIZE).contains(&n) => Ok(n),
        _ => {
            Err(format!("invalid size {s:?}: expected a whole number from 1 to {MAX_SIZE}").into())
        }
    }
}

fn main() -> ExitCode {
    ch01_tensors::pipe::quiet_when_closed();
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("error: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    if args.mine {
        return time_mine(&args.sizes);
    }
    if let Some(path) = &args.markdown {
        ch01_tensors::files::check_output(path)?;
        let table = measure::markdown(&args.sizes)?;
        ch01_tensors::files::write_output(path, &table)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        println!("wrote {}", path.display());
        return Ok(());
    }
    let text = !args.json;
    let views = demo_views(text)?;
    let matmul = demo_matmul(&args.sizes, text)?;
    let model = match (&args.model, args.fetch) {
        (Some(path), _) => Some(path.clone()),
        (None, true) => Some(models::ensure_smollm2_hf()?.join("model.safetensors")),
        (None, false) => {
            let path = models::smollm2_hf_dir().join("model.safetensors");
            path.exists().then_some(path)
        }
    };
    let loaded = demo_safetensors(model, text)?;
    if args.json {
        let all = json!({ "views": views, "matmul": matmul, "safetensors": loaded });
        println!("{}", serde_json::to_string_pretty(&all)?);
    }
    Ok(())
}
