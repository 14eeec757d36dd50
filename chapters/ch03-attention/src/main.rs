//! `ch03-attention`: the attention patterns of one SmolLM2 layer, for a prompt.
//!
//! Embeds the prompt, runs the layer's RMSNorm, Q and K projections and RoPE, and
//! computes every head's causal attention weights. Prints a per-head summary, or the
//! weights as JSON, and draws them as an SVG grid of heatmaps. `bench --markdown FILE`
//! times the two attention kernels instead (`measure.rs`), for the book's table.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use ch01_tensors::models;
use ch01_tensors::safetensors::SafeTensors;
use ch02_tokenizer::Tokenizer;
use ch03_attention::Error;
use ch03_attention::heatmap::heatmap_svg;
use ch03_attention::probe::{ModelConfig, layer_pattern};
use ch03_attention::summary::{HeadStats, report};
use serde_json::json;

mod measure;

const USAGE: &str = "\
usage: ch03-attention [--prompt TEXT | --ids 1,2,3] [--layer L] [--svg OUT.svg] [--json]
       ch03-attention bench --markdown FILE

Computes the causal attention pattern of every head of one SmolLM2-135M layer.
  --prompt TEXT   text to tokenize (default: \"The quick brown fox jumps over the lazy dog because it\")
  --ids LIST      comma-separated token ids instead of a prompt
  --layer L       which layer (default 0). Layer 0 is exact; deeper layers are fed the
                  embeddings directly here, not the residual stream (that is chapter 4)
  --svg PATH      also draw the patterns as a grid of heatmaps, one per head
  --json          print the weights (per head, (seq, seq), rounded) as JSON
  bench           time attention and attention_online at SmolLM2's shape (decode at 128,
                  512 and 2048 keys, a 512-token prefill), best of at least 3 runs, and
                  write the table to the --markdown FILE
  -h, --help      this text
The model is read from models/smollm2-135m-instruct/hf/ and fetched on first use.";

const DEFAULT_PROMPT: &str = "The quick brown fox jumps over the lazy dog because it";
const MAX_TOKENS: usize = 256;

struct Args {
    prompt: String,
    ids: Option<Vec<u32>>,
    layer: usize,
    svg: Option<PathBuf>,
    json: bool,
    bench: bool,
    markdown: Option<PathBuf>,
}

fn parse_args() -> Result<Option<Args>, lexopt::Error> {
    use lexopt::prelude::*;
    let mut args = Args {
        prompt: DEFAULT_PROMPT.to_string(),
        ids: None,
        layer: 0,
        svg: None,
        json: false,
        bench: false,
        markdown: None,
    };
    let mut parser = lexopt::Parser::from_env();
    while let Some(arg) = parser.next()? {
        match arg {
            Long("prompt") => args.prompt = parser.value()?.string()?,
            Long("ids") => {
                let list = parser.value()?.string()?;
                let ids = list
                    .split(',')
                    .map(|s| s.trim().parse::<u32>())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| format!("--ids {list:?}: {e} (expected e.g. 504,2365,6354)"))?;
                args.ids = Some(ids);
            }
            Long("layer") => args.layer = parser.value()?.parse()?,
            Long("svg") => args.svg = Some(parser.value()?.into()),
            Long("json") => args.json = true,
            Long("markdown") => args.markdown = Some(parser.value()?.into()),
            Value(v) if v == "bench" && !args.bench => args.bench = true,
            Short('h') | Long("help") => return Ok(None),
            _ => return Err(arg.unexpected()),
        }
    }
    if args.bench != args.markdown.is_some() {
        return Err("`bench` needs --markdown FILE, and --markdown goes with `bench` only".into());
    }
    Ok(Some(args))
}

/// `bench --markdown FILE`: the kernels' speed table.
fn bench(path: &Path) -> Result<(), String> {
    ch01_tensors::files::check_output(path).map_err(|e| e.to_string())?;
    let table = measure::markdown()?;
    ch01_tensors::files::write_output(path, &table)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    println!("wrote {}", path.display());
    Ok(())
}

