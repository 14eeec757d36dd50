//! The load test: C clients, R streamed completions in all, against any server that speaks
//! OpenAI's API on this machine.
//!
//! Every request is drawn from one seeded generator, so two runs (or two servers) get the
//! same prompts, reply lengths and cancellations: prompt and reply lengths each uniform in
//! [n/2, 3n/2] around `--prompt` and `--reply` (the prompt in common one-token words), and
//! with `--cancel-rate P` a fraction P of the requests hang up after a random number of
//! tokens. Replies ignore the end-of-text token (`ignore_eos`, which llama-server reads too),
//! so a request's length is what was asked. The client is hyper's own HTTP/1.1 connection,
//! one per request, on a single-threaded runtime that leaves the cores to the server.
//! The mix is drawn in `loadtest/mix.rs`; `--compare` starts both servers in
//! `loadtest/llama_server.rs`.

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpStream;

use ch07_simd_parallel::stats::percentile;

mod alone;
mod llama_server;
mod mix;

pub use llama_server::compare;
pub(crate) use llama_server::{Started, free_port, wait_healthy};
use mix::{Planned, plan};

/// The longest a whole load test may run, and one request.
pub const MAX_SECONDS: u64 = 600;
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// `loadtest`'s options.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    pub url: Option<String>,
    pub clients: usize,
    pub requests: usize,
    pub prompt: usize,
    pub reply: usize,
    pub cancel_rate: f64,
    pub seed: u64,
    pub json: bool,
}

impl Default for LoadOptions {
    fn default() -> LoadOptions {
        LoadOptions {
            url: None,
            clients: 0,
            requests: 0,
            prompt: 128,
            reply: 128,
            cancel_rate: 0.0,
            seed: 1,
            json: false,
        }
    }
}

impl LoadOptions {
    pub fn check(&self) -> Result<(), String> {
        if !(1..=256).contains(&self.clients) {
            return Err("loadtest needs --clients C, 1 to 256".into());
        }
        if !(1..=100_000).contains(&self.requests) {
            return Err("loadtest needs --requests R, 1 to 100000".into());
        }
        if !(2..=8192).contains(&self.prompt) || !(2..=8192).contains(&self.reply) {
            return Err("--prompt and --reply must be 2 to 8192".into());
        }
        if !(0.0..=1.0).contains(&self.cancel_rate) {
            return Err("--cancel-rate must be 0 to 1".into());
        }
        if let Some(u) = &self.url {
            loopback(u)?;
        }
        Ok(())
    }
}

/// `http://HOST:PORT[/]` → its address, which must be on this machine.
pub fn loopback(url: &str) -> Result<SocketAddr, String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("--url {url:?}: expected http://HOST:PORT"))?;
    let hostport = rest.trim_end_matches('/');
    let addrs: Vec<SocketAddr> = hostport
        .to_socket_addrs()
        .map_err(|e| format!("--url {url:?}: {e}"))?
        .collect();
    match addrs.iter().find(|a| a.ip().is_loopback()) {
        Some(a) if addrs.iter().all(|a| a.ip().is_loopback()) => Ok(*a),
        _ => Err(format!(
            "--url {url:?}: the load test only talks to this machine (127.0.0.1, localhost, [::1])"
        )),
    }
}

/// The sampling every request of the load asks for (with its own seed).
const TEMPERATURE: f32 = 0.8;
const TOP_P: f32 = 0.95;

/// Decode tok/s from the gaps between a stream's tokens, in ms: how many over how long.
fn streamed_tok_s(gaps_ms: &[f64]) -> f64 {
    gaps_ms.len() as f64 / (gaps_ms.iter().sum::<f64>() / 1e3).max(1e-9)
}

/// What one request saw.
#[derive(Default)]
struct Seen {
    ttft_ms: Option<f64>,
    gaps_ms: Vec<f64>,
    tokens: usize,
    cancelled: bool,
    error: Option<String>,
}

/// The numbers of one load test.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub target: String,
    pub clients: usize,
    pub seconds: f64,
    pub output_tokens: usize,
    pub output_tok_s: f64,
    pub ttft_ms_p50: f64,
    pub ttft_ms_p99: f64,
    pub itl_ms_p50: f64,
    pub itl_ms_p99: f64,
    /// One stream's pace: the gaps between tokens, counted over the seconds they took
    /// (every request's tokens after its first; a client's decode tok/s).
    pub streamed_tok_s: f64,
    pub completed: usize,
    pub cancelled: usize,
    pub errors: BTreeMap<String, usize>,
}

