//! `ch08-gguf`: a GGUF file read in place: its header, its tokenizer, its model.
//!
//! ```text
//! ch08-gguf [inspect] [FILE] [--tensors] [--json]    header, metadata, tensor table
//! ch08-gguf hex [FILE] [--keys N]                    the first bytes, field by field
//! ch08-gguf tokenize [-m FILE] [--special] [--json] [-- TEXT]   (or stdin)
//! ch08-gguf logits [-m FILE] --ids 1,2,3 [--top K] [--json]
//! ch08-gguf generate [-m FILE] [--prompt TEXT | --ids IDS] [-n N] [--json]
//! ch08-gguf load [-m FILE] [--cold] [--json]         load time, first token, memory
//! ch08-gguf bench [-m FILE] [--json]                 pp512 and tg128
//! ch08-gguf profile [-m FILE] [--json]               where a decode step and a prefill spend their time
//! ch08-gguf compare [-m FILE] [--rounds N]           ours vs llama-bench on the same file
//! ch08-gguf depth [-m FILE] [--depth N]              the same for tg128 after N cached tokens
//! ch08-gguf regions [-m FILE] [--threads N]          a decode step's parallel regions and their threads
//! ch08-gguf synth --arch A --seed N --weights W --out FILE   a small file with random weights
//! ```
//!
//! `inspect` and `hex` take the file as `-m FILE` too.

use std::path::PathBuf;
use std::process::ExitCode;

mod commands;

const USAGE: &str = "\
usage: ch08-gguf [command] [options]

commands:
  inspect [FILE]   (the default) version, metadata (long arrays summarised), bytes per tensor type,
                   parameters; with --tensors, every tensor (name, type, shape, offset, bytes)
  hex [FILE]       the file's first bytes, each field annotated (--keys N: metadata entries)
  tokenize -- TEXT the token ids of TEXT (or of standard input), with the tokenizer stored
                   in the file
  logits           the logits after each of --ids (top K of each, and the argmax)
  generate         greedy generation, streamed, from --prompt TEXT or --ids IDS
  load             open the file, build the model, run one token: the time and memory of
                   each step (--cold: evict the file from the page cache first)
  bench            pp512 (prefill) and tg128 (decode) tok/s of the file, llama-bench's tests
  profile          where one decode step and one 512-token prefill spend their time: each
                   kind of matrix product (ms, MB, GB/s), the LM head, and the rest
  compare          llama.cpp's llama-bench and ours on the same file and thread count,
                   alternating rounds; medians and ratios (build it first:
                   bash scripts/llamacpp.sh)
  levels           the best kernel level's tg128 and pp512 against every lower SIMD level this
                   CPU runs, alternating rounds (exit 1 if the best decodes below 0.98 of one)
  depth            tg128 after --depth tokens already in the cache, ours and
                   llama-bench -d, alternating rounds; medians and the ratio
  regions          one decode step's parallel regions at 1, 2, 4, ... threads up to --threads:
                   how many, how many tasks (threads) each gets, what they cost here, and
                   each kind of part's time in a step (the products, attention, the rest)
  synth            a small model file of one architecture with random weights
                   (ch08-gguf synth --help)

