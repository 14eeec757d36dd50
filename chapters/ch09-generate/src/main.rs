//! `ch09-generate`: text from a GGUF file, sampled the way people expect, streamed.
//!
//! ```text
//! ch09-generate [-m FILE] -p TEXT [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P]
//!               [--repeat-penalty R] [--repeat-last-n N] [--seed S] [-t THREADS]
//!               [--stop TEXT]... [--json] [--verbose]
//! ch09-generate stages [-m FILE] -p TEXT [sampling options] [--svg OUT.svg] [--json]
//! ```

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use ch01_tensors::models;
use ch09_generate::{Sampler, SamplerConfig, generate};
use serde_json::json;

const USAGE: &str = "\
usage: ch09-generate [-m FILE] -p TEXT [options]
       ch09-generate perplexity [-m FILE] --text FILE [--json]
       ch09-generate bench [-m FILE] [-t THREADS] [--compare] [--json]
       ch09-generate chat [-m FILE] [--system TEXT] [sampling options]
           one user turn per line of standard input; /reset forgets the conversation,
           /stats shows the last turn's cost, Ctrl-C stops a reply, end of input (Ctrl-D) exits
       ch09-generate stages [-m FILE] -p TEXT [sampling options] [--svg OUT.svg] [--json]
           the next token's distribution after each stage of the sampling chain
       ch09-generate roofline [-t THREADS] [--svg OUT.svg] [--json]
           both models' decode against the memory's read bandwidth: GB/s of weights
           streamed by a whole step, by the layers' products, by the LM head

Generates text from a GGUF model (SmolLM2 or Gemma-3), streamed as it is made.

