//! The commands that make text: generate (the default), `chat`, `stages`, `perplexity`.

use std::io::Write;
use std::path::PathBuf;

use ch01_tensors::models;
use ch09_generate::{Sampler, generate};
use serde_json::json;

use crate::cli::{Args, MAX_TURN_BYTES};

pub fn model_path(a: &Args) -> Result<PathBuf, String> {
    match &a.model {
        Some(p) => Ok(p.clone()),
        None => {
            let p = models::smollm2_gguf();
            if !p.exists() {
                models::fetch("smollm2-gguf")?; // the GGUF alone: hf/ is for chapters 1-5
            }
            models::require(&p)
        }
    }
}

/// `perplexity`: the fixtures' method on any text file.
pub fn perplexity(a: &Args) -> Result<(), String> {
    let m = ch08_gguf::load(&model_path(a)?).map_err(|e| e.to_string())?;
    let path = a.text_file.as_deref().unwrap_or(std::path::Path::new(""));
    let text = ch01_tensors::files::read_to_string(path, ch01_tensors::files::MAX_TEXT_FILE)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let ids = m.tokenizer.tokenizer.encode(&text, false);
    let bos = m.tokenizer.bos.filter(|_| m.tokenizer.add_bos);
    let engine = m.engine()?;
    let (ppl, scored) = ch07_simd_parallel::pool::in_pool(a.threads, || {
        ch09_generate::perplexity::perplexity(&engine, &ids, bos)
    })??;
    if a.json {
        println!(
            "{}",
            json!({"perplexity": ppl, "text_tokens": ids.len(), "scored_tokens": scored})
        );
    } else {
        println!(
            "perplexity {ppl:.4} over {scored} scored tokens ({} in the text)",
            ids.len()
        );
    }
    Ok(())
}

// ANCHOR: sigint
/// Set by Ctrl-C; the chat loop clears it before each reply.
static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, std::sync::atomic::Ordering::Relaxed); // async-signal-safe
}
// ANCHOR_END: sigint

/// `chat`: turns from standard input, replies streamed, the KV cache kept between turns.
/// Ctrl-C stops the reply being written, not the program; end of input (Ctrl-D) exits.
pub fn chat(a: &Args) -> Result<(), String> {
    #[cfg(unix)]
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t);
    }
    use std::io::{BufRead, Read};
    let m = ch08_gguf::load(&model_path(a)?).map_err(|e| e.to_string())?;
    let mut session = ch09_generate::session::ChatSession::new(
        &m,
        a.system.as_deref(),
        8192,
        Some(ch09_generate::chat::sandbox::Sandbox::this_program()?),
    )?;
    let mut sampler = Sampler::new(a.sampling.clone());
    let mut last = None;
    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    let mut input = stdin.lock();
    let mut buf = Vec::new();
    loop {
        eprint!("> ");
        // One turn per line, read through a bound so a line without an end cannot grow
        // without limit.
        buf.clear();
        let n = (&mut input)
            .take(MAX_TURN_BYTES + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| format!("reading standard input: {e}"))?;
        if n == 0 {
            break;
        }
        if buf.len() as u64 > MAX_TURN_BYTES && buf.last() != Some(&b'\n') {
            return Err(format!("a turn is longer than {MAX_TURN_BYTES} bytes"));
        }
        let line =
            std::str::from_utf8(&buf).map_err(|_| "standard input is not UTF-8".to_string())?;
        let line = line.trim();
        match line {
            "" => continue,
            "/reset" => {
                session.reset();
                eprintln!("(conversation forgotten)");
                continue;
            }
            "/stats" => {
                match &last {
                    Some(s) => eprintln!("{s:?}"),
                    None => eprintln!("(no turn yet)"),
                }
                continue;
            }
            _ => {}
        }
        if a.echo {
            println!("> {line}");
        }
        INTERRUPTED.store(false, std::sync::atomic::Ordering::Relaxed);
        let interrupted = || INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed);
        let stats = ch07_simd_parallel::pool::in_pool(a.threads, || {
            session.turn(line, &mut sampler, a.n, &interrupted, &mut |t| {
                let _ = write!(out, "{t}");
                let _ = out.flush();
            })
        })??;
        println!();
        if stats.stop == ch09_generate::StopReason::Interrupted {
            eprintln!("(interrupted)");
        }
        if stats.truncated {
            eprintln!("(the context was full: earlier turns were dropped)");
        }
        last = Some(stats);
    }
    Ok(())
}

/// The prompt's tokens: the text as given (control tokens written in it parsed), or with
/// `--chat` a user turn in the model's chat template, its text kept as text.
fn prompt_ids(a: &Args, m: &ch08_gguf::Loaded) -> Result<Vec<u32>, String> {
    let user_text = a.prompt.as_deref().unwrap_or_default();
    if !a.chat {
        return Ok(m.tokenizer.encode_prompt(user_text, true));
    }
    use ch09_generate::chat::{Chat, Message, sandbox::Sandbox};
    let chat = Chat::of_model(m, Some(Sandbox::this_program()?))?;
    let mut messages = Vec::new();
    if let Some(s) = &a.system {
        messages.push(Message::new("system", s));
    }
    messages.push(Message::new("user", user_text));
    chat.prompt_ids(&m.tokenizer, &messages)
}

