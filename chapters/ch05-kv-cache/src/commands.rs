//! The binary's commands: what `ch05-kv-cache generate|compare|session|memory|bench` run.
//! (A module of `main.rs`, not of the library.)

use std::io::Write;
use std::path::{Path, PathBuf};

use ch01_tensors::models;
use ch02_tokenizer::{StreamDecoder, Tokenizer};
use ch04_forward::Model;
use ch04_forward::model::argmax;
use ch05_kv_cache::generate::{Timed, cached_greedy, first_difference, uncached_greedy};
use ch05_kv_cache::memory;
use ch05_kv_cache::paged::PagedCache;
use ch05_kv_cache::{Engine, Error, KvCache, KvStore, Session, bench, forward};
use serde_json::json;

use crate::Args;

/// The model directory: `--model`, or SmolLM2, fetched on first use.
fn model_dir(a: &Args) -> Result<PathBuf, Error> {
    match &a.model {
        Some(dir) => Ok(dir.clone()),
        None => models::ensure_smollm2_hf().map_err(|e| Error::Config(e.to_string())),
    }
}

fn load(a: &Args) -> Result<(PathBuf, Model, Tokenizer), Error> {
    let dir = model_dir(a)?;
    let model = Model::load(&dir)?;
    let tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))
        .map_err(|e| Error::Tokenizer(e.to_string()))?;
    if tokenizer.vocab_size() < model.config.vocab_size {
        // Otherwise ids the model can choose would have no text (chapter 4 refuses too).
        return Err(Error::Tokenizer(format!(
            "tokenizer.json has {} tokens but the model's vocabulary has {}",
            tokenizer.vocab_size(),
            model.config.vocab_size
        )));
    }
    Ok((dir, model, tokenizer))
}

/// The prompt of `generate` and `compare` when none is given.
const DEFAULT_PROMPT: &str = "The capital of France is";
/// The two turns of `session` when none are given: SmolLM2's chat template. The first
/// reply ends with `<|im_end|>`, which the session keeps, so the second turn goes on from it.
const DEFAULT_TURN_1: &str =
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n";
const DEFAULT_TURN_2: &str = "\n<|im_start|>user\nAnd of Italy?<|im_end|>\n<|im_start|>assistant\n";

fn prompt_ids(
    tok: &Tokenizer,
    text: Option<&String>,
    default: &str,
    flag: &str,
) -> Result<Vec<u32>, Error> {
    let text = text.map_or(default, String::as_str);
    let ids = tok.encode(text, true);
    if ids.is_empty() {
        return Err(Error::Config(format!(
            "{flag} is empty: the model needs at least one token"
        )));
    }
    Ok(ids)
}

/// Prints the text of each new token as soon as it is chosen.
fn streamer(tok: &Tokenizer) -> (StreamDecoder<'_>, std::io::Stdout) {
    (StreamDecoder::new(tok), std::io::stdout())
}

fn engine<'m>(model: &'m Model, a: &Args) -> Engine<'m> {
    let mut e = Engine::new(model);
    e.chunk = a.chunk;
    e
}

/// The prompt's ids: `--ids`, or `--prompt` tokenized.
fn the_prompt(a: &Args, tok: &Tokenizer) -> Result<Vec<u32>, Error> {
    match &a.ids {
        Some(ids) if !ids.is_empty() => Ok(ids.clone()),
        Some(_) => Err(Error::Config(
            "--ids is empty: the model needs at least one token".into(),
        )),
        None => prompt_ids(tok, a.prompt.as_ref(), DEFAULT_PROMPT, "--prompt"),
    }
}