impl Report {
    pub fn json(&self) -> Value {
        json!({"target": self.target, "clients": self.clients, "seconds": self.seconds,
               "output_tokens": self.output_tokens, "output_tok_s": self.output_tok_s,
               "ttft_ms_p50": self.ttft_ms_p50, "ttft_ms_p99": self.ttft_ms_p99,
               "itl_ms_p50": self.itl_ms_p50, "itl_ms_p99": self.itl_ms_p99,
               "streamed_tok_s": self.streamed_tok_s,
               "completed": self.completed, "cancelled": self.cancelled,
               "errors": self.errors.values().sum::<usize>(), "errors_by_kind": self.errors})
    }

    pub fn text(&self) -> String {
        let errors = if self.errors.is_empty() {
            "none".to_string()
        } else {
            self.errors
                .iter()
                .map(|(k, n)| format!("{n} {k}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "{}: {} clients, {} completed, {} cancelled, errors: {errors}\n  output {:.1} tok/s ({} tokens in {:.1} s)\n  time to first token  p50 {:.1} ms  p99 {:.1} ms\n  inter-token latency  p50 {:.1} ms  p99 {:.1} ms",
            self.target,
            self.clients,
            self.completed,
            self.cancelled,
            self.output_tok_s,
            self.output_tokens,
            self.seconds,
            self.ttft_ms_p50,
            self.ttft_ms_p99,
            self.itl_ms_p50,
            self.itl_ms_p99
        )
    }
}

/// An HTTP/1.1 request on a new connection; the connection's task comes back too, so the
/// caller can hang up by aborting it.
pub(crate) async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<String>,
) -> Result<(hyper::Response<Incoming>, tokio::task::JoinHandle<()>), String> {
    let stream = TcpStream::connect(addr)
        .await
        .map_err(|_| "connect".to_string())?;
    let _ = stream.set_nodelay(true);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|_| "handshake".to_string())?;
    let task = tokio::spawn(async move {
        let _ = conn.await;
    });
    let req = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string())
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .map_err(|e| e.to_string())?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|_| "send".to_string())?;
    Ok((resp, task))
}

/// `GET path`, its body as JSON.
async fn get_json(addr: SocketAddr, path: &str) -> Result<Value, String> {
    let (resp, _task) = send(addr, "GET", path, None).await?;
    let status = resp.status();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    if !status.is_success() {
        return Err(format!("GET {path}: {status}"));
    }
    serde_json::from_slice(&body).map_err(|e| format!("GET {path}: {e}"))
}

/// One streamed completion, timed chunk by chunk.
async fn one(addr: SocketAddr, model: &str, p: &Planned) -> Seen {
    let mut seen = Seen::default();
    let body = json!({"model": model, "prompt": p.prompt, "max_tokens": p.reply, "stream": true,
        "stream_options": {"include_usage": true}, "ignore_eos": true,
        "temperature": TEMPERATURE, "top_p": TOP_P, "seed": p.seed});
    let start = Instant::now();
    let (resp, conn) = match send(addr, "POST", "/v1/completions", Some(body.to_string())).await {
        Ok(r) => r,
        Err(kind) => {
            seen.error = Some(kind);
            return seen;
        }
    };
    if !resp.status().is_success() {
        seen.error = Some(format!("HTTP {}", resp.status().as_u16()));
        return seen;
    }
    // ANCHOR: one_request
    let mut body = resp.into_body();
    let (mut buf, mut last, mut usage) = (Vec::<u8>::new(), start, None);
    let mut finished = false;
    'read: while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else { break };
        let Some(bytes) = frame.data_ref() else {
            continue;
        };
        buf.extend_from_slice(bytes);
        // SSE events end with a blank line
        while let Some(end) = buf.windows(2).position(|w| w == b"\n\n") {
            let event: Vec<u8> = buf.drain(..end + 2).collect();
            let Some(data) = std::str::from_utf8(&event).ok().and_then(|e| {
                e.lines()
                    .find_map(|l| l.strip_prefix("data: ").or(l.strip_prefix("data:")))
            }) else {
                continue;
            };
            if data.trim() == "[DONE]" {
                finished = true;
                break 'read;
            }
            let Ok(v) = serde_json::from_str::<Value>(data) else {
                seen.error = Some("bad chunk".into());
                break 'read;
            };
            if v.get("error").is_some() {
                seen.error = Some("error event".into());
                break 'read;
            }
            if let Some(n) = v["usage"]["completion_tokens"].as_u64() {
                usage = Some(n as usize);
            }
            let has_text = v["choices"][0]["text"]
                .as_str()
                .is_some_and(|t| !t.is_empty());
            if has_text {
                let now = Instant::now();
                match seen.ttft_ms {
                    None => seen.ttft_ms = Some((now - start).as_secs_f64() * 1e3),
                    Some(_) => seen.gaps_ms.push((now - last).as_secs_f64() * 1e3),
                }
                last = now;
                seen.tokens += 1;
                if p.cancel_after.is_some_and(|n| seen.tokens >= n) {
                    seen.cancelled = true;
                    conn.abort(); // hang up: the server should cancel the sequence
                    return seen;
                }
            }
        }
    }
    if let Some(n) = usage {
        seen.tokens = n;
    }
    if !finished && seen.error.is_none() {
        seen.error = Some("stream ended early".into());
    }
    seen
    // ANCHOR_END: one_request
}

