//! `ch12-structured`: answers that are documents of a JSON schema.

use std::path::PathBuf;
use std::process::ExitCode;

use ch01_tensors::models;
use ch11_server::launch::number;

mod commands;

const USAGE: &str = "\
usage: ch12-structured [serve] [-m FILE] [--port 8080] [chapter 11's other flags]
           chapter 11's server, which now answers response_format (json_object,
           json_schema) and tools under this chapter's grammar (ch11-server --help has
           the flags)
       ch12-structured generate [-m FILE] --schema FILE.json -p PROMPT [-n MAX_TOKENS]
                       [--temperature T] [--seed N] [-t THREADS]
           the model's answer to PROMPT (in its chat template), steered token by token
           so that it is a document of the schema, printed as it came
       ch12-structured masks [-m FILE] [--schema FILE.json] [--doc TEXT] [--json]
           the mask before each token of a document: how many tokens of the vocabulary
           the grammar lets through, and how long the mask took
       ch12-structured bench [-m FILE] [-t THREADS] [--rounds N] [--json]
           decode tok/s with no grammar and under a nested-object schema, in the same
           rounds, beside chapter 8's tg128; and the time to mask the whole vocabulary

options (defaults in brackets):
  -m, --model FILE        the GGUF file [SmolLM2-135M-Instruct Q4_1, fetched on first use]
  --schema FILE.json      a JSON schema [masks: any JSON object]
  -p, --prompt TEXT       generate: the user's message
  -n, --max-tokens N      generate: tokens at most, 1 to 4096; the document closes in
                          time [256]
  --temperature T         generate: 0 is greedy [0]
  --seed N                generate: the sampler's seed [1]
  --doc TEXT              masks: the document [a sample]
  --rounds N              bench: rounds, 1 to 100 [3]
  -t, --threads N         threads for the model [the machine's physical cores]
  --json                  masks, bench: one JSON object
  -h, --help              this text";

pub struct Args {
    pub command: String,
    pub model: Option<PathBuf>,
    pub schema: Option<PathBuf>,
    pub prompt: Option<String>,
    pub max_tokens: usize,
    pub temperature: f32,
    pub seed: u64,
    pub doc: Option<String>,
    pub rounds: usize,
    pub threads: usize,
    pub json: bool,
}

fn parse_args() -> Result<Option<Args>, lexopt::Error> {
    use lexopt::prelude::*;
    let mut a = Args {
        command: String::new(),
        model: None,
        schema: None,
        prompt: None,
        max_tokens: 256,
        temperature: 0.0,
        seed: 1,
        doc: None,
        rounds: 3,
        threads: ch07_simd_parallel::cores::physical_cores(),
        json: false,
    };
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next()? {
        match arg {
            Short('m') | Long("model") => a.model = Some(p.value()?.into()),
            Long("schema") => a.schema = Some(p.value()?.into()),
            Short('p') | Long("prompt") => a.prompt = Some(p.value()?.string()?),
            Short('n') | Long("max-tokens") => a.max_tokens = number(&mut p, "--max-tokens")?,
            Long("temperature") => a.temperature = number(&mut p, "--temperature")?,
            Long("seed") => a.seed = number(&mut p, "--seed")?,
            Long("doc") => a.doc = Some(p.value()?.string()?),
            Long("rounds") => a.rounds = number(&mut p, "--rounds")?,
            Short('t') | Long("threads") => a.threads = number(&mut p, "--threads")?,
            Long("json") => a.json = true,
            Short('h') | Long("help") => return Ok(None),
            Value(v) if a.command.is_empty() => {
                let v = v.string()?;
                match v.as_str() {
                    "generate" | "masks" | "bench" => a.command = v,
                    other => {
                        return Err(format!(
                            "unknown command {other:?} (generate, masks or bench)"
                        )
                        .into());
                    }
                }
            }
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
    let command = a.command.as_str();
    check(
        !command.is_empty(),
        "a command is needed: generate, masks or bench",
    )?;
    check(
        command != "generate" || (a.schema.is_some() && a.prompt.is_some()),
        "generate needs --schema FILE.json and -p PROMPT",
    )?;
    check(
        a.prompt.is_none() || command == "generate",
        "-p goes with generate",
    )?;
    check(
        a.doc.is_none() || command == "masks",
        "--doc goes with masks",
    )?;
    check(
        a.schema.is_none() || command != "bench",
        "bench uses its own schema (schemas/book.json); --schema goes with generate or masks",
    )?;
    check(
        !a.json || command != "generate",
        "--json goes with masks or bench",
    )?;
    check(
        (1..=4096).contains(&a.max_tokens),
        "--max-tokens must be 1 to 4096",
    )?;
    check(
        a.temperature.is_finite() && (0.0..=10.0).contains(&a.temperature),
        "--temperature must be 0 to 10",
    )?;
    check((1..=100).contains(&a.rounds), "--rounds must be 1 to 100")?;
    check(
        (1..=256).contains(&a.threads),
        "--threads must be between 1 and 256",
    )?;
    Ok(Some(a))
}

/// The GGUF file to read: `-m`, or the default model, fetched if it is missing.
pub fn model_path(a: &Args) -> Result<PathBuf, String> {
    match &a.model {
        Some(p) => models::require(p),
        None => {
            let p = models::smollm2_gguf();
            if !p.exists() {
                models::fetch("smollm2")?;
            }
            models::require(&p)
        }
    }
}

/// No command, or `serve`: chapter 11's flags; `None` for `--help`.
fn serve_options() -> Result<Option<ch11_server::launch::ServeOptions>, String> {
    let mut o = ch11_server::launch::ServeOptions::default();
    let mut p = lexopt::Parser::from_env();
    let mut first = true;
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        use lexopt::prelude::*;
        let name = match arg {
            Value(v) if first && v == "serve" => {
                first = false;
                continue;
            }
            Short('h') | Long("help") => return Ok(None),
            Short(c) => c.to_string(),
            Long(l) => l.to_string(),
            Value(v) => {
                return Err(format!(
                    "unexpected argument {v:?} (a command comes first: serve, generate, masks or bench)"
                ));
            }
        };
        first = false;
        if !o.flag(&name, &mut p).map_err(|e| e.to_string())? {
            let dashes = if name.len() == 1 { "-" } else { "--" };
            return Err(format!("invalid option '{dashes}{name}'"));
        }
    }
    o.check()?;
    Ok(Some(o))
}

/// Chapter 11's server with this chapter's grammar plugged in.
fn serve(o: &ch11_server::launch::ServeOptions) -> Result<(), String> {
    let path = match &o.model {
        Some(p) => models::require(p)?,
        None => {
            let p = models::smollm2_gguf();
            if !p.exists() {
                models::fetch("smollm2")?;
            }
            models::require(&p)?
        }
    };
    let file = ch08_gguf::GgufFile::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let tok = ch08_gguf::tokenizer(&file.gguf).map_err(|e| e.to_string())?;
    let structured = std::sync::Arc::new(ch12_structured::api::Structured::new(&tok));
    drop(file);
    ch11_server::launch::serve_main(o, &path, "ch12-structured", Some(structured))
}

fn main() -> ExitCode {
    // A chat template renders in a child of this program (see chapter 9's `chat::sandbox`).
    if let Some(code) = ch09_generate::chat::sandbox::child_main() {
        return code;
    }
    let command = std::env::args_os().nth(1).unwrap_or_default();
    if !["generate", "masks", "bench"].iter().any(|c| command == *c) {
        return run(serve_options(), serve);
    }
    run(parse_args(), |args| match args.command.as_str() {
        "generate" => commands::generate(args),
        "masks" => commands::masks(args),
        _ => commands::bench(args),
    })
}

/// Parsed flags to an exit code: `--help` prints the usage, a bad flag is a usage error
/// (2), a failed command an error (1).
fn run<T, E: std::fmt::Display, F: std::fmt::Display>(
    parsed: Result<Option<T>, E>,
    go: impl FnOnce(&T) -> Result<(), F>,
) -> ExitCode {
    let options = match parsed {
        Ok(Some(o)) => o,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match go(&options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