/// `stages`: the prompt's next-token distribution after each stage of the sampling chain,
/// as a table (or JSON), and with `--svg` as a figure.
pub fn stages(a: &Args) -> Result<(), String> {
    let path = model_path(a)?;
    let m = ch08_gguf::load(&path).map_err(|e| e.to_string())?;
    let engine = m.engine()?;
    let prompt = prompt_ids(a, &m)?;
    if prompt.is_empty() {
        return Err("the prompt is empty: the model needs at least one token".into());
    }
    let logits = ch07_simd_parallel::pool::in_pool(a.threads, || {
        let mut cache = engine.new_cache(prompt.len()).map_err(|e| e.to_string())?;
        engine
            .forward(&mut cache, &prompt, 0)
            .map_err(|e| e.to_string())
    })??;
    let sampler = Sampler::new(a.sampling.clone());
    let st = ch09_generate::stages::stages(&sampler, &logits, &prompt, 12);
    let piece = |id: u32| m.tokenizer.tokenizer.piece(id).unwrap_or_default();
    let visible = |id: u32| ch02_tokenizer::show::visible(piece(id));
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    if let Some(out) = &a.svg {
        let title = "The next token, after each stage of the sampling chain";
        let subtitle = format!(
            "{name} after {:?} (probabilities renormalised over the survivors)",
            a.prompt.as_deref().unwrap_or_default()
        );
        std::fs::write(out, st.svg(title, &subtitle, &visible))
            .map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    }
    if a.json {
        let tokens: Vec<_> = st
            .rows
            .iter()
            .map(|&id| json!({"id": id, "text": String::from_utf8_lossy(piece(id))}))
            .collect();
        let stages: Vec<_> = st
            .stages
            .iter()
            .map(|s| {
                json!({"stage": s.label, "survivors": s.survivors,
                            "probabilities": s.probs, "rest": s.rest})
            })
            .collect();
        println!(
            "{:#}",
            json!({"model": name, "prompt_tokens": prompt.len(),
                   "tokens": tokens, "stages": stages})
        );
        return Ok(());
    }
    println!(
        "The next token after {:?} ({name}), after each stage of the chain:\n",
        a.prompt.as_deref().unwrap_or_default(),
    );
    print!("{}", st.table(&visible));
    if let Some(out) = &a.svg {
        eprintln!("wrote {}", out.display());
    }
    Ok(())
}

pub fn run(a: &Args) -> Result<(), String> {
    let path = model_path(a)?;
    let m = ch08_gguf::load(&path).map_err(|e| e.to_string())?;
    let engine = m.engine()?;
    let tok = &m.tokenizer;
    let prompt = prompt_ids(a, &m)?;
    if a.verbose {
        let s = &a.sampling;
        eprintln!(
            "sampling: penalties (repeat {}, frequency {}, presence {}, last {}) -> top-k {} -> top-p {} -> min-p {} -> temperature {} -> draw (seed {})",
            s.repeat_penalty,
            s.frequency_penalty,
            s.presence_penalty,
            s.repeat_last_n,
            s.top_k,
            s.top_p,
            s.min_p,
            s.temperature,
            s.seed
        );
        eprintln!(
            "model: {} ({}), prompt: {} tokens",
            models::shown(&path),
            m.model.family.name,
            prompt.len()
        );
    }
    let mut sampler = Sampler::new(a.sampling.clone());
    let mut out = std::io::stdout();
    if !a.json && !a.chat {
        print!("{}", a.prompt.as_deref().unwrap_or_default());
        let _ = out.flush();
    }
    let json = a.json;
    let g = ch07_simd_parallel::pool::in_pool(a.threads, || {
        generate(
            &engine,
            &tok.tokenizer,
            &m.model.config.eos_token_ids,
            &prompt,
            a.n,
            &mut sampler,
            &a.stops,
            &mut |piece| {
                if !json {
                    let _ = write!(out, "{piece}");
                    let _ = out.flush();
                }
            },
        )
    })??;
    if a.json {
        println!(
            "{:#}",
            json!({
                "prompt_ids": prompt, "generated_ids": g.ids, "text": g.text,
                "stop_reason": g.stop.name(),
                "timings": {"prefill_ms": g.prefill_seconds * 1e3,
                            "prefill_tok_s": prompt.len() as f64 / g.prefill_seconds.max(1e-9),
                            "decode_tok_s": g.decode_tok_s()},
            })
        );
        return Ok(());
    }
    eprintln!(
        "\n---\n{} prompt tokens in {:.1} ms; {} generated at {:.1} tok/s; stopped: {}",
        prompt.len(),
        g.prefill_seconds * 1e3,
        g.ids.len(),
        g.decode_tok_s(),
        g.stop.name()
    );
    Ok(())
}
