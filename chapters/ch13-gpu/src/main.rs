//! `ch13-gpu`: text from a GGUF model on the GPU, the GPU's adapters, and how fast its
//! product shaders read their weights.

use std::process::ExitCode;

use ch09_generate::sampling::SAMPLING_FLAGS;
use ch13_gpu::gpu::{self, Error, Gpu};
use ch13_gpu::{bench, info, tile_bench};

mod commands;

const USAGE: &str = "\
usage: ch13-gpu [-m FILE] -p TEXT [-n N] [sampling options] [--json]
           generates as ch09-generate does: the prompt as a prefill (a submission for
           each 256 tokens, the products tiled), then each token one submission; greedy
           (--temp 0) reads back the GPU's argmax, two steps in flight, other
           sampling the logits
       ch13-gpu bench [-m FILE] [--pp N] [--tg N] [--per-dispatch] [--profile] [--json]
           the model on the GPU: pp prompt tokens as a prefill, then tg greedy
           tokens from an empty cache (as llama-bench's tg), one submission each,
           two steps in flight, then a step at a time (the host waiting for each
           token), what recording a step costs the host, and the dispatches a
           token; with --per-dispatch the tg tokens again
           with a submission per dispatch, with --profile again timed dispatch by
           dispatch by the GPU's clock (where a step's time goes)
       ch13-gpu bench --compare [-m FILE] [--pp N] [--tg N] [--rounds R] [--json]
           ours against llama.cpp's Vulkan llama-bench (scripts/llamacpp.sh --vulkan)
           on the same file, alternating rounds, medians and ratios; needs a GPU
           (llama.cpp skips CPU drivers such as lavapipe)
       ch13-gpu logits [-m FILE] --ids IDS [--top K] [--json]
           the ids teacher-forced, a decode step each: the GPU's argmax and top K
           logits after each, as ch08-gguf logits prints the CPU engine's (with
           LLM_BOOK_GPU_REDUCTION=in-order, the same bits)
       ch13-gpu info [--json]
           every GPU adapter wgpu sees: name, backend, driver, the limits a compute
           shader meets, subgroup sizes, features
       ch13-gpu kernels [--secs S] [--json]
           each matrix-vector shader on random blocks at a 7B's shapes (4096x4096,
           11008x4096) and SmolLM2's (576x1536): time per product and GB/s of weights,
           many products in one submission and one submission each, in every
           layout, beside the rate of a shader that only reads (the ceiling) and
           a device-to-device copy's, and what an empty dispatch costs; needs no
           model
       ch13-gpu tiles [--format F] [--rows R] [--cols C] [--tokens T] [--secs S] [--json]
           the tiled product of T tokens (one dispatch) against T matrix-vector
           dispatches, on one R x C matrix of random F blocks [q4_0 2048 2048 512]

options (defaults in brackets):
  -m, --model FILE        the GGUF file [SmolLM2-135M-Instruct Q4_1]
  -p, --prompt TEXT       the prompt (special tokens such as <|im_start|> are parsed)
  -n, --n-predict N       tokens to generate at most, 1 to 65536 [128]
  --chat                  treat the prompt as a user turn, in the model's chat template
  --system TEXT           with --chat: a system message first
  --temp T                temperature; 0 is greedy [0.8]
  --top-k K, --top-p P, --min-p P, --repeat-penalty R, --repeat-last-n N,
  --frequency-penalty F, --presence-penalty P, --seed S
                          chapter 9's sampling chain, with its defaults
  --stop TEXT             stop when TEXT appears (up to 16 times)
  --pp N, --tg N          bench: prompt tokens and generated tokens, 1 to 4096 [32, 32]
  --per-dispatch          bench: also time a submission per dispatch
  --profile               bench: the tg tokens again, timed dispatch by dispatch by the
                          GPU's clock, summed by what each dispatch is
  --compare, --rounds R   bench: race llama.cpp's Vulkan backend, R rounds [3]
  --secs S                kernels, tiles: seconds each measurement runs, 0.01 to 10 [0.25]
  --ids IDS, --top K      logits: comma-separated token ids (at most 4096), and how many
                          of the highest logits to show, 1 to 1000 [5]
  --json                  one JSON object (generate: prompt_ids, generated_ids, text,
                          stop_reason, adapter, dispatches_per_token, timings)
  -h, --help              this text