/// Runs the load against `addr`.
pub async fn run(addr: SocketAddr, o: &LoadOptions) -> Result<Report, String> {
    let models = get_json(addr, "/v1/models").await?;
    let model = models["data"][0]["id"]
        .as_str()
        .ok_or("GET /v1/models listed no model")?
        .to_string();
    let planned = Arc::new(plan(o));
    let next = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + Duration::from_secs(MAX_SECONDS);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..o.clients {
        let (planned, next, model) = (planned.clone(), next.clone(), model.clone());
        tasks.push(tokio::spawn(async move {
            let mut all = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= planned.len() || Instant::now() > deadline {
                    return all;
                }
                let seen = tokio::time::timeout(REQUEST_TIMEOUT, one(addr, &model, &planned[i]))
                    .await
                    .unwrap_or_else(|_| Seen {
                        error: Some("timeout".into()),
                        ..Seen::default()
                    });
                all.push(seen);
            }
        }));
    }
    let mut seen = Vec::new();
    for t in tasks {
        seen.extend(t.await.map_err(|e| format!("a client failed: {e}"))?);
    }
    let seconds = start.elapsed().as_secs_f64();
    let ttft: Vec<f64> = seen.iter().filter_map(|s| s.ttft_ms).collect();
    let gaps: Vec<f64> = seen
        .iter()
        .flat_map(|s| s.gaps_ms.iter().copied())
        .collect();
    let mut errors = BTreeMap::new();
    for e in seen.iter().filter_map(|s| s.error.clone()) {
        *errors.entry(e).or_insert(0) += 1;
    }
    let output_tokens = seen.iter().map(|s| s.tokens).sum();
    Ok(Report {
        target: model,
        clients: o.clients,
        seconds,
        output_tokens,
        output_tok_s: output_tokens as f64 / seconds,
        ttft_ms_p50: percentile(&ttft, 0.5),
        ttft_ms_p99: percentile(&ttft, 0.99),
        itl_ms_p50: percentile(&gaps, 0.5),
        itl_ms_p99: percentile(&gaps, 0.99),
        streamed_tok_s: streamed_tok_s(&gaps),
        completed: seen
            .iter()
            .filter(|s| s.error.is_none() && !s.cancelled)
            .count(),
        cancelled: seen.iter().filter(|s| s.cancelled).count(),
        errors,
    })
}

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("the async runtime: {e}"))
}

/// `loadtest --url URL`.
pub fn run_and_print(o: &LoadOptions) -> Result<(), String> {
    let addr = loopback(o.url.as_deref().ok_or("loadtest needs --url")?)?;
    let report = runtime()?.block_on(run(addr, o))?;
    if o.json {
        println!("{}", report.json());
    } else {
        println!("{}", report.text());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_urls() {
        assert!(loopback("http://127.0.0.1:8080").is_ok());
        assert!(loopback("http://localhost:8080/").is_ok());
        assert!(loopback("http://10.0.0.1:8080").is_err());
        assert!(loopback("https://127.0.0.1:8080").is_err());
    }
}