options (defaults in brackets):
  -m, --model FILE        the GGUF file [SmolLM2-135M-Instruct Q4_1, fetched on first use]
  -p, --prompt TEXT       the prompt (special tokens such as <|im_start|> are parsed)
  -n, --n-predict N       tokens to generate at most [128]
  --temp T                temperature; 0 is greedy [0.8]
  --top-k K               keep the K most likely tokens; 0 is off [40]
  --top-p P               keep the fewest tokens whose probabilities reach P; 1 is off [0.95]
  --min-p P               keep tokens at least P times as likely as the best; 0 is off [0.05]
  --repeat-penalty R      divide (multiply, if negative) recent tokens' logits; 1 is off [1.0]
  --repeat-last-n N       how many recent tokens the penalties see [64]
  --frequency-penalty F   subtract F per occurrence in the recent tokens [0]
  --presence-penalty P    subtract P once from every recent token [0]
  --seed S                the random seed; the same seed gives the same text [0]
  --stop TEXT             stop when TEXT appears (may be given up to 16 times)
  -t, --threads N         threads [the machine's physical cores]
  --chat                  treat the prompt as a user turn, in the model's chat template
  --system TEXT           with --chat: a system message first
  --echo                  chat: print each turn, after `> `, before its reply (a transcript)
  --json                  print one JSON object: prompt_ids, generated_ids, text, stop_reason,
                          timings
  --verbose               print the sampling chain and the settings first (to stderr)
  --text FILE             perplexity: the text to score
  --compare               bench: also race llama.cpp: llama-bench's pp512/tg128, and llama-completion
                          as a whole process (cold, 32-token prompt, 1 token: time and peak memory);
                          build them first with bash scripts/llamacpp.sh
  --svg FILE              stages, roofline: also draw the figure as SVG
  -h, --help              this text";

struct Args {
    command: String,
    text_file: Option<PathBuf>,
    compare: bool,
    svg: Option<PathBuf>,
    model: Option<PathBuf>,
    prompt: Option<String>,
    n: usize,
    threads: usize,
    stops: Vec<String>,
    json: bool,
    verbose: bool,
    chat: bool,
    echo: bool,
    system: Option<String>,
    sampling: SamplerConfig,
}

const MAX_NEW_TOKENS: usize = 1 << 16;
const MAX_THREADS: usize = 256;
const MAX_STOPS: usize = 16;
const MAX_STOP_BYTES: usize = 256;
/// The longest line `chat` reads as one turn.
const MAX_TURN_BYTES: u64 = 1 << 20;

fn number<T: std::str::FromStr>(p: &mut lexopt::Parser, flag: &str) -> Result<T, lexopt::Error> {
    use lexopt::ValueExt;
    let v = p.value()?.string()?;
    v.parse()
        .map_err(|_| format!("{flag}: {v:?} is not a valid number").into())
}

fn parse_args() -> Result<Option<Args>, lexopt::Error> {
    use lexopt::prelude::*;
    let mut a = Args {
        command: "generate".into(),
        text_file: None,
        compare: false,
        svg: None,
        model: None,
        prompt: None,
        n: 128,
        threads: ch07_simd_parallel::cores::physical_cores(),
        stops: Vec::new(),
        json: false,
        verbose: false,
        chat: false,
        echo: false,
        system: None,
        sampling: SamplerConfig::default(),
    };
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next()? {
        match arg {
            Short('m') | Long("model") => a.model = Some(p.value()?.into()),
            Short('p') | Long("prompt") => a.prompt = Some(p.value()?.string()?),
            Short('n') | Long("n-predict") => a.n = number(&mut p, "-n")?,
            Short('t') | Long("threads") => a.threads = number(&mut p, "--threads")?,
            Long("temp") => a.sampling.temperature = number(&mut p, "--temp")?,
            Long("top-k") => a.sampling.top_k = number(&mut p, "--top-k")?,
            Long("top-p") => a.sampling.top_p = number(&mut p, "--top-p")?,
            Long("min-p") => a.sampling.min_p = number(&mut p, "--min-p")?,
            Long("repeat-penalty") => {
                a.sampling.repeat_penalty = number(&mut p, "--repeat-penalty")?
            }
            Long("repeat-last-n") => a.sampling.repeat_last_n = number(&mut p, "--repeat-last-n")?,
            Long("frequency-penalty") => {
                a.sampling.frequency_penalty = number(&mut p, "--frequency-penalty")?
            }
            Long("presence-penalty") => {
                a.sampling.presence_penalty = number(&mut p, "--presence-penalty")?
            }
            Long("seed") => a.sampling.seed = number(&mut p, "--seed")?,
            Long("stop") => a.stops.push(p.value()?.string()?),
            Long("json") => a.json = true,
            Long("verbose") => a.verbose = true,
            Long("chat") => a.chat = true,
            Long("echo") => a.echo = true,
            Long("system") => a.system = Some(p.value()?.string()?),
            Long("text") => a.text_file = Some(p.value()?.into()),
            Long("compare") => a.compare = true,
            Long("svg") => a.svg = Some(p.value()?.into()),
            Value(v) if a.command == "generate" && a.prompt.is_none() => {
                let v = v.string()?;
                match v.as_str() {
                    "perplexity" | "bench" | "chat" | "stages" | "roofline" => a.command = v,
                    other => return Err(format!(
                        "unknown command {other:?} (chat, stages, perplexity or bench; generating needs -p TEXT)"
                    )
                    .into()),
                }
            }
            Short('h') | Long("help") => return Ok(None),
            _ => return Err(arg.unexpected()),
        }
    }
    let s = &a.sampling;
    let check = |ok: bool, msg: &str| -> Result<(), lexopt::Error> {
        if ok {
            Ok(())
        } else {
            Err(msg.to_string().into())
        }
    };
    check(
        !matches!(a.command.as_str(), "generate" | "stages") || a.prompt.is_some(),
        "a prompt is needed: -p TEXT",
    )?;
    check(
        a.svg.is_none() || matches!(a.command.as_str(), "stages" | "roofline"),
        "--svg goes with stages or roofline",
    )?;
    check(!a.echo || a.command == "chat", "--echo goes with chat")?;
    check(
        a.command != "perplexity" || a.text_file.is_some(),
        "perplexity needs --text FILE",
    )?;
    check(
        a.text_file.is_none() || a.command == "perplexity",
        "--text goes with perplexity",
    )?;
    check(
        !a.compare || a.command == "bench",
        "--compare goes with bench",
    )?;
    check(
        (1..=MAX_NEW_TOKENS).contains(&a.n),
        "-n must be between 1 and 65536",
    )?;
    check(
        (1..=MAX_THREADS).contains(&a.threads),
        "--threads must be between 1 and 256",
    )?;
    check(
        s.temperature.is_finite() && (0.0..=100.0).contains(&s.temperature),
        "--temp must be between 0 and 100",
    )?;
    check(s.top_p > 0.0 && s.top_p <= 1.0, "--top-p must be in (0, 1]")?;
    check((0.0..=1.0).contains(&s.min_p), "--min-p must be in [0, 1]")?;
    check(s.top_k <= 1 << 20, "--top-k must be at most 1048576")?;
    check(
        s.repeat_penalty.is_finite() && s.repeat_penalty > 0.0,
        "--repeat-penalty must be positive",
    )?;
    check(
        s.repeat_last_n <= MAX_NEW_TOKENS,
        "--repeat-last-n must be at most 65536",
    )?;
    check(
        s.frequency_penalty.is_finite() && s.presence_penalty.is_finite(),
        "--frequency-penalty and --presence-penalty must be finite",
    )?;
    check(
        a.system.is_none() || a.chat || a.command == "chat",
        "--system goes with --chat or chat",
    )?;
    check(a.stops.len() <= MAX_STOPS, "at most 16 --stop strings")?;
    check(
        a.stops
            .iter()
            .all(|s| !s.is_empty() && s.len() <= MAX_STOP_BYTES),
        "a --stop string must be 1 to 256 bytes",
    )?;
    Ok(Some(a))
}

fn model_path(a: &Args) -> Result<PathBuf, String> {
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
fn perplexity(a: &Args) -> Result<(), String> {
    let m = ch08_gguf::load(&model_path(a)?).map_err(|e| e.to_string())?;
    let path = a.text_file.as_deref().unwrap_or(std::path::Path::new(""));
    let text = ch01_tensors::files::read_to_string(path, ch01_tensors::files::MAX_TEXT_FILE)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let ids = m.tokenizer.tokenizer.encode(&text, false);
    let bos = m.tokenizer.bos.filter(|_| m.tokenizer.add_bos);
    let engine = m.engine()?;
    let (ppl, scored) = ch07_simd_parallel::bench::in_pool(a.threads, || {
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

/// Peak resident memory of this process so far (`VmHWM`), in bytes.
fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// Milliseconds from `start` to the first token of a 32-token prompt: load, prefill, sample.
fn time_to_first_token(
    path: &std::path::Path,
    threads: usize,
    start: std::time::Instant,
) -> Result<f64, String> {
    let m = ch08_gguf::load(path).map_err(|e| e.to_string())?;
    let engine = m.engine()?;
    let vocab = m.model.config.vocab_size as u64;
    let prompt: Vec<u32> = (0..32u64)
        .map(|i| ((i * 7919 + 13) % vocab) as u32)
        .collect();
    let mut sampler = Sampler::new(SamplerConfig {
        temperature: 0.0,
        ..Default::default()
    });
    ch07_simd_parallel::bench::in_pool(threads, || -> Result<(), String> {
        let mut cache = engine.new_cache(prompt.len()).map_err(|e| e.to_string())?;
        let logits = engine
            .forward(&mut cache, &prompt, 0)
            .map_err(|e| e.to_string())?;
        std::hint::black_box(sampler.sample(&logits, &prompt));
        Ok(())
    })??;
    Ok(start.elapsed().as_secs_f64() * 1e3)
}

/// `bench`: time to first token cold and warm, pp512, tg128, peak memory, and with
/// `--compare` the race against llama-bench.
fn bench(a: &Args, process_start: std::time::Instant) -> Result<(), String> {
    let path = model_path(a)?;
    // Cold: the file dropped from the page cache; timed from process start.
    ch08_gguf::memory::evict(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let cold = time_to_first_token(&path, a.threads, process_start)?;
    let warm = time_to_first_token(&path, a.threads, std::time::Instant::now())?;
    let m = ch08_gguf::load(&path).map_err(|e| e.to_string())?;
    let engine = m.engine()?;
    let e2e = ch08_gguf::bench::end_to_end(&engine, a.threads, 3)?;
    // the same 128 tokens as tg128, through the sampler, the stream decoder and the stop
    // matcher: with the default sampling chain, and greedy
    let prompt = m
        .tokenizer
        .encode_prompt(ch09_generate::streamed::PROMPT, true);
    let greedy = SamplerConfig {
        temperature: 0.0,
        ..Default::default()
    };
    let (streamed, streamed_greedy) =
        ch07_simd_parallel::bench::in_pool(a.threads, || -> Result<(f64, f64), String> {
            let tok = &m.tokenizer.tokenizer;
            let d = ch09_generate::streamed::decode_tok_s(&engine, tok, &prompt, &a.sampling, 3)?;
            let g = ch09_generate::streamed::decode_tok_s(&engine, tok, &prompt, &greedy, 3)?;
            Ok((d, g))
        })??;
    let (compare, process) = if a.compare {
        let c = ch08_gguf::bench::compare(&engine, &path, a.threads, 3)?;
        let completion = ch09_generate::race::llama_completion_path()?;
        (
            Some(c),
            Some(ch09_generate::race::race(&path, &completion, a.threads, 3)?),
        )
    } else {
        (None, None)
    };
    let rss = peak_rss();
    if a.json {
        println!(
            "{:#}",
            json!({"model": models::shown(&path), "threads": a.threads,
                   "ttft_cold_ms": cold, "ttft_warm_ms": warm,
                   "pp512_tok_s": e2e.pp512_tok_s, "tg128_tok_s": e2e.tg128_tok_s,
                   "streamed_tok_s": streamed, "streamed_greedy_tok_s": streamed_greedy,
                   "peak_rss_bytes": rss, "compare": compare, "process": process})
        );
        return Ok(());
    }
    println!(
        "{} on {} threads ({} kernels):",
        models::shown(&path),
        a.threads,
        e2e.isa
    );
    println!(
        "  time to first token (32-token prompt): cold {cold:.0} ms (from process start, file evicted), warm {warm:.0} ms"
    );
    println!(
        "  pp512 {:.1} tok/s   tg128 {:.1} tok/s   peak RSS {:.1} MB",
        e2e.pp512_tok_s,
        e2e.tg128_tok_s,
        rss as f64 / 1e6
    );
    println!(
        "  streamed, 128 tokens through generate(): {streamed:.1} tok/s sampled ({:.2}x tg128), {streamed_greedy:.1} tok/s greedy ({:.2}x)",
        streamed / e2e.tg128_tok_s,
        streamed_greedy / e2e.tg128_tok_s
    );
    if let Some(c) = compare {
        println!(
            "  llama.cpp: pp512 {:.1} tok/s ({:.2}x ours/theirs)   tg128 {:.1} tok/s ({:.2}x)",
            c.llama_cpp_pp512_tok_s, c.pp512_ratio, c.llama_cpp_tg128_tok_s, c.tg128_ratio
        );
    }
    if let Some(p) = process {
        println!(
            "  whole process, file evicted, 32-token prompt, 1 token ({} rounds, medians): ours {:.0} ms, {:.1} MB peak; llama-completion {:.0} ms, {:.1} MB peak",
            p.rounds,
            p.ours_ttft_cold_ms,
            p.ours_peak_rss_bytes as f64 / 1e6,
            p.llama_cpp_ttft_cold_ms,
            p.llama_cpp_peak_rss_bytes as f64 / 1e6
        );
    }
    Ok(())
}

// ANCHOR: roofline
/// `roofline`: how close each model's decode comes to the memory's limit. A decode step
/// reads every weight once, so bytes per token ÷ read bandwidth is the fastest it can go;
/// the figure shows GB/s of weights streamed by the whole step (tg128), by the layers'
/// matrix products alone and by the LM head alone (from `ch08-gguf profile`'s decode step).
fn roofline(a: &Args) -> Result<(), String> {
    let bandwidth = ch07_simd_parallel::bench::read_bandwidth(a.threads, 5)?;
    let mut bars = Vec::new();
    let mut rows = Vec::new();
    for (name, path) in [
        ("SmolLM2", models::smollm2_gguf()),
        ("Gemma-3", models::gemma3_gguf()),
    ] {
        let path = models::require(&path)?;
        let m = ch08_gguf::load(&path).map_err(|e| e.to_string())?;
        let engine = m.engine()?;
        let per_token = m.model.bytes_read_per_token() as f64;
        let e2e = ch08_gguf::bench::end_to_end(&engine, a.threads, 3)?;
        let (ops, _) = ch08_gguf::bench::profile(&engine, a.threads, 1, 64, 5)?;
        let gbs = |o: &[&ch07_simd_parallel::profile::OpTime]| {
            let bytes: usize = o.iter().map(|o| o.weight_bytes).sum();
            let ms: f64 = o.iter().map(|o| o.ms).sum();
            bytes as f64 / ms / 1e6
        };
        let (head, layers): (Vec<_>, Vec<_>) = ops
            .iter()
            .filter(|o| o.weight_bytes > 0)
            .partition(|o| o.op.contains("LM head"));
        let ceiling = bandwidth * 1e9 / per_token;
        let step = e2e.tg128_tok_s * per_token / 1e9;
        bars.push((
            format!("{name}: {:.0} of {ceiling:.0} tok/s", e2e.tg128_tok_s),
            step,
        ));
        bars.push((format!("{name} layers"), gbs(&layers)));
        bars.push((format!("{name} LM head"), gbs(&head)));
        rows.push(json!({"model": models::shown(&path), "mb_per_token": per_token / 1e6,
            "tg128_tok_s": e2e.tg128_tok_s, "ceiling_tok_s": ceiling, "share_of_ceiling": e2e.tg128_tok_s / ceiling,
            "step_gb_s": step, "layers_gb_s": gbs(&layers), "lm_head_gb_s": gbs(&head)}));
    }
    if let Some(out) = &a.svg {
        let title = format!(
            "{} threads: weights streamed per second in a decode step",
            a.threads
        );
        std::fs::write(
            out,
            ch07_simd_parallel::roofline::svg(&title, &bars, bandwidth),
        )
        .map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    }
    if a.json {
        println!(
            "{:#}",
            json!({"threads": a.threads, "read_bandwidth_gb_s": bandwidth, "models": rows})
        );
        return Ok(());
    }
    println!("read bandwidth, {} threads: {bandwidth:.1} GB/s", a.threads);
    for r in &rows {
        println!(
            "{}: {:.1} MB a token; ceiling {:.0} tok/s; tg128 {:.1} tok/s ({:.0}% of it); GB/s: step {:.1}, layers' products {:.1}, LM head {:.1}",
            r["model"].as_str().unwrap_or("?"),
            r["mb_per_token"].as_f64().unwrap_or(0.0),
            r["ceiling_tok_s"].as_f64().unwrap_or(0.0),
            r["tg128_tok_s"].as_f64().unwrap_or(0.0),
            100.0 * r["share_of_ceiling"].as_f64().unwrap_or(0.0),
            r["step_gb_s"].as_f64().unwrap_or(0.0),
            r["layers_gb_s"].as_f64().unwrap_or(0.0),
            r["lm_head_gb_s"].as_f64().unwrap_or(0.0),
        );
    }
    Ok(())
}
// ANCHOR_END: roofline

// ANCHOR: sigint
/// Set by Ctrl-C; the chat loop clears it before each reply.
static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, std::sync::atomic::Ordering::Relaxed); // async-signal-safe
}
// ANCHOR_END: sigint

/// `chat`: turns from standard input, replies streamed, the KV cache kept between turns.
/// Ctrl-C stops the reply being written, not the program; end of input (Ctrl-D) exits.
fn chat(a: &Args) -> Result<(), String> {
    #[cfg(unix)]
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t);
    }
    use std::io::{BufRead, Read};
    let m = ch08_gguf::load(&model_path(a)?).map_err(|e| e.to_string())?;
    let mut session = ch09_generate::session::ChatSession::new(&m, a.system.as_deref(), 8192)?;
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
        let stats = ch07_simd_parallel::bench::in_pool(a.threads, || {
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

/// The prompt's text: as given, or with `--chat` rendered as a user turn in the model's
/// chat template.
fn prompt_text(a: &Args, m: &ch08_gguf::Loaded) -> Result<String, String> {
    let user_text = a.prompt.as_deref().unwrap_or_default();
    if !a.chat {
        return Ok(user_text.to_string());
    }
    use ch09_generate::chat::{ChatTemplate, Message, render};
    let template = ChatTemplate::from_gguf(&m.file.gguf)?;
    let mut messages = Vec::new();
    if let Some(s) = &a.system {
        messages.push(Message::new("system", s));
    }
    messages.push(Message::new("user", user_text));
    render(&template, &messages, true)
}

/// `stages`: the prompt's next-token distribution after each stage of the sampling chain,
/// as a table (or JSON), and with `--svg` as a figure.
fn stages(a: &Args) -> Result<(), String> {
    let path = model_path(a)?;
    let m = ch08_gguf::load(&path).map_err(|e| e.to_string())?;
    let engine = m.engine()?;
    let text = prompt_text(a, &m)?;
    let prompt = m.tokenizer.encode_prompt(&text, true);
    if prompt.is_empty() {
        return Err("the prompt is empty: the model needs at least one token".into());
    }
    let logits = ch07_simd_parallel::bench::in_pool(a.threads, || {
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

fn run(a: &Args) -> Result<(), String> {
    let path = model_path(a)?;
    let m = ch08_gguf::load(&path).map_err(|e| e.to_string())?;
    let engine = m.engine()?;
    let tok = &m.tokenizer;
    let prompt_text = prompt_text(a, &m)?;
    let prompt_text = prompt_text.as_str();
    let prompt = tok.encode_prompt(prompt_text, true);
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
        print!("{prompt_text}");
        let _ = out.flush();
    }
    let json = a.json;
    let g = ch07_simd_parallel::bench::in_pool(a.threads, || {
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

fn main() -> ExitCode {
    let process_start = std::time::Instant::now();
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
        "perplexity" => perplexity(&args),
        "bench" => bench(&args, process_start),
        "chat" => chat(&args),
        "stages" => stages(&args),
        "roofline" => roofline(&args),
        _ => run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