environment:
  LLM_BOOK_GPU=NAME   the adapter whose name contains NAME [the first discrete GPU,
                      else integrated, else any: lavapipe runs on the CPU]
  WGPU_BACKEND=vulkan narrow the backends wgpu looks on
  LLM_BOOK_GPU_REDUCTION=in-order
                      the products add in the CPU's order: the CPU engine's logits, bit
                      for bit (or workgroup, subgroup) [the adapter's own: subgroup
                      where it has them, else workgroup]
  LLM_BOOK_GPU_LAYOUT=staged-2
                      how the products' lanes read their blocks, staged through
                      workgroup memory or direct, and the rows each lane takes:
                      staged-1, staged-2, direct-1, direct-2, direct-4, direct-8 (the
                      same bits), or tuned: the fastest of six by the model's own
                      step, and the tiled products' tiling by its prefill [tuned on a
                      GPU, direct-2 and one token an invocation on a CPU driver]";

struct Args {
    command: String,
    json: bool,
    secs: f64,
    pp: usize,
    tg: usize,
    extra: ch13_gpu::decode_bench::Extra,
    compare: Option<usize>, // bench --compare: its rounds
    tiles: tile_bench::Shape,
    generate: commands::Generate,
    ids: Option<Vec<u32>>, // logits
    top: usize,
}

/// `--ids`: the most a `logits` run takes (each a decode step).
const MAX_IDS: usize = 4096;

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
        json: false,
        secs: 0.25,
        pp: 32,
        tg: 32,
        extra: Default::default(),
        compare: None,
        tiles: tile_bench::Shape {
            format: ch06_quantization::Format::Q4_0,
            rows: 2048,
            cols: 2048,
            tokens: 512,
        },
        generate: commands::Generate {
            model: None,
            prompt: None,
            n: 128,
            chat: false,
            system: None,
            stops: Vec::new(),
            sampling: ch09_generate::SamplerConfig::default(),
        },
        ids: None,
        top: 5,
    };
    let g = &mut a.generate;
    let s = &mut g.sampling;
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next()? {
        match arg {
            Long("json") => a.json = true,
            Long("secs") => a.secs = p.value()?.parse()?,
            Long("pp") => a.pp = number(&mut p, "--pp")?,
            Long("tg") => a.tg = number(&mut p, "--tg")?,
            Long("per-dispatch") => a.extra.per_dispatch = true,
            Long("profile") => a.extra.profile = true,
            Long("compare") => a.compare = Some(a.compare.unwrap_or(3)),
            Long("rounds") => a.compare = Some(number(&mut p, "--rounds")?),
            Long("rows") => a.tiles.rows = number(&mut p, "--rows")?,
            Long("cols") => a.tiles.cols = number(&mut p, "--cols")?,
            Long("tokens") => a.tiles.tokens = number(&mut p, "--tokens")?,
            Long("ids") => {
                a.ids = Some(ch08_gguf::tokenizer::parse_ids(
                    &p.value()?.string()?,
                    MAX_IDS,
                )?)
            }
            Long("top") => a.top = number(&mut p, "--top")?,
            Long("format") => {
                let v = p.value()?.string()?;
                // any case: the K-quants' names are written q4_K, q6_K
                let formats = ch13_gpu::matvec::FORMATS;
                let found = formats.iter().find(|f| f.name().eq_ignore_ascii_case(&v));
                a.tiles.format = *found.ok_or(format!(
                    "--format {v:?}: q4_0, q8_0, q4_1, q5_0, q4_k or q6_k"
                ))?;
            }
            Short('m') | Long("model") => g.model = Some(p.value()?.into()),
            Short('p') | Long("prompt") => g.prompt = Some(p.value()?.string()?),
            Short('n') | Long("n-predict") => g.n = number(&mut p, "-n")?,
            Long("chat") => g.chat = true,
            Long("system") => g.system = Some(p.value()?.string()?),
            Long("stop") => g.stops.push(p.value()?.string()?),
            Long(flag) if SAMPLING_FLAGS.contains(&flag) => {
                let flag = flag.to_owned();
                s.set_flag(&flag, p.value()?)?
            }
            Short('h') | Long("help") => return Ok(None),
            Value(v) if a.command.is_empty() && g.prompt.is_none() && g.model.is_none() => {
                a.command = v.string()?
            }
            _ => return Err(arg.unexpected()),
        }
    }
    let generating = g.prompt.is_some() || g.model.is_some();
    match a.command.as_str() {
        "info" | "kernels" | "tiles" if !generating => {}
        "bench" if a.compare.is_some() && (a.extra.per_dispatch || a.extra.profile) => {
            return Err(
                "--compare races what llama-bench runs: no --per-dispatch or --profile".into(),
            );
        }
        "bench" if g.prompt.is_none() => {}
        "bench" => return Err("bench takes no -p".into()),
        "logits" if g.prompt.is_some() => return Err("logits takes --ids, not -p".into()),
        "logits" if a.ids.is_none() => return Err("logits needs --ids IDS".into()),
        "logits" if !(1..=1000).contains(&a.top) => {
            return Err("--top must be between 1 and 1000".into());
        }
        "logits" => {}
        "" if generating => a.command = "generate".into(),
        "" => return Err("say what to do: -p TEXT, info or kernels".into()),
        "info" | "kernels" | "tiles" => {
            return Err(format!("{} takes no -m or -p", a.command).into());
        }
        other => {
            return Err(format!(
                "unknown command {other:?}: info, kernels, tiles, bench, logits, or -p TEXT"
            )
            .into());
        }
    }
    if a.command == "generate" {
        check_generate(g)?;
    }
    if a.ids.is_some() && a.command != "logits" {
        return Err("--ids goes with logits".into());
    }
    Ok(Some(a))
}

