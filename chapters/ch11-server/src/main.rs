//! `ch11-server`: chapter 10's engine behind OpenAI's HTTP API, and a load test for it.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use ch01_tensors::models;
use ch11_server::loadtest::{self, LoadOptions};
use ch11_server::metrics::Metrics;
use ch11_server::routes::{self, HttpLimits, Shared};
use ch11_server::serve;
use ch11_server::worker::{self, Command, Settings};

const USAGE: &str = "\
usage: ch11-server [-m FILE] [--host 127.0.0.1] [--port 8080] [--parallel N] [--kv-mb MB]
                   [--ctx N] [--api-key KEY] [-t THREADS] [--queue N] [--body-limit BYTES]
                   [--client-timeout SECS] [--cors]
           serve OpenAI's API (POST /v1/chat/completions, /v1/completions; GET /v1/models,
           /health, /metrics) and a chat page at /
       ch11-server loadtest --url URL --clients C --requests R [--prompt 128] [--reply 128]
                   [--cancel-rate P] [--seed N] [--json]
           C clients send R streamed completions in all to the server at URL (loopback only)
           and report output tok/s, time to first token and inter-token latency
       ch11-server loadtest --compare [-m FILE] [-t THREADS] [--parallel N] --clients C
                   --requests R [...]
           the same load against this server and against llama-server, each started here on
           the same GGUF with the same slots and threads
       ch11-server demo [-m FILE]
           start a server, send it a few requests, and print what a client sees

