//! `cargo run --release -p ch02-tokenizer`: text to token ids and back, as llama.cpp does it.
//!
//! ```text
//! ch02-tokenizer                        a sentence shown as [piece id] tokens
//! ch02-tokenizer encode [--special]     stdin text  -> JSON array of ids
//! ch02-tokenizer decode                 stdin JSON array of ids -> text
//! ch02-tokenizer train FILE             learn merges from a text file, show the first ones
//! ch02-tokenizer bench --markdown FILE  encode speed of each merge loop (measure.rs)
//! ```

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use ch01_tensors::models;
use ch02_tokenizer::byte_level::ByteLevel;
use ch02_tokenizer::show::visible;
use ch02_tokenizer::train::train;
use ch02_tokenizer::{PreTokenizer, StreamDecoder, TokenId, Tokenizer, smollm2_tokenizer_path};
use serde_json::json;

mod measure;

const USAGE: &str = "\
usage: ch02-tokenizer [--tokenizer PATH] [--text TEXT] [--json]
       ch02-tokenizer encode [--tokenizer PATH] [--special]   < text
       ch02-tokenizer decode [--tokenizer PATH]               < [ids]
       ch02-tokenizer train [--merges N] [--json] FILE
       ch02-tokenizer parity [--tokenizer PATH]
       ch02-tokenizer bench [--tokenizer PATH] --markdown FILE

  (no command)      show how a sentence is cut into tokens, with their ids
  encode            read UTF-8 text from stdin, print its token ids as a JSON array
  decode            read a JSON array of token ids from stdin, print the text
  train             learn N byte-level BPE merges from FILE and show them
  parity            encode every case of fixtures/reference/tokenizer-smollm2.json and count
                    how many give llama.cpp's ids (exit 1 if any does not)
  bench             time encode with each merge loop (naive, heap, auto) in MB/s, best of
                    at least 3 runs, and write the table to the --markdown FILE
  --tokenizer PATH  a tokenizer.json (default: SmolLM2's, in the models directory)
  --text TEXT       the sentence for the demo
  --special         parse special tokens such as <|im_start|> in the text
  --merges N        how many merges to learn (default 12, at most 5000)
  --json            print machine-readable JSON instead of text
  --markdown FILE   bench: where to write its Markdown table
  -h, --help        this help";

const DEMO_TEXT: &str = "Hello world! Tokenizers don't see 2025 as one token, and 🦀 takes three.";
const CHAT_TEXT: &str = "<|im_start|>user\nHi!<|im_end|>";

#[derive(Default)]
struct Args {
    command: Option<String>,
    tokenizer: Option<PathBuf>,
    text: Option<String>,
    special: bool,
    json: bool,
    merges: Option<usize>,
    file: Option<PathBuf>,
    markdown: Option<PathBuf>,
}

fn parse_args() -> Result<Args, lexopt::Error> {
    use lexopt::prelude::*;
    let mut args = Args::default();
    let mut parser = lexopt::Parser::from_env();
    while let Some(arg) = parser.next()? {
        match arg {
            Long("tokenizer") => args.tokenizer = Some(parser.value()?.into()),
            Long("text") => args.text = Some(parser.value()?.string()?),
            Long("special") => args.special = true,
            Long("json") => args.json = true,
            Long("markdown") => args.markdown = Some(parser.value()?.into()),
            Long("merges") => {
                let n: usize = parser.value()?.parse()?;
                if n > 5000 {
                    return Err("--merges: at most 5000".into());
                }
                args.merges = Some(n);
            }
            Short('h') | Long("help") => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            Value(v) if args.command.is_none() => {
                let v = v.string()?;
                if !["encode", "decode", "train", "parity", "bench"].contains(&v.as_str()) {
                    return Err(format!("unknown command {v:?}").into());
                }
                args.command = Some(v);
            }
            Value(v) if args.command.as_deref() == Some("train") && args.file.is_none() => {
                args.file = Some(v.into());
            }
            _ => return Err(arg.unexpected()),
        }
    }
    if args.command.as_deref() == Some("train") && args.file.is_none() {
        return Err("train needs a FILE to learn from".into());
    }
    if args.merges.is_some() && args.command.as_deref() != Some("train") {
        return Err("--merges goes with `train` only".into());
    }
    if (args.command.as_deref() == Some("bench")) != args.markdown.is_some() {
        return Err("`bench` needs --markdown FILE, and --markdown goes with `bench` only".into());
    }
    Ok(args)
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
    let result = match args.command.as_deref() {
        Some("encode") => load(&args, false).and_then(|t| encode(&t, args.special)),
        Some("decode") => load(&args, false).and_then(|t| decode(&t)),
        Some("train") => show_training(&args),
        Some("parity") => load(&args, false).and_then(|t| parity(&t)),
        Some("bench") => load(&args, false).and_then(|t| bench(&t, &args)),
        _ => load(&args, true).and_then(|t| demo(&t, &args)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// The tokenizer from `--tokenizer`, or SmolLM2's. The demo fetches SmolLM2 when it is
/// missing (a first run should just work); `encode` and `decode` never download behind a
/// script's back, they say how to fetch instead.
fn load(args: &Args, fetch_if_missing: bool) -> Result<Tokenizer, String> {
    let path = match &args.tokenizer {
        Some(path) => path.clone(),
        None => {
            let path = smollm2_tokenizer_path();
            if !path.exists() && fetch_if_missing {
                models::ensure_smollm2_hf()?;
            }
            models::require(&path)?
        }
    };
    Tokenizer::from_file(&path).map_err(|e| e.to_string())
}

fn encode(tok: &Tokenizer, special: bool) -> Result<(), String> {
    let mut input = Vec::new();
    std::io::stdin()
        .read_to_end(&mut input)
        .map_err(|e| format!("cannot read stdin: {e}"))?;
    let text = String::from_utf8(input).map_err(|e| {
        format!(
            "stdin is not valid UTF-8 (bad byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })?;
    println!("{}", json!(tok.encode(&text, special)));
    Ok(())
}

fn decode(tok: &Tokenizer) -> Result<(), String> {
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .map_err(|e| format!("cannot read stdin: {e}"))?;
    let ids: Vec<TokenId> = serde_json::from_str(&input).map_err(|e| {
        format!(
            "expected a JSON array of token ids (0 to {}): {e}",
            tok.vocab_size() - 1
        )
    })?;
    let bytes = tok.decode_bytes(&ids).map_err(|e| e.to_string())?;
    let mut out = std::io::stdout().lock();
    out.write_all(&bytes)
        .and_then(|()| out.flush())
        .map_err(|e| format!("cannot write stdout: {e}"))
}

/// Tokens as `[piece id]`, alternating colours on a terminal.
fn bracketed(tok: &Tokenizer, ids: &[TokenId], color: bool) -> String {
    let mut out = String::new();
    for (i, &id) in ids.iter().enumerate() {
        let piece = visible(tok.piece(id).unwrap_or_default());
        if color {
            let bg = [44, 42, 45, 46][i % 4]; // blue, green, magenta, cyan backgrounds
            out.push_str(&format!("\x1b[{bg};97m[{piece} {id}]\x1b[0m"));
        } else {
            out.push_str(&format!("[{piece} {id}]"));
        }
    }
    out
}

fn demo(tok: &Tokenizer, args: &Args) -> Result<(), String> {
    let text = args.text.as_deref().unwrap_or(DEMO_TEXT);
    let ids = tok.encode(text, args.special);
    let chat_plain = tok.encode(CHAT_TEXT, false);
    let chat_special = tok.encode(CHAT_TEXT, true);
    // Stream-decode the sentence; note the tokens that leave bytes waiting.
    let mut stream = StreamDecoder::from_start(tok);
    let mut streamed = Vec::new(); // (id, text printed, bytes still held back)
    for &id in &ids {
        let printed = stream.push(id).map_err(|e| e.to_string())?;
        let held = stream.pending_len();
        if held > 0 || streamed.last().is_some_and(|&(_, _, h)| h > 0) {
            streamed.push((id, printed, held));
        }
    }
    let round_trip = tok.decode(&ids).map_err(|e| e.to_string())?;
    if args.json {
        let pieces: Vec<String> = ids
            .iter()
            .map(|&id| visible(tok.piece(id).unwrap_or_default()))
            .collect();
        let report = json!({
            "vocab_size": tok.vocab_size(),
            "text": text,
            "ids": ids,
            "pieces": pieces,
            "round_trip": round_trip == text,
            "chat": { "text": CHAT_TEXT, "ids_special": chat_special, "ids_plain": chat_plain },
            "stream": streamed.iter().map(|(id, text, held)| json!({"id": id, "printed": text, "held_back": held})).collect::<Vec<_>>(),
        });
        println!("{report}");
        return Ok(());
    }
    let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    println!(
        "vocabulary: {} tokens ({})",
        tok.vocab_size(),
        describe(tok)
    );
    println!("text:       \"{}\"", text.replace('\n', "\\n"));
    println!("{} tokens:\n  {}", ids.len(), bracketed(tok, &ids, color));
    println!(
        "decoded back: {}",
        if round_trip == text {
            "identical"
        } else {
            "DIFFERENT"
        }
    );
    println!("\nspecial tokens, {CHAT_TEXT:?}:");
    println!(
        "  parsed (--special): {}",
        bracketed(tok, &chat_special, color)
    );
    println!(
        "  as plain text:      {}",
        bracketed(tok, &chat_plain, color)
    );
    println!("\nstreaming decode, where a character spans tokens:");
    if streamed.is_empty() {
        println!("  (nowhere: every token holds whole characters)");
    }
    for (id, printed, held) in &streamed {
        let token = bracketed(tok, &[*id], color);
        println!("  {token:<24} prints {printed:?}, holds back {held} byte(s)");
    }
    Ok(())
}

fn describe(tok: &Tokenizer) -> String {
    match tok.model() {
        ch02_tokenizer::Model::ByteLevelBpe { merges, pre, .. } => {
            let split = match pre {
                PreTokenizer::Gpt2 => "GPT-2 split",
                PreTokenizer::DigitsThenGpt2 => "digits alone, then the GPT-2 split",
                PreTokenizer::Llama3 => "Llama 3 split",
                PreTokenizer::Qwen2 => "Qwen2 split",
                PreTokenizer::Qwen35 => "Qwen3.5 split",
                PreTokenizer::DeepSeekLlm => "DeepSeek LLM split",
                PreTokenizer::DeepSeekCoder => "DeepSeek Coder split",
                PreTokenizer::Falcon => "Falcon split",
            };
            format!("byte-level BPE, {} merges, {split}", merges.len())
        }
        ch02_tokenizer::Model::SentencePiece(_) => "SentencePiece BPE".into(),
    }
}

/// The encode-speed table, written to `--markdown FILE`.
fn bench(tok: &Tokenizer, args: &Args) -> Result<(), String> {
    let path = args
        .markdown
        .as_deref()
        .ok_or("bench needs --markdown FILE")?;
    ch01_tensors::files::check_output(path).map_err(|e| e.to_string())?;
    let table = measure::markdown(tok)?;
    ch01_tensors::files::write_output(path, &table)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    println!("wrote {}", path.display());
    Ok(())
}

/// Every case of llama.cpp's tokenizer fixture, both ways: how many ids agree.
fn parity(tok: &Tokenizer) -> Result<(), String> {
    let path =
        ch01_tensors::models::workspace_root().join("fixtures/reference/tokenizer-smollm2.json");
    let text = ch01_tensors::files::read_to_string(&path, ch01_tensors::files::MAX_TEXT_FILE)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let cases = json["cases"].as_array().ok_or("the fixture has no cases")?;
    let ids = |v: &serde_json::Value| -> Vec<TokenId> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_u64())
                    .map(|x| x as TokenId)
                    .collect()
            })
            .unwrap_or_default()
    };
    let (mut plain, mut special) = (0, 0);
    for c in cases {
        let t = c["text"].as_str().unwrap_or("");
        plain += usize::from(tok.encode(t, false) == ids(&c["ids"]));
        special += usize::from(tok.encode(t, true) == ids(&c["ids_special"]));
    }
    println!(
        "{plain}/{} cases match llama.cpp (special tokens as text)",
        cases.len()
    );
    println!(
        "{special}/{} cases match llama.cpp (with special tokens parsed)",
        cases.len()
    );
    if plain == cases.len() && special == cases.len() {
        Ok(())
    } else {
        Err("some cases differ from llama.cpp; `cargo test -p ch02-tokenizer --test parity` says where".into())
    }
}

fn show_training(args: &Args) -> Result<(), String> {
    let path = args.file.as_ref().expect("checked by parse_args");
    let text = ch01_tensors::files::read_to_string(path, ch01_tensors::files::MAX_TEXT_FILE)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let n = args.merges.unwrap_or(12);
    let trained = train(&text, n, PreTokenizer::DigitsThenGpt2).map_err(|e| e.to_string())?;
    let sample = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let tok = &trained.tokenizer;
    let (bytes, tokens) = (sample.len(), tok.encode(sample, false));
    if args.json {
        let merges: Vec<_> = trained
            .merges
            .iter()
            .map(|(l, r, n)| json!([l, r, n]))
            .collect();
        println!(
            "{}",
            json!({ "merges": merges, "sample": sample, "sample_ids": tokens })
        );
        return Ok(());
    }
    println!(
        "learned {} merges from {} ({} bytes):",
        trained.merges.len(),
        path.display(),
        text.len()
    );
    let total = trained.merges.len();
    for (rank, (l, r, count)) in trained.merges.iter().enumerate() {
        if total > 16 && rank == 10 {
            println!("  ...");
        }
        if total > 16 && (10..total - 3).contains(&rank) {
            continue; // the first ten and the last three tell the story
        }
        let show = |s: &str| visible(&ByteLevel::new().decode(s).unwrap_or_default());
        let fused = show(&format!("{l}{r}"));
        println!(
            "  merge {rank:>4}: {:>8} + {:<8} -> {fused:<12} ({count} times)",
            show(l),
            show(r)
        );
    }
    println!("\nfirst line, {bytes} bytes -> {} tokens:", tokens.len());
    println!("  {}", bracketed(tok, &tokens, false));
    Ok(())
}
