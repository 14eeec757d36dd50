//! `ch06-quantization`: SmolLM2 with 8- and 4-bit weights, and what each bit costs.
//!
//! ```text
//! ch06-quantization                                  a tour: one row of layer 0 in every format
//! ch06-quantization eval --format q4_1 [--json]      bytes, perplexity, KL, top-1, decode tok/s
//! ch06-quantization generate --format q4_1 --prompt TEXT -n N
//! ch06-quantization histogram [--svg FILE]           layer 0's weights / their block's max |x|
//! ```

use std::process::ExitCode;

mod commands;

const USAGE: &str = "\
usage: ch06-quantization [command] [options]

commands:
  tour       (the default) one weight row of layer 0 in every format: its bytes, its error
  eval       weight bytes, bytes read per token, perplexity on a text, KL divergence and
             top-1 agreement with the f32 model at every position, and decode tok/s
  generate   greedy generation with quantized weights, streamed; prefill and decode tok/s
  histogram  every weight of layer 0 divided by its block's largest magnitude, counted

options:
  --format F       f32, int8, q8_0, q4_0, q4_1, or (eval only) all (default q4_1)
  --search         choose each block's scale by a small error search instead of absmax
  --text FILE      eval: the text to score (default fixtures/reference/perplexity-text.txt)
  --prompt TEXT    generate: the prompt (default \"The capital of France is\")
  --ids LIST       generate: token ids instead of --prompt, comma-separated
  -n N             generate: tokens to generate (default 32)
  --model DIR      model directory (default: models/smollm2-135m-instruct/hf, fetched on first use)
  --markdown FILE  eval: also write the table as Markdown
  --svg FILE       histogram: also draw it as an SVG chart
  --json           machine-readable output
  -h, --help       this text";

/// Parsed command line.
pub struct Args {
    pub command: String,
    pub formats: Vec<ch06_quantization::Format>,
    pub search: bool,
    pub text: Option<std::path::PathBuf>,
    pub prompt: Option<String>,
    pub ids: Option<Vec<u32>>,
    pub n: usize,
    pub model: Option<std::path::PathBuf>,
    pub json: bool,
    pub markdown: Option<std::path::PathBuf>,
    pub svg: Option<std::path::PathBuf>,
}

/// The most tokens `generate` accepts in `-n`: SmolLM2's context is 8192 positions, and
/// larger values are refused before anything is allocated.
const MAX_NEW_TOKENS: usize = 1 << 16;

fn parse_args() -> Result<Option<Args>, lexopt::Error> {
    use ch06_quantization::Format;
    use lexopt::prelude::*;
    let mut a = Args {
        command: String::new(),
        formats: vec![Format::Q4_1],
        search: false,
        text: None,
        prompt: None,
        ids: None,
        n: 32,
        model: None,
        json: false,
        markdown: None,
        svg: None,
    };
    let mut seen = Vec::new(); // options given, to refuse those that do not go with the command
    let mut parser = lexopt::Parser::from_env();
    while let Some(arg) = parser.next()? {
        if let Long(name) = &arg {
            seen.push(format!("--{name}"));
        } else if let Short(c) = &arg {
            seen.push(format!("-{c}"));
        }
        match arg {
            Value(cmd) if a.command.is_empty() => a.command = cmd.string()?,
            Long("format") => {
                let name = parser.value()?.string()?;
                a.formats = match name.as_str() {
                    "all" => Format::ALL.to_vec(),
                    _ => vec![Format::parse(&name).ok_or_else(|| {
                        format!(
                            "unknown format {name:?}: expected f32, int8, q8_0, q4_0, q4_1 or all"
                        )
                    })?],
                };
            }
            Long("search") => a.search = true,
            Long("text") => a.text = Some(parser.value()?.into()),
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
            Short('n') => a.n = parser.value()?.parse()?,
            Long("model") => a.model = Some(parser.value()?.into()),
            Long("json") => a.json = true,
            Long("markdown") => a.markdown = Some(parser.value()?.into()),
            Long("svg") => a.svg = Some(parser.value()?.into()),
            Short('h') | Long("help") => return Ok(None),
            _ => return Err(arg.unexpected()),
        }
    }
    if a.command.is_empty() {
        a.command = "tour".into();
    }
    let allowed: &[&str] = match a.command.as_str() {
        "tour" => &["--model", "--json"],
        "eval" => &[
            "--format",
            "--search",
            "--text",
            "--model",
            "--json",
            "--markdown",
        ],
        "histogram" => &["--model", "--json", "--svg"],
        "generate" => &[
            "--format", "--search", "--prompt", "--ids", "-n", "--model", "--json",
        ],
        other => {
            return Err(
                format!("unknown command {other:?} (tour, eval, generate or histogram)").into(),
            );
        }
    };
    if let Some(flag) = seen.iter().find(|f| !allowed.contains(&f.as_str())) {
        return Err(format!("{flag} does not go with `{}`", a.command).into());
    }
    if a.command == "generate" && a.formats.len() != 1 {
        return Err("generate takes one --format, not all".into());
    }
    if a.n == 0 || a.n > MAX_NEW_TOKENS {
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
        "tour" => commands::tour(&args),
        "eval" => commands::eval(&args),
        "histogram" => commands::histogram(&args),
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