pub fn generate(a: &Args) -> Result<(), Error> {
    let (dir, model, tok) = load(a)?;
    let prompt = the_prompt(a, &tok)?;
    bench::warm_up(&model)?;
    let ctx = a.ctx.min(model.config.max_position_embeddings);
    let layout = forward::kv_layout(&model.config);
    if !a.json {
        println!(
            "model: {} ({} layers, {} bytes of KV cache per token)",
            models::shown(&dir),
            layout.n_layers,
            layout.bytes_per_token()
        );
        println!(
            "prompt: {} tokens; cache: {}",
            prompt.len(),
            if a.paged { "paged" } else { "contiguous" }
        );
        print!("{}", tok.decode(&prompt).unwrap_or_default());
    }
    let (mut dec, mut out) = streamer(&tok);
    let mut on_token = |id: u32| {
        if !a.json {
            let _ = write!(out, "{}", dec.push(id).unwrap_or_default());
            let _ = out.flush();
        }
    };
    let t = if a.paged {
        let mut pool = PagedCache::new(layout, ctx.div_ceil(16), 16, ctx);
        let id = pool.new_seq();
        cached_greedy(
            engine(&model, a),
            pool.seq(id),
            &prompt,
            a.n,
            true,
            &mut on_token,
        )?
    } else {
        cached_greedy(
            engine(&model, a),
            KvCache::new(layout, ctx),
            &prompt,
            a.n,
            true,
            &mut on_token,
        )?
    };
    let prefill_s = t.step_seconds[0];
    let decode_s: f64 = t.step_seconds[1..].iter().sum();
    if a.json {
        let v = json!({
            "prompt_tokens": prompt.len(), "ids": t.ids, "text": tok.decode(&t.ids).unwrap_or_default(),
            "prefill_seconds": prefill_s, "prefill_tokens_per_s": prompt.len() as f64 / prefill_s,
            "decode_tokens": t.ids.len() - 1, "decode_tokens_per_s": t.tokens_per_second(1),
        });
        println!("{v:#}");
    } else {
        println!("\n---");
        println!(
            "prefill: {} tokens in {:.1} ms = {:.1} tok/s",
            prompt.len(),
            prefill_s * 1e3,
            prompt.len() as f64 / prefill_s
        );
        println!(
            "decode: {} tokens in {:.1} ms = {:.1} tok/s",
            t.ids.len() - 1,
            decode_s * 1e3,
            t.tokens_per_second(1)
        );
    }
    Ok(())
}

pub fn compare(a: &Args) -> Result<(), Error> {
    let (_, model, tok) = load(a)?;
    let prompt = the_prompt(a, &tok)?;
    bench::warm_up(&model)?;
    let ctx = (prompt.len() + a.n).min(model.config.max_position_embeddings);
    let layout = forward::kv_layout(&model.config);
    let uncached = uncached_greedy(&model, &prompt, a.n, &mut |_| {})?;
    let cached = cached_greedy(
        engine(&model, a),
        KvCache::new(layout, ctx),
        &prompt,
        a.n,
        false,
        &mut |_| {},
    )?;
    let diff = first_difference(&uncached.ids, &cached.ids);
    let run = |t: &Timed| {
        json!({ "ids": t.ids, "text": tok.decode(&t.ids).unwrap_or_default(),
                "step_ms": t.step_seconds.iter().map(|s| s * 1e3).collect::<Vec<_>>(),
                "tokens_per_s": t.tokens_per_second(0) })
    };
    if a.json {
        let v = json!({ "prompt": tok.decode(&prompt).unwrap_or_default(), "prompt_ids": prompt, "prompt_tokens": prompt.len(), "n": a.n,
                        "identical": diff.is_none(), "first_difference": diff,
                        "uncached": run(&uncached), "cached": run(&cached) });
        println!("{v:#}");
        return Ok(());
    }
    let text = tok.decode(&prompt).unwrap_or_default();
    println!(
        "prompt: {text:?} ({} tokens), {} new tokens each way",
        prompt.len(),
        a.n
    );
    println!("step  token        time to choose it (uncached, then cached)");
    for (i, (u, c)) in uncached
        .step_seconds
        .iter()
        .zip(&cached.step_seconds)
        .enumerate()
    {
        let piece = format!(
            "{:?}",
            tok.decode(&cached.ids[i..i + 1]).unwrap_or_default()
        );
        let note = if i == 0 { " (cached: the prefill)" } else { "" };
        println!(
            "{:>4}  {piece:<12} uncached {:.1} ms, cached {:.1} ms{note}",
            i + 1,
            u * 1e3,
            c * 1e3
        );
    }
    println!("text: {:?}", tok.decode(&cached.ids).unwrap_or_default());
    match diff {
        None => println!("identical: yes, all {} tokens", a.n),
        Some(i) => println!("identical: NO, first difference at generated token {i}"),
    }
    println!(
        "whole run: uncached {:.1} tok/s, cached {:.1} tok/s",
        uncached.tokens_per_second(0),
        cached.tokens_per_second(0)
    );
    if diff.is_some() {
        return Err(Error::Config(
            "the cached and uncached tokens differ".into(),
        ));
    }
    Ok(())
}