/// A token piece as a short, printable label for the heatmap axes.
fn axis_label(piece: &str) -> String {
    let trimmed = piece.trim_start_matches(' ').replace('\n', "⏎");
    if trimmed.is_empty() {
        "␣".to_string()
    } else {
        trimmed
    }
}

fn run(args: &Args) -> Result<(), Error> {
    let dir = models::ensure_smollm2_hf().map_err(Error::Model)?;
    let cfg = ModelConfig::load(&dir.join("config.json"))?;
    let tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))?;
    let ids = match &args.ids {
        Some(ids) => ids.clone(),
        None => tokenizer.encode(&args.prompt, false),
    };
    if ids.len() < 2 || ids.len() > MAX_TOKENS {
        return Err(Error::Config(format!(
            "the prompt is {} tokens; this tool needs between 2 and {MAX_TOKENS}",
            ids.len()
        )));
    }
    let pieces = ids
        .iter()
        .map(|&id| {
            tokenizer
                .piece(id)
                .map(|b| String::from_utf8_lossy(b).into_owned())
        })
        .collect::<Result<Vec<String>, _>>()?;

    let st = SafeTensors::open(dir.join("model.safetensors"))?;
    let seq = ids.len();
    let weights = layer_pattern(&st, &cfg, args.layer, &ids)?; // (n_heads, seq, seq)
    let heads = cfg.heads;
    let stats: Vec<HeadStats> = weights
        .chunks_exact(seq * seq)
        .map(|w| HeadStats::of(w, seq))
        .collect();

    if let Some(path) = &args.svg {
        let labels: Vec<String> = pieces.iter().map(|p| axis_label(p)).collect();
        let mut title = format!("SmolLM2-135M, layer {}: attention of each head", args.layer);
        if args.layer > 0 {
            title.push_str(" (fed raw embeddings)");
        }
        write_file(path, &heatmap_svg(&weights, heads, seq, &labels, &title))?;
    }

    if args.json {
        let round = |x: f32| (x as f64 * 1e4).round() / 1e4;
        let heads_json: Vec<_> = stats
            .iter()
            .enumerate()
            .map(|(h, st)| {
                let rows: Vec<Vec<f64>> = weights[h * seq * seq..(h + 1) * seq * seq]
                    .chunks_exact(seq)
                    .map(|r| r.iter().map(|&x| round(x)).collect())
                    .collect();
                json!({
                    "head": h, "kv_head": heads.kv_head(h),
                    "sink": round(st.sink), "self": round(st.self_share), "prev": round(st.prev),
                    "reading": st.kind(), "argmax": st.argmax, "weights": rows,
                })
            })
            .collect();
        let doc = json!({
            "model": "SmolLM2-135M-Instruct", "layer": args.layer,
            "n_heads": heads.n_heads, "n_kv_heads": heads.n_kv_heads, "head_dim": heads.head_dim,
            "rope_theta": cfg.rope_theta,
            "tokens": ids.iter().zip(&pieces).map(|(id, p)| json!({"id": id, "piece": p})).collect::<Vec<_>>(),
            "heads": heads_json,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).expect("JSON of plain numbers and strings")
        );
        return Ok(());
    }

    println!(
        "SmolLM2-135M-Instruct, layer {}: {} query heads sharing {} KV heads, head_dim {}, RoPE θ = {} (split halves)",
        args.layer, heads.n_heads, heads.n_kv_heads, heads.head_dim, cfg.rope_theta
    );
    if args.layer > 0 {
        println!(
            "note: layer {} is fed the token embeddings here, not the residual stream after {} layers",
            args.layer, args.layer
        );
    }
    println!("prompt: {seq} tokens\n");
    print!("{}", report(&stats, |h| heads.kv_head(h), &pieces));
    if let Some(path) = &args.svg {
        println!("\nwrote the heatmaps to {}", path.display());
    }
    Ok(())
}

fn write_file(path: &Path, text: &str) -> Result<(), Error> {
    ch01_tensors::files::write_output(path, text).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn main() -> ExitCode {
    ch01_tensors::pipe::quiet_when_closed();
    let args = match parse_args() {
        Ok(Some(args)) => args,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if let Some(path) = &args.markdown {
        return match bench(path) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        };
    }
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
