//! Starting the server: its flags, the model, the engine thread and the HTTP loop. Chapter 11's
//! binary calls [`serve_main`] with no [`Structurer`]; chapter 12's calls it with its grammar.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use crate::metrics::Metrics;
use crate::routes::{self, HttpLimits, Shared};
use crate::serve;
use crate::structure::Structurer;
use crate::worker::{self, Command, Settings};

/// How to serve: the server's flags.
#[derive(Clone, Debug)]
pub struct ServeOptions {
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
}

impl Default for ServeOptions {
    fn default() -> ServeOptions {
        ServeOptions {
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
        }
    }
}

/// The value of `flag` as a number, or an error that names the flag and what was given.
pub fn number<T: std::str::FromStr>(
    p: &mut lexopt::Parser,
    flag: &str,
) -> Result<T, lexopt::Error> {
    use lexopt::ValueExt;
    let v = p.value()?.string()?;
    v.parse()
        .map_err(|_| format!("{flag}: {v:?} is not a valid number").into())
}

impl ServeOptions {
    /// Reads flag `name` (`"m"`, `"port"`: a short or long name without its dashes) and its
    /// value from `p`; `false` when it is not one of the server's flags.
    pub fn flag(&mut self, name: &str, p: &mut lexopt::Parser) -> Result<bool, lexopt::Error> {
        use lexopt::ValueExt;
        match name {
            "m" | "model" => self.model = Some(p.value()?.into()),
            "host" => self.host = p.value()?.string()?,
            "port" => self.port = number(p, "--port")?,
            "parallel" => self.parallel = number(p, "--parallel")?,
            "queue" => self.queue = number(p, "--queue")?,
            "kv-mb" => self.kv_mb = number(p, "--kv-mb")?,
            "ctx" => self.ctx = Some(number(p, "--ctx")?),
            "api-key" => self.api_key = Some(p.value()?.string()?),
            "t" | "threads" => self.threads = number(p, "--threads")?,
            "body-limit" => self.body_limit = number(p, "--body-limit")?,
            "client-timeout" => self.client_timeout = number(p, "--client-timeout")?,
            "cors" => self.cors = true,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Every value in its range.
    pub fn check(&self) -> Result<(), String> {
        let check = |ok: bool, msg: &str| if ok { Ok(()) } else { Err(msg.to_string()) };
        check(
            (1..=64).contains(&self.parallel),
            "--parallel must be 1 to 64",
        )?;
        check(self.queue <= 4096, "--queue must be 0 to 4096")?;
        check(
            (1..=1 << 16).contains(&self.kv_mb),
            "--kv-mb must be 1 to 65536",
        )?;
        check(
            self.ctx.is_none_or(|c| (2..=1 << 20).contains(&c)),
            "--ctx must be 2 to 1048576",
        )?;
        check(
            (1..=256).contains(&self.threads),
            "--threads must be 1 to 256",
        )?;
        check(
            (1..=1 << 30).contains(&self.body_limit),
            "--body-limit must be 1 to 1073741824 bytes",
        )?;
        check(
            (1..=3600).contains(&self.client_timeout),
            "--client-timeout must be 1 to 3600 seconds",
        )?;
        check(
            self.api_key.as_ref().is_none_or(|k| !k.is_empty()),
            "--api-key must not be empty",
        )
    }
}

/// The model's chat template, rendered in a child of this program; `None` for a model
/// without one (its chat requests are refused, completions still served).
fn chat_of(loaded: &ch08_gguf::Loaded) -> Result<Option<ch09_generate::chat::Chat>, String> {
    let sandbox = ch09_generate::chat::sandbox::Sandbox::this_program()?;
    Ok(ch09_generate::chat::Chat::of_model(loaded, Some(sandbox)).ok())
}

// ANCHOR: serve_main
/// Serves the model at `path` until SIGINT or SIGTERM; `program` names the binary in what it
/// prints. The program must call chapter 9's `sandbox::child_main` first thing in `main`.
pub fn serve_main(
    a: &ServeOptions,
    path: &std::path::Path,
    program: &str,
    structurer: Option<Arc<dyn Structurer>>,
) -> Result<(), String> {
    // The model lives as long as the process: every thread may borrow it.
    let loaded: &'static ch08_gguf::Loaded = Box::leak(Box::new(
        ch08_gguf::load(path).map_err(|e| format!("{}: {e}", path.display()))?,
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
            structurer,
        });
        let limits = HttpLimits {
            body_limit: a.body_limit,
            client_timeout: Duration::from_secs(a.client_timeout),
            cors: a.cors,
        };
        println!("{program}: {name} on http://{addr} ({} parallel, {capacity} at most in the queue and running, context {ctx}, {} MB KV pool, {} threads)",
            a.parallel, a.kv_mb, a.threads);
        let _ = std::io::stdout().flush();
        // On SIGINT/SIGTERM: stop accepting, end every request, let the answers finish.
        let stop_worker = worker.clone();
        let stopping = program.to_string();
        let shutdown = async move {
            serve::signal().await;
            eprintln!("{stopping}: shutting down");
            stop_worker.send(Command::Shutdown);
        };
        let server = tokio::spawn(serve::run(listener, routes::router(app, limits), limits.client_timeout, shutdown));
        match ready_rx.await {
            Ok(Ok(())) => println!("{program}: ready"),
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