pub fn session(a: &Args) -> Result<(), Error> {
    let (_, model, tok) = load(a)?;
    let first = prompt_ids(&tok, a.prompt.as_ref(), DEFAULT_TURN_1, "--prompt")?;
    let second = prompt_ids(&tok, a.then.as_ref(), DEFAULT_TURN_2, "--then")?;
    let layout = forward::kv_layout(&model.config);
    let mut s = Session::new(
        engine(&model, a),
        KvCache::new(layout, a.ctx.min(model.config.max_position_embeddings)),
    );
    for (turn, ids) in [(1, &first), (2, &second)] {
        let before = s.len();
        s.extend(ids)?;
        println!(
            "turn {turn}: {} new tokens computed, {before} reused from the cache",
            ids.len()
        );
        let reply = s.generate(a.n, true, &mut |_| {})?;
        println!(
            "  reply ({} tokens): {:?}",
            reply.len(),
            tok.decode(&reply).unwrap_or_default()
        );
    }
    // The check: one fresh pass over everything must give the same next-token logits.
    let all = s.ids().to_vec();
    let mut fresh = KvCache::new(layout, all.len());
    let once = Engine::new(&model).forward(&mut fresh, &all, 0)?;
    let max_diff = once
        .iter()
        .zip(s.logits())
        .map(|(x, y)| (x - y).abs())
        .fold(0.0f32, f32::max);
    println!(
        "check: one pass over all {} tokens gives the same next token ({}): {}, max |logit difference| {max_diff}",
        all.len(),
        argmax(&once),
        if argmax(&once) == argmax(s.logits()) {
            "yes"
        } else {
            "NO"
        }
    );
    let err = s.extend(&vec![0; s.cache().max_positions()]).unwrap_err();
    println!("a turn too long for the cache: error: {err}");
    Ok(())
}

pub fn memory_report(a: &Args) -> Result<(), Error> {
    let dir = model_dir(a)?;
    let cfg =
        ch04_forward::Config::load(&dir.join("config.json")).map_err(ch04_forward::Error::from)?;
    print!("{}", memory::report(&models::shown(&dir), &cfg));
    Ok(())
}

pub fn bench_cmd(a: &Args) -> Result<(), Error> {
    let report = match &a.from {
        Some(path) => {
            let text =
                ch01_tensors::files::read_to_string(path, 1 << 20).map_err(|source| Error::Io {
                    path: path.clone(),
                    source,
                })?;
            serde_json::from_str(&text).map_err(|e| {
                Error::Config(format!("{}: not a bench report: {e}", path.display()))
            })?
        }
        None => {
            let model = Model::load(&model_dir(a)?)?;
            let max = model.config.max_position_embeddings;
            if let Some(&p) = a.positions.iter().chain([&a.prefill]).find(|&&p| p > max) {
                return Err(Error::Config(format!(
                    "--positions/--prefill {p} is more than the model's context of {max} positions"
                )));
            }
            bench::run(&model, &a.positions, a.prefill, &mut |line| {
                eprintln!("{line}")
            })?
        }
    };
    if let Some(path) = &a.svg {
        write_file(path, &bench::decode_svg(&report))?;
        eprintln!("wrote {}", path.display());
    }
    if let Some(path) = &a.markdown {
        write_file(path, &bench::markdown(&report))?;
        eprintln!("wrote {}", path.display());
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("numbers serialize")
        );
        return Ok(());
    }
    println!("{}", report.machine);
    println!(
        "{:>10} {:>16} {:>16} {:>9}",
        "positions", "cached", "uncached", "speedup"
    );
    for d in &report.decode {
        let speedup = d.cached_tokens_per_s / d.uncached_tokens_per_s;
        println!(
            "{:>10} {:>10.1} tok/s {:>10.2} tok/s {:>8.1}x",
            d.positions, d.cached_tokens_per_s, d.uncached_tokens_per_s, speedup
        );
    }
    let p = &report.prefill;
    println!(
        "prefill of {} tokens: batched {:.1} tok/s, token by token {:.1} tok/s ({:.1}x)",
        p.tokens,
        p.batched_tokens_per_s,
        p.token_by_token_tokens_per_s,
        p.batched_tokens_per_s / p.token_by_token_tokens_per_s
    );
    Ok(())
}

fn write_file(path: &Path, text: &str) -> Result<(), Error> {
    ch01_tensors::files::write_output(path, text).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })
}
