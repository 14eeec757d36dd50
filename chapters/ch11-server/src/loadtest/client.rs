//! The load test's client: hyper's own HTTP/1.1 connection, one per request, and one
//! streamed completion read and timed chunk by chunk.

use std::net::SocketAddr;
use std::time::Instant;

use axum::body::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpStream;

use super::mix::Planned;
use super::options::{TEMPERATURE, TOP_P};

/// Decode tok/s from the gaps between a stream's tokens, in ms: how many over how long.
pub(super) fn streamed_tok_s(gaps_ms: &[f64]) -> f64 {
    gaps_ms.len() as f64 / (gaps_ms.iter().sum::<f64>() / 1e3).max(1e-9)
}

/// What one request saw.
#[derive(Default)]
pub(super) struct Seen {
    pub(super) ttft_ms: Option<f64>,
    pub(super) gaps_ms: Vec<f64>,
    pub(super) tokens: usize,
    pub(super) cancelled: bool,
    pub(super) error: Option<String>,
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
pub(super) async fn get_json(addr: SocketAddr, path: &str) -> Result<Value, String> {
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
pub(super) async fn one(addr: SocketAddr, model: &str, p: &Planned) -> Seen {
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

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("the async runtime: {e}"))
}