options:
  -m, --model FILE the GGUF file (default: SmolLM2-135M-Instruct Q4_1, fetched on first use);
                   inspect and hex also take it as FILE
  --tensors        inspect: list every tensor
  --keys N         hex: metadata entries to walk (default 4)
  --special        tokenize: parse special tokens such as <|im_start|> in TEXT
  --ids IDS        comma-separated token ids
  --top K          logits: how many of the highest logits to show per position (default 5)
  --prompt TEXT    generate: the prompt (default \"The capital of France is\")
  -n N             generate: tokens to generate (default 32)
  --threads N      threads (default: the machine's physical cores)
  --cold           load: drop the file from the page cache before opening it
  --access HOW     load: normal (the default), random (no read-ahead: only what is touched
                   is read) or willneed (read the whole file now, in the background)
  --runs N         bench, profile: runs per measurement (default 3)
  --short N        bench: also a prefill of N tokens (8 to 512), as a chat turn's prompt,
                   where a prompt is cut for threads in other ways than pp512's
  --rounds N       compare, levels, depth: rounds (default 5)
  --markdown FILE  compare, levels, depth: also write the result as a Markdown table
  --depth N        depth: tokens in the cache before the 128 timed (default 4096)
  --json           machine-readable output
  -h, --help       this text

environment (how a step is cut for threads; the same bits whatever they say):
  LLM_BOOK_TASK_BYTES=N      the fewest bytes of weights a decode task reads [32768]
  LLM_BOOK_DECODE_THREADS=N  the most threads a decode region is shared by [all]
  LLM_BOOK_IDLE=park         a helper a region has no task for sleeps at once [spin]
  LLM_BOOK_PREFILL_BAND=N    the fewest tokens a prefill band takes, its rows shared by
                             the threads [a band a thread, at most four, 32 or more]
  LLM_BOOK_FEW_PER=thread    16 tokens a thread, not a band, before a product is split
                             by tokens rather than by rows [band]";

/// Parsed command line.
pub struct Args {
    pub command: String,
    pub model: Option<PathBuf>,
    pub tensors: bool,
    pub keys: usize,
    pub special: bool,
    pub ids: Option<Vec<u32>>,
    pub top: usize,
    pub prompt: Option<String>,
    pub text: Option<String>,
    pub n: usize,
    pub threads: usize,
    pub cold: bool,
    pub access: ch08_gguf::Access,
    pub runs: usize,
    pub short: Option<usize>,
    pub rounds: usize,
    pub markdown: Option<PathBuf>,
    pub json: bool,
    pub depth: usize,
}

/// Upper bounds for numeric flags: each sizes a loop, an allocation or a pool.
const MAX_THREADS: usize = 256;
const MAX_NEW_TOKENS: usize = 1 << 16;
const MAX_TOP: usize = 1000;
const MAX_KEYS: usize = 64;
const MAX_IDS: usize = 1 << 16;
const MAX_RUNS: usize = 1000;
const MAX_DEPTH: usize = 1 << 17;

fn parse_args() -> Result<Option<Args>, lexopt::Error> {
    use lexopt::prelude::*;
    let mut a = Args {
        command: String::new(),
        model: None,
        tensors: false,
        keys: 4,
        special: false,
        ids: None,
        top: 5,
        prompt: None,
        text: None,
        n: 32,
        threads: ch07_simd_parallel::cores::physical_cores(),
        cold: false,
        access: ch08_gguf::Access::Normal,
        runs: 3,
        short: None,
        rounds: 5,
        markdown: None,
        json: false,
        depth: 4096,
    };
    let mut seen = Vec::new();
    let mut parser = lexopt::Parser::from_env();
    let mut positional = Vec::new();
    while let Some(arg) = parser.next()? {
        match &arg {
            Long(name) => seen.push(format!("--{name}")),
            Short(c) => seen.push(format!("-{c}")),
            Value(_) => {}
        }
        match arg {
            Value(v) if a.command.is_empty() => a.command = v.string()?,
            Value(v) => positional.push(v.string()?),
            Short('m') | Long("model") => a.model = Some(parser.value()?.into()),
            Long("tensors") => a.tensors = true,
            Long("keys") => a.keys = parser.value()?.parse()?,
            Long("special") => a.special = true,
            Long("ids") => {
                a.ids = Some(ch08_gguf::tokenizer::parse_ids(
                    &parser.value()?.string()?,
                    MAX_IDS,
                )?)
            }
            Long("top") => a.top = parser.value()?.parse()?,
            Long("prompt") => a.prompt = Some(parser.value()?.string()?),
            Short('n') => a.n = parser.value()?.parse()?,
            Long("threads") => a.threads = parser.value()?.parse()?,
            Long("cold") => a.cold = true,
            Long("access") => {
                let v = parser.value()?.string()?;
                a.access = ch08_gguf::Access::parse(&v).ok_or_else(|| {
                    format!("--access must be normal, random or willneed, not {v:?}")
                })?;
            }
            Long("runs") => a.runs = parser.value()?.parse()?,
            Long("short") => a.short = Some(parser.value()?.parse()?),
            Long("rounds") => a.rounds = parser.value()?.parse()?,
            Long("markdown") => a.markdown = Some(parser.value()?.into()),
            Long("json") => a.json = true,
            Long("depth") => a.depth = parser.value()?.parse()?,
            Short('h') | Long("help") => return Ok(None),
            _ => return Err(arg.unexpected()),
        }
    }
    if a.command.is_empty() {
        a.command = "inspect".into();
    }
    let allowed: &[&str] = match a.command.as_str() {
        "inspect" => &["--model", "--tensors", "--json"],
        "hex" => &["--model", "--keys"],
        "tokenize" => &["--model", "--special", "--json"],
        "logits" => &["--model", "--ids", "--top", "--json", "--threads"],
        "generate" => &["--model", "--prompt", "--ids", "-n", "--json", "--threads"],
        "load" => &["--model", "--cold", "--access", "--json", "--threads"],
        "bench" => &["--model", "--runs", "--short", "--json", "--threads"],
        "profile" => &["--model", "--runs", "--json", "--threads"],
        "regions" => &["--model", "--json", "--threads"],
        "compare" => &["--model", "--rounds", "--markdown", "--json", "--threads"],
        "levels" => &["--model", "--rounds", "--markdown", "--json", "--threads"],
        "depth" => &[
            "--model",
            "--depth",
            "--rounds",
            "--markdown",
            "--json",
            "--threads",
        ],
        other => {
            return Err(format!(
                "unknown command {other:?} (inspect, hex, tokenize, logits, generate, load, bench, profile, compare, levels, depth, regions or synth)"
            )
            .into());
        }
    };
    // `-m` is `--model`'s short spelling, as in chapters 9 to 11.
    let long = |f: &str| if f == "-m" { "--model" } else { f }.to_string();
    if let Some(flag) = seen.iter().find(|f| !allowed.contains(&long(f).as_str())) {
        return Err(format!("{flag} does not go with `{}`", a.command).into());
    }
    match (a.command.as_str(), positional.len()) {
        ("inspect" | "hex", 0) => {}
        ("inspect" | "hex", 1) if a.model.is_some() => {
            return Err(format!("`{}` takes FILE or -m FILE, not both", a.command).into());
        }
        ("inspect" | "hex", 1) => a.model = Some(positional.remove(0).into()),
        ("tokenize", 1) => a.text = Some(positional.remove(0)),
        ("tokenize", 0) => {} // read from standard input
        ("tokenize", _) => return Err("tokenize takes one TEXT (after --), or reads stdin".into()),
        (_, 0) => {}
        (cmd, _) => {
            return Err(format!("unexpected argument {:?} for `{cmd}`", positional[0]).into());
        }
    }
    if a.command == "generate" && a.prompt.is_some() && a.ids.is_some() {
        return Err("generate takes --prompt TEXT or --ids IDS, not both".into());
    }
    if a.command == "logits" && a.ids.is_none() {
        return Err("logits needs --ids 1,2,3".into());
    }
    if a.ids.as_ref().is_some_and(Vec::is_empty) {
        return Err("--ids is empty".into());
    }
    if !(1..=MAX_THREADS).contains(&a.threads) {
        return Err(format!("--threads must be between 1 and {MAX_THREADS}").into());
    }
    if !(1..=MAX_NEW_TOKENS).contains(&a.n) {
        return Err(format!("-n must be between 1 and {MAX_NEW_TOKENS}").into());
    }
    if !(1..=MAX_TOP).contains(&a.top) {
        return Err(format!("--top must be between 1 and {MAX_TOP}").into());
    }
    if !(1..=MAX_RUNS).contains(&a.runs) || !(1..=MAX_RUNS).contains(&a.rounds) {
        return Err(format!("--runs and --rounds must be between 1 and {MAX_RUNS}").into());
    }
    if a.short.is_some_and(|n| !(8..=512).contains(&n)) {
        return Err("--short must be between 8 and 512 tokens".into());
    }
    if a.depth > MAX_DEPTH {
        return Err(format!("--depth must be at most {MAX_DEPTH}").into());
    }
    if a.keys > MAX_KEYS {
        return Err(format!("--keys must be at most {MAX_KEYS}").into());
    }
    Ok(Some(a))
}

fn main() -> ExitCode {
    ch01_tensors::pipe::quiet_when_closed();
    // `synth` has flags of its own
    if std::env::args_os().nth(1).is_some_and(|a| a == "synth") {
        return commands::synth::main();
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
    let result = match args.command.as_str() {
        "inspect" => commands::inspect(&args),
        "hex" => commands::hex(&args),
        "tokenize" => commands::tokenize(&args),
        "logits" => commands::logits(&args),
        "generate" => commands::generate(&args),
        "bench" => commands::bench(&args),
        "profile" => commands::profile(&args),
        "regions" => commands::regions(&args),
        "compare" => commands::compare(&args),
        "levels" => commands::levels(&args),
        "depth" => commands::depth(&args),
        _ => commands::load(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
