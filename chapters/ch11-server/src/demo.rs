//! `ch11-server demo`: a scripted session against a server it starts, printed as the
//! requests and the answers a client sees — the book's transcript of the API.
//!
//! Every request is greedy, so the text is the same on every machine; the two fields that
//! change on every run, `id` and `created`, are printed as `…` and `0`.

use std::path::Path;
use std::process::{Command, Stdio};

use http_body_util::BodyExt;
use serde_json::Value;

use crate::loadtest::{Started, free_port, runtime, send, wait_healthy};

/// The requests of the session: method, path, body.
const SESSION: &[(&str, &str, &str)] = &[
    ("GET", "/v1/models", ""),
    (
        "POST",
        "/v1/chat/completions",
        r#"{"messages": [{"role": "user", "content": "What is the capital of France?"}], "max_tokens": 12, "temperature": 0}"#,
    ),
    (
        "POST",
        "/v1/completions",
        r#"{"prompt": "1, 2, 3,", "max_tokens": 4, "temperature": 0, "stream": true, "stream_options": {"include_usage": true}}"#,
    ),
    (
        "POST",
        "/v1/chat/completions",
        r#"{"messages": [{"role": "user", "content": "Hi"}], "n": 2}"#,
    ),
    (
        "POST",
        "/v1/completions",
        r#"{"prompt": "Hi", "max_tokens": 100000}"#,
    ),
];

/// `id` and `created` as `…` and 0, in one JSON value.
fn normalise(mut v: Value) -> Value {
    if let Some(o) = v.as_object_mut() {
        if o.contains_key("id") {
            o.insert("id".into(), Value::String("…".into()));
        }
        if o.contains_key("created") {
            o.insert("created".into(), Value::from(0));
        }
        if let Some(data) = o.get_mut("data").and_then(Value::as_array_mut) {
            for d in data {
                if let Some(c) = d.get_mut("created") {
                    *c = Value::from(0);
                }
            }
        }
    }
    v
}

pub fn run(model: &Path) -> Result<(), String> {
    let port = free_port()?;
    let addr = ([127, 0, 0, 1], port).into();
    let mut child = Command::new(std::env::current_exe().map_err(|e| e.to_string())?)
        .arg("-m")
        .arg(model)
        .args(["--port", &port.to_string(), "--kv-mb", "64"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("could not start the server: {e}"))?;
    let rt = runtime()?;
    let ready = rt.block_on(wait_healthy(addr, &mut child));
    let _server = Started(child);
    ready?;
    for (method, path, body) in SESSION {
        println!("> {method} {path}");
        if !body.is_empty() {
            println!("> {body}");
        }
        let (status, ctype, bytes) = rt.block_on(async {
            let (resp, _conn) = send(addr, method, path, Some(body.to_string())).await?;
            let status = resp.status();
            let ctype = resp
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            let bytes = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| e.to_string())?
                .to_bytes();
            Ok::<_, String>((status, ctype, bytes))
        })?;
        println!("< {status} ({ctype})");
        let text = String::from_utf8_lossy(&bytes);
        if ctype.starts_with("text/event-stream") {
            for event in text.split("\n\n").filter(|e| !e.is_empty()) {
                let data = event.strip_prefix("data: ").unwrap_or(event);
                match serde_json::from_str::<Value>(data) {
                    Ok(v) => println!("< data: {}", normalise(v)),
                    Err(_) => println!("< data: {data}"),
                }
            }
        } else {
            let v: Value = serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))?;
            let pretty = serde_json::to_string_pretty(&normalise(v)).map_err(|e| e.to_string())?;
            for line in pretty.lines() {
                println!("< {line}");
            }
        }
        println!();
    }
    Ok(())
}
