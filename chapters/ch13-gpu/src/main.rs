//! `ch13-gpu`: the GPU's adapters, and how fast its product shaders read their weights.

use std::process::ExitCode;

use ch13_gpu::gpu::{self, Error, Gpu};
use ch13_gpu::{bench, info};

const USAGE: &str = "\
usage: ch13-gpu info [--json]
           every GPU adapter wgpu sees: name, backend, driver, the limits a compute
           shader meets, subgroup sizes, features
       ch13-gpu kernels [--secs S] [--json]
           each matrix-vector shader on random blocks at a 7B's shapes (4096x4096,
           11008x4096) and SmolLM2's (576x1536): time per product and GB/s of weights,
           many products in one submission and one submission each, beside the
           rate of a shader that only reads (the ceiling) and a device-to-device
           copy's; needs no model

options (defaults in brackets):
  --secs S      kernels: seconds each measurement runs, 0.01 to 10 [0.25]
  --json        one JSON object
  -h, --help    this text

environment:
  LLM_BOOK_GPU=NAME   the adapter whose name contains NAME [the first discrete GPU,
                      else integrated, else any: lavapipe runs on the CPU]
  WGPU_BACKEND=vulkan narrow the backends wgpu looks on";

struct Args {
    command: String,
    json: bool,
    secs: f64,
}

fn parse_args() -> Result<Option<Args>, lexopt::Error> {
    use lexopt::prelude::*;
    let mut a = Args {
        command: String::new(),
        json: false,
        secs: 0.25,
    };
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next()? {
        match arg {
            Long("json") => a.json = true,
            Long("secs") => a.secs = p.value()?.parse()?,
            Short('h') | Long("help") => return Ok(None),
            Value(v) if a.command.is_empty() => a.command = v.string()?,
            _ => return Err(arg.unexpected()),
        }
    }
    match a.command.as_str() {
        "info" | "kernels" => Ok(Some(a)),
        "" => Err("say what to do: info or kernels".into()),
        other => Err(format!("unknown command {other:?}: info or kernels").into()),
    }
}

fn run(a: &Args) -> Result<(), Error> {
    match a.command.as_str() {
        "info" => {
            let adapters = gpu::adapters();
            if adapters.is_empty() {
                return Err(Error::NoAdapter(format!(
                    "no GPU adapter found: {}",
                    gpu::HOW_TO_GET_ONE
                )));
            }
            let all: Vec<_> = adapters.iter().map(info::describe).collect();
            if a.json {
                println!("{}", serde_json::Value::Array(all));
            } else {
                for d in &all {
                    print!("{}", info::text(d));
                }
            }
        }
        _ => {
            bench::check_secs(a.secs)?;
            let gpu = Gpu::open()?;
            let json = a.json;
            let report = bench::run(&gpu, a.secs, |what| {
                if !json {
                    eprintln!("timing {what} on {}", gpu.info.name);
                }
            })?;
            if json {
                println!("{report}");
            } else {
                print!("{}", bench::text(&report));
            }
        }
    }
    Ok(())
}

fn main() -> ExitCode {
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
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Error::Input(e)) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
