//! `ch04-forward`: run SmolLM2 with the chapter's forward pass.
//!
//! ```text
//! ch04-forward                                   greedy continuation of "The capital of France is"
//! ch04-forward generate --prompt TEXT -n N       greedy generation, printed as it goes
//! ch04-forward logits --ids 504,3575 --top 5     the top logits at every position (--json)
//! ch04-forward check                             per-layer and logits check against the references
//! ch04-forward bench --lengths 16,64,256         time per token without a cache
//! ```

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use ch04_forward::generate::{self, Stop};
use ch04_forward::model::{argmax, highest, position_lines, positions_json};
use ch04_forward::prompt::Text;
use ch04_forward::{Error, Model, check};
use serde_json::json;

const USAGE: &str = "\
usage: ch04-forward [COMMAND] [OPTIONS]

commands:
  generate   greedy generation (the default, with the prompt \"The capital of France is\")
  logits     the top-K logits at every position of a sequence of ids
  check      compare hidden states and logits with the reference fixtures, layer by layer
  bench      seconds per generated token at several sequence lengths (no cache)

options:
  --model DIR       Hugging Face model directory (default: SmolLM2-135M, fetched on first use)
  --prompt TEXT     generate: the prompt                     [default: The capital of France is]
  -n N              generate: tokens to generate             [default: 8]
  --no-stop         generate: keep going after an end-of-sequence token
  --ids 1,2,3       logits: the token ids (or --prompt TEXT)
  --top K           logits: how many logits per position     [default: 5]
  --lengths L,L     bench: sequence lengths                  [default: 16,64,256]
  --repeats R       bench: time each length R times, keep the best [default: 2]
  --json            machine-readable output (generate, logits, bench)
  -h, --help        this help";

const DEFAULT_PROMPT: &str = "The capital of France is";

#[derive(Debug)]
struct Args {
    command: String,
    model: Option<PathBuf>,
    prompt: Option<String>,
    n: usize,
    stop: Stop,
    ids: Option<Vec<u32>>,
    top: usize,
    lengths: Vec<usize>,
    repeats: usize,
    json: bool,
}

fn parse_list<T: std::str::FromStr>(flag: &str, text: &str) -> Result<Vec<T>, lexopt::Error> {
    text.split(',')
        .map(|s| s.trim().parse::<T>())
        .collect::<Result<Vec<T>, _>>()
        .map_err(|_| {
            lexopt::Error::from(format!(
                "{flag} wants a comma-separated list of numbers, got {text:?}"
            ))
        })
}

fn parse_args() -> Result<Args, lexopt::Error> {
    use lexopt::prelude::*;
    let mut a = Args {
        command: "generate".into(),
        model: None,
        prompt: None,
        n: 8,
        stop: Stop::AtEos,
        ids: None,
        top: 5,
        lengths: vec![16, 64, 256],
        repeats: 2,
        json: false,
    };
    let mut parser = lexopt::Parser::from_env();
    let mut seen_command = false;
    while let Some(arg) = parser.next()? {
        match arg {
            Value(cmd) if !seen_command => {
                let cmd = cmd.string()?;
                if !matches!(cmd.as_str(), "generate" | "logits" | "check" | "bench") {
                    return Err(format!("unknown command {cmd:?}").into());
                }
                (a.command, seen_command) = (cmd, true);
            }
            Long("model") => a.model = Some(parser.value()?.into()),
            Long("prompt") => a.prompt = Some(parser.value()?.string()?),
            Short('n') => a.n = parser.value()?.parse()?,
            Long("no-stop") => a.stop = Stop::Never,
            Long("ids") => a.ids = Some(parse_list("--ids", &parser.value()?.string()?)?),
            Long("top") => a.top = parser.value()?.parse()?,
            Long("lengths") => a.lengths = parse_list("--lengths", &parser.value()?.string()?)?,
            Long("repeats") => a.repeats = parser.value()?.parse()?,
            Long("json") => a.json = true,
            Short('h') | Long("help") => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ => return Err(arg.unexpected()),
        }
    }
    if a.lengths.is_empty() || a.lengths.contains(&0) {
        return Err("--lengths must be positive".into());
    }
    if a.n == 0 {
        return Err("-n must be at least 1 (as in chapter 5)".into());
    }
    Ok(a)
}

fn model_dir(a: &Args) -> Result<PathBuf, String> {
    match &a.model {
        Some(dir) => Ok(dir.clone()),
        None => ch01_tensors::models::ensure_smollm2_hf(),
    }
}

fn load(dir: &std::path::Path) -> Result<Model, String> {
    Model::load(dir).map_err(|e| format!("{e}\n(loading the model in {})", dir.display()))
}

// ANCHOR: cmd_generate
fn cmd_generate(a: &Args) -> Result<(), String> {
    let dir = model_dir(a)?;
    let model = load(&dir)?;
    let text = Text::load(&dir, model.config.bos_token_id).map_err(|e| e.to_string())?;
    let prompt = a.prompt.as_deref().unwrap_or(DEFAULT_PROMPT);
    let ids = text.encode(prompt);
    let limit = model.config.max_position_embeddings;
    if ids.len().saturating_add(a.n) > limit {
        return Err(format!(
            "the prompt's {} tokens and -n {} need more than the model's {limit} positions",
            ids.len(),
            a.n
        ));
    }
    let mut out = std::io::stdout();
    if !a.json {
        let c = &model.config;
        println!(
            "model: {} ({} layers, dim {}, {} heads / {} KV heads, vocab {})",
            ch01_tensors::models::shown(&dir),
            c.num_layers,
            c.hidden_size,
            c.n_heads,
            c.n_kv_heads,
            c.vocab_size
        );
        println!("prompt: {} tokens {:?}\n", ids.len(), ids);
        print!("{prompt}");
    }
    // ANCHOR_END: cmd_generate
    // ANCHOR: cmd_generate_stream
    let mut stream = text.stream();
    let json = a.json;
    let g = generate::greedy(&model, &ids, a.n, a.stop, &mut |id| {
        let piece = stream
            .push(id)
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
        if !json {
            print!("{piece}");
            out.flush().ok(); // show each token as soon as it exists
        }
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    let tail = stream.finish();
    if a.json {
        let v = json!({
            "prompt": prompt, "prompt_ids": ids, "ids": g.ids,
            "text": text.decode(&g.ids).map_err(|e| e.to_string())?,
            "seconds": g.seconds, "tokens_per_second": g.tokens_per_second(),
        });
        println!("{v}");
    } else {
        println!("{tail}\n");
        println!(
            "{} tokens in {:.2} s: {:.1} tokens/s (no cache: every step reruns all {} to {} positions)",
            g.ids.len(),
            g.seconds,
            g.tokens_per_second(),
            ids.len(),
            ids.len() + g.ids.len().saturating_sub(1)
        );
    }
    Ok(())
}
// ANCHOR_END: cmd_generate_stream

fn cmd_logits(a: &Args) -> Result<(), String> {
    let dir = model_dir(a)?;
    let model = load(&dir)?;
    let ids = match (&a.ids, &a.prompt) {
        (Some(ids), _) => ids.clone(),
        (None, Some(prompt)) => Text::load(&dir, model.config.bos_token_id)
            .map_err(|e| e.to_string())?
            .encode(prompt),
        (None, None) => return Err("logits needs --ids 1,2,3 or --prompt TEXT".into()),
    };
    let logits = model.logits(&ids).map_err(|e| e.to_string())?; // (seq, vocab)
    let vocab = model.config.vocab_size;
    let mut positions = Vec::new();
    for row in logits.chunks_exact(vocab) {
        positions.push((argmax(row), highest(row, a.top)));
    }
    if a.json {
        println!(
            "{}",
            json!({"ids": ids, "positions": positions_json(&positions)})
        );
    } else {
        for line in position_lines(&ids, &positions) {
            println!("{line}");
        }
    }
    Ok(())
}

fn cmd_check(a: &Args) -> Result<bool, String> {
    let model = load(&model_dir(a)?)?;
    let refs = check::References::load().map_err(|e| e.to_string())?;
    let (report, ok) = check::run(&model, &refs).map_err(|e| e.to_string())?;
    println!("{}", report.join("\n"));
    Ok(ok)
}

// ANCHOR: cmd_bench
fn cmd_bench(a: &Args) -> Result<(), String> {
    let dir = model_dir(a)?;
    let model = load(&dir)?;
    let seed = Text::load(&dir, model.config.bos_token_id)
        .map_err(|e| e.to_string())?
        .encode(DEFAULT_PROMPT);
    let mut rows = Vec::new();
    for &len in &a.lengths {
        let s = generate::time_step(&model, &seed, len, a.repeats).map_err(|e| e.to_string())?;
        rows.push((len, s));
    }
    if a.json {
        let v: Vec<_> = rows.iter().map(|&(len, s)| json!({"seq_len": len, "seconds_per_token": s, "tokens_per_second": 1.0 / s})).collect();
        println!(
            "{}",
            json!({"threads": rayon::current_num_threads(), "lengths": v})
        );
        return Ok(());
    }
    println!("one generation step without a cache = a forward pass over the whole sequence\n");
    println!("  sequence length   time per token        speed   vs. the first");
    let first = rows[0].1;
    for &(len, s) in &rows {
        println!(
            "  {len:15}   {s:10.3} s   {:8.2} tokens/s   {:6.1}x",
            1.0 / s,
            s / first
        );
    }
    Ok(())
}
// ANCHOR_END: cmd_bench

fn main() -> ExitCode {
    ch01_tensors::pipe::quiet_when_closed();
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let result = match args.command.as_str() {
        "logits" => cmd_logits(&args),
        "check" => match cmd_check(&args) {
            Ok(true) => Ok(()),
            Ok(false) => return ExitCode::FAILURE,
            Err(e) => Err(e),
        },
        "bench" => cmd_bench(&args),
        _ => cmd_generate(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
