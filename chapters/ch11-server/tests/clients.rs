//! Real clients against the real binary: the official `openai` Python package, `curl -N`,
//! and the chat page in headless Chromium. A missing client fails the test with how to
//! install it (`bash scripts/test-deps.sh`); it never skips.

mod common;

use std::process::Command;

use common::*;

const MODEL: &str = "SmolLM2-135M-Instruct.Q4_1";

#[test]
fn the_openai_python_client_works_unchanged() {
    let py = python_with("openai");
    let s = Server::start(&["--api-key", "test-key"]);
    let out = Command::new(py)
        .arg(scripts().join("openai_client.py"))
        .args([&s.url(), "test-key", MODEL])
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("all passed"),
        "the openai client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn curl_sees_raw_server_sent_events() {
    let curl = require_program("curl");
    let s = Server::start(&[]);
    let body = r#"{"messages":[{"role":"user","content":"Count to five."}],"max_tokens":8,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}"#;
    let out = Command::new(curl)
        .args([
            "-sS",
            "-N",
            "-H",
            "Content-Type: application/json",
            "-d",
            body,
        ])
        .arg(format!("{}/v1/chat/completions", s.url()))
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let events: Vec<&str> = text
        .split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .collect();
    assert!(
        events.iter().all(|e| e.starts_with("data: ")),
        "every event is a data: line:\n{text}"
    );
    assert_eq!(events.last(), Some(&"data: [DONE]"), "{text}");
    let chunks: Vec<serde_json::Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(&e["data: ".len()..]).expect("each chunk is JSON"))
        .collect();
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );
    let usage = &chunks[chunks.len() - 1];
    assert_eq!(usage["choices"], serde_json::json!([]), "{usage}");
    assert_eq!(usage["usage"]["completion_tokens"], 8, "{usage}");
    let finish = &chunks[chunks.len() - 2]["choices"][0]["finish_reason"];
    assert_eq!(finish, "length");
    let ct = Command::new(require_program("curl"))
        .args([
            "-sS",
            "-o",
            "/dev/null",
            "-w",
            "%{content_type}",
            "-H",
            "Content-Type: application/json",
            "-d",
            body,
        ])
        .arg(format!("{}/v1/chat/completions", s.url()))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&ct.stdout), "text/event-stream");
}

#[test]
fn the_chat_page_streams_and_its_stop_button_cancels() {
    let s = Server::start(&[]);
    let page = get(s.addr, "/");
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains("<script>")
            && !page.body.contains("http://")
            && !page.body.contains("https://"),
        "the page fetches nothing from elsewhere"
    );
    chat_page_streams_and_stops(&s, MODEL);
    // The cancelled sequence's blocks are free again.
    assert_eq!(s.wait_metric("llm_kv_blocks_used", 0.0, 5), 0.0);
    let m = get(s.addr, "/metrics").body;
    assert!(
        m.contains(r#"llm_requests_total{endpoint="chat",outcome="cancelled"} 1"#),
        "{m}"
    );
}

#[test]
fn the_load_test_runs_against_the_server_and_cancels_cleanly() {
    let s = Server::start(&["--parallel", "4"]);
    let o = Command::new(env!("CARGO_BIN_EXE_ch11-server"))
        .args([
            "loadtest",
            "--url",
            &s.url(),
            "--clients",
            "3",
            "--requests",
            "8",
        ])
        .args([
            "--prompt",
            "16",
            "--reply",
            "12",
            "--cancel-rate",
            "0.5",
            "--seed",
            "3",
            "--json",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r: serde_json::Value =
        serde_json::from_str(stdout.trim()).expect("--json prints one object");
    for k in [
        "output_tok_s",
        "ttft_ms_p50",
        "ttft_ms_p99",
        "itl_ms_p50",
        "itl_ms_p99",
        "completed",
        "cancelled",
        "errors",
    ] {
        assert!(r[k].is_number(), "{k} missing: {r}");
    }
    assert_eq!(r["errors"], 0, "{r}");
    assert_eq!(
        r["completed"].as_u64().unwrap() + r["cancelled"].as_u64().unwrap(),
        8,
        "{r}"
    );
    assert!(
        r["cancelled"].as_u64().unwrap() > 0,
        "seed 3 cancels some: {r}"
    );
    assert_eq!(s.wait_metric("llm_running_sequences", 0.0, 5), 0.0);
    assert_eq!(
        s.wait_metric("llm_kv_blocks_used", 0.0, 5),
        0.0,
        "cancelled requests left blocks behind"
    );
}

/// The server adds nothing to the engine: a greedy completion over HTTP is the text chapter
/// 10's engine makes in-process for the same tokens.
#[test]
fn a_greedy_completion_is_what_the_engine_makes() {
    let s = Server::start(&[]);
    let prompt = "The capital of France is";
    let r = post(
        s.addr,
        "/v1/completions",
        &format!(r#"{{"prompt":"{prompt}","max_tokens":24,"temperature":0}}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let served = r.json()["choices"][0]["text"].as_str().unwrap().to_string();
    let m = ch08_gguf::load(&model()).unwrap();
    let engine = m.engine().unwrap();
    let cfg = ch10_batching::Config::with_kv_mb(&engine, 64, 512).unwrap();
    let mut be = ch10_batching::BatchEngine::new(engine, &m.tokenizer.tokenizer, cfg).unwrap();
    let (_, rx) = be
        .submit(ch10_batching::Request::greedy(
            m.tokenizer.encode_prompt(prompt, true),
            24,
        ))
        .unwrap();
    while be.pending() > 0 {
        be.step().unwrap();
    }
    let mut text = String::new();
    for ev in rx.try_iter() {
        match ev {
            ch10_batching::Event::Token { text: t, .. } => text += &t,
            ch10_batching::Event::Done(f) => text += &f.text,
        }
    }
    assert_eq!(
        served, text,
        "the server's greedy text differs from the engine's"
    );
}