/// Chapter 9's checks on the generate options.
fn check_generate(g: &commands::Generate) -> Result<(), lexopt::Error> {
    let check = |ok: bool, msg: &str| -> Result<(), lexopt::Error> {
        if ok {
            Ok(())
        } else {
            Err(msg.to_string().into())
        }
    };
    check(g.prompt.is_some(), "a prompt is needed: -p TEXT")?;
    check(
        (1..=1 << 16).contains(&g.n),
        "-n must be between 1 and 65536",
    )?;
    g.sampling.check()?;
    check(g.system.is_none() || g.chat, "--system goes with --chat")?;
    check(g.stops.len() <= 16, "at most 16 --stop strings")?;
    check(
        g.stops.iter().all(|s| !s.is_empty() && s.len() <= 256),
        "a --stop string must be 1 to 256 bytes",
    )?;
    Ok(())
}

fn run(a: &Args) -> Result<(), Error> {
    match a.command.as_str() {
        "generate" => commands::generate(&a.generate, a.json)?,
        "bench" => {
            let sizes = (a.pp, a.tg);
            commands::bench(&a.generate, sizes, a.extra, a.compare, a.json)?
        }
        "logits" => {
            let ids = a.ids.as_deref().unwrap_or_default();
            commands::logits(&a.generate, ids, a.top, a.json)?
        }
        "tiles" => {
            bench::check_secs(a.secs)?;
            a.tiles.check()?;
            let gpu = Gpu::open()?;
            let report = tile_bench::run(&gpu, &a.tiles, a.secs)?;
            if a.json {
                println!("{report}");
            } else {
                print!("{}", tile_bench::text(&report));
            }
        }
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
    ch01_tensors::pipe::quiet_when_closed();
    // A chat template renders in a child of this program (chapter 9's sandbox).
    if let Some(code) = ch09_generate::chat::sandbox::child_main() {
        return code;
    }
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