options (defaults in brackets):
  -m, --model FILE        the GGUF file [SmolLM2-135M-Instruct Q4_1, fetched on first use]
  --host ADDR             the address to listen on [127.0.0.1: this machine only]
  --port N                the port; 0 picks a free one [8080]
  --parallel N            sequences in the engine's batch at most, 1 to 64 [8]
  --queue N               requests waiting beyond those, 0 to 4096; more get a 503 [32]
  --kv-mb MB              the KV pool, in MB of f32 keys and values [256]
  --ctx N                 positions one request may use, prompt and reply [the model's,
                          at most 4096 and at most what the KV pool holds]
  --api-key KEY           require 'Authorization: Bearer KEY' on /v1 (or set LLM_BOOK_API_KEY)
  -t, --threads N         threads for the model [the machine's physical cores]
  --body-limit BYTES      the largest request body [2097152]
  --client-timeout SECS   how long a client may take to send its headers, or the next
                          piece of its body [10]
  --cors                  allow requests from pages of any origin
  --json                  loadtest: one JSON object
  -h, --help              this text";

pub struct Args {
    pub command: String,
    pub model: Option<PathBuf>,
    pub host: String,
    pub port: u16,
    pub parallel: usize,
    pub queue: usize,
    pub kv_mb: usize,
    pub ctx: Option<usize>,
    pub api_key: Option<String>,
    pub threads: usize,
    pub body_limit: usize,
    pub client_timeout: u64,
    pub cors: bool,
    pub load: LoadOptions,
    pub compare: bool,
}

fn number<T: std::str::FromStr>(p: &mut lexopt::Parser, flag: &str) -> Result<T, lexopt::Error> {
    use lexopt::ValueExt;
    let v = p.value()?.string()?;
    v.parse()
        .map_err(|_| format!("{flag}: {v:?} is not a valid number").into())
}

fn parse_args() -> Result<Option<Args>, lexopt::Error> {
    use lexopt::prelude::*;
    let mut a = Args {
        command: "serve".into(),
        model: None,
        host: "127.0.0.1".into(),
        port: 8080,
        parallel: 8,
        queue: 32,
        kv_mb: 256,
        ctx: None,
        api_key: std::env::var("LLM_BOOK_API_KEY")
            .ok()
            .filter(|k| !k.is_empty()),
        threads: ch07_simd_parallel::cores::physical_cores(),
        body_limit: 2 << 20,
        client_timeout: 10,
        cors: false,
        load: LoadOptions::default(),
        compare: false,
    };
    let mut first = true;
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next()? {
        match arg {
            Value(v) if first && v == "loadtest" => a.command = "loadtest".into(),
            Value(v) if first && v == "demo" => a.command = "demo".into(),
            Short('m') | Long("model") => a.model = Some(p.value()?.into()),
            Long("host") => a.host = p.value()?.string()?,
            Long("port") => a.port = number(&mut p, "--port")?,
            Long("parallel") => a.parallel = number(&mut p, "--parallel")?,
            Long("queue") => a.queue = number(&mut p, "--queue")?,
            Long("kv-mb") => a.kv_mb = number(&mut p, "--kv-mb")?,
            Long("ctx") => a.ctx = Some(number(&mut p, "--ctx")?),
            Long("api-key") => a.api_key = Some(p.value()?.string()?),
            Short('t') | Long("threads") => a.threads = number(&mut p, "--threads")?,
            Long("body-limit") => a.body_limit = number(&mut p, "--body-limit")?,
            Long("client-timeout") => a.client_timeout = number(&mut p, "--client-timeout")?,
            Long("cors") => a.cors = true,
            Long("url") => a.load.url = Some(p.value()?.string()?),
            Long("clients") => a.load.clients = number(&mut p, "--clients")?,
            Long("requests") => a.load.requests = number(&mut p, "--requests")?,
            Long("prompt") => a.load.prompt = number(&mut p, "--prompt")?,
            Long("reply") => a.load.reply = number(&mut p, "--reply")?,
            Long("cancel-rate") => a.load.cancel_rate = number(&mut p, "--cancel-rate")?,
            Long("seed") => a.load.seed = number(&mut p, "--seed")?,
            Long("json") => a.load.json = true,
            Long("compare") => a.compare = true,
            Short('h') | Long("help") => return Ok(None),
            Value(v) => {
                return Err(format!(
                    "unexpected argument {:?} (the commands are loadtest and demo)",
                    v.string()?
                )
                .into());
            }
            _ => return Err(arg.unexpected()),
        }
        first = false;
    }
    let check = |ok: bool, msg: &str| -> Result<(), lexopt::Error> {
        if ok {
            Ok(())
        } else {
            Err(msg.to_string().into())
        }
    };
    check((1..=64).contains(&a.parallel), "--parallel must be 1 to 64")?;
    check(a.queue <= 4096, "--queue must be 0 to 4096")?;
    check(
        (1..=1 << 16).contains(&a.kv_mb),
        "--kv-mb must be 1 to 65536",
    )?;
    check(
        a.ctx.is_none_or(|c| (2..=1 << 20).contains(&c)),
        "--ctx must be 2 to 1048576",
    )?;
    check((1..=256).contains(&a.threads), "--threads must be 1 to 256")?;
    check(
        (1..=1 << 30).contains(&a.body_limit),
        "--body-limit must be 1 to 1073741824 bytes",
    )?;
    check(
        (1..=3600).contains(&a.client_timeout),
        "--client-timeout must be 1 to 3600 seconds",
    )?;
    check(
        a.api_key.as_ref().is_none_or(|k| !k.is_empty()),
        "--api-key must not be empty",
    )?;
    if a.command == "loadtest" {
        check(
            a.load.url.is_some() != a.compare,
            "loadtest needs --url URL, or --compare (not both)",
        )?;
        a.load.check().map_err(lexopt::Error::from)?;
    } else {
        check(
            !a.compare && a.load.url.is_none(),
            "--url and --compare go with loadtest",
        )?;
    }
    Ok(Some(a))
}

pub fn model_path(a: &Args) -> Result<PathBuf, String> {
    match &a.model {
        Some(p) => Ok(p.clone()),
        None => {
            let p = models::smollm2_gguf();
            if !p.exists() {
                models::fetch("smollm2-gguf")?; // the GGUF alone, as chapter 9 fetches it
            }
            models::require(&p)
        }
    }
}

/// The model's chat template, rendered in a child of this program; `None` for a model
/// without one (its chat requests are refused, completions still served).
fn chat_of(loaded: &ch08_gguf::Loaded) -> Result<Option<ch09_generate::chat::Chat>, String> {
    let sandbox = ch09_generate::chat::sandbox::Sandbox::this_program()?;
    Ok(ch09_generate::chat::Chat::of_model(loaded, Some(sandbox)).ok())
}

fn main() -> ExitCode {
    // A chat template renders in a child of this program (see chapter 9's `chat::sandbox`).
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
    let result = if args.command == "demo" {
        model_path(&args).and_then(|m| ch11_server::demo::run(&m))
    } else if args.command == "loadtest" {
        if args.compare {
            model_path(&args)
                .and_then(|m| loadtest::compare(&args.load, &m, args.threads, args.parallel))
        } else {
            loadtest::run_and_print(&args.load)
        }
    } else {
        serve_main(&args)
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

// ANCHOR: serve_main
fn serve_main(a: &Args) -> Result<(), String> {
    let path = model_path(a)?;
    // The model lives as long as the process: every thread may borrow it.
    let loaded: &'static ch08_gguf::Loaded = Box::leak(Box::new(
        ch08_gguf::load(&path).map_err(|e| format!("{}: {e}", path.display()))?,
    ));
    // A request may use the model's positions, at most 4096 unless told, and never more
    // than the whole KV pool holds.
    let positions = loaded.model.max_positions();
    let engine = loaded.engine()?;
    let cfg =
        ch10_batching::Config::with_kv(&engine, a.kv_mb, ch10_batching::seq::KvPrecision::F32, 512)
            .map_err(|e| e.to_string())?;
    let pool = cfg.n_blocks * cfg.block_size;
    let ctx = a.ctx.unwrap_or(positions.min(4096).min(pool));
    if ctx > positions {
        return Err(format!(
            "--ctx {ctx} is more than the model's {positions} positions"
        ));
    }
    if ctx > pool {
        return Err(format!(
            "--ctx {ctx} is more than the KV pool holds ({pool} positions in {} MB): give --kv-mb more",
            a.kv_mb
        ));
    }
    let name = path
        .file_stem()
        .map_or("model".into(), |s| s.to_string_lossy().into_owned());
    let settings = Settings {
        parallel: a.parallel,
        kv_mb: a.kv_mb,
        max_batch_tokens: 512,
        threads: a.threads,
        fault_injection: std::env::var_os("LLM_BOOK_SERVER_FAULTS").is_some(),
    };
    let metrics = Metrics::new();
    // One async thread, this one. The engine's threads keep every core busy; the HTTP side
    // only moves small frames, and a second worker would send each token through more
    // wake-ups on the engine's cores (chapter 11's page has the measurement). Tokenizing and
    // the chat template, the slow things, go to the blocking pool.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("the async runtime: {e}"))?;
    let engine_thread = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind((a.host.as_str(), a.port))
            .await
            .map_err(|e| format!("cannot listen on {}:{}: {e}", a.host, a.port))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let (worker, engine_thread) = worker::spawn(loaded, settings, metrics.clone(), ready_tx);
        let capacity = a.parallel + a.queue;
        let app = Arc::new(Shared {
            loaded,
            chat: chat_of(loaded)?,
            name: name.clone(),
            ctx,
            worker: worker.clone(),
            metrics,
            slots: Arc::new(tokio::sync::Semaphore::new(capacity)),
            capacity,
            key: a.api_key.as_deref().map(routes::digest),
            created: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            next_id: AtomicU64::new(0),
        });
        let limits = HttpLimits {
            body_limit: a.body_limit,
            client_timeout: Duration::from_secs(a.client_timeout),
            cors: a.cors,
        };
        println!("ch11-server: {name} on http://{addr} ({} parallel, {capacity} at most in the queue and running, context {ctx}, {} MB KV pool, {} threads)",
            a.parallel, a.kv_mb, a.threads);
        let _ = std::io::stdout().flush();
        // On SIGINT/SIGTERM: stop accepting, end every request, let the answers finish.
        let stop_worker = worker.clone();
        let shutdown = async move {
            serve::signal().await;
            eprintln!("ch11-server: shutting down");
            stop_worker.send(Command::Shutdown);
        };
        let server = tokio::spawn(serve::run(listener, routes::router(app, limits), limits.client_timeout, shutdown));
        match ready_rx.await {
            Ok(Ok(())) => println!("ch11-server: ready"),
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err("the engine thread stopped while starting".into()),
        }
        let _ = std::io::stdout().flush();
        server.await.map_err(|e| format!("the server task failed: {e}"))?;
        Ok::<_, String>(engine_thread)
    })?;
    runtime.shutdown_timeout(Duration::from_secs(1));
    let _ = engine_thread.join();
    Ok(())
}
// ANCHOR_END: serve_main
