//! Chapter 11's server with this chapter's grammar plugged in, through real clients: the
//! official `openai` Python package (response_format, pydantic models, tools, streamed and
//! whole), `curl -N`, and chapter 11's chat page in headless Chromium. A missing client fails
//! the test with how to install it.

#[path = "../../ch11-server/tests/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use ch01_tensors::models;
use common::{Server, python_with, require_program};

/// This chapter's binary serving `model` on a free loopback port, four sequences at once;
/// a missing model fails saying how to fetch it.
fn serve(model: &Path) -> Server {
    let model = models::require(model).unwrap_or_else(|e| panic!("{e}"));
    Server::start_model(&model, &["--host", "127.0.0.1", "--parallel", "4"], &[])
}

/// Runs `tests/clients/structured_client.py` against `model` served by this chapter's binary;
/// the server names the model by its file's stem.
fn openai_client_against(model: PathBuf) {
    let py = python_with("openai");
    let s = serve(&model);
    let name = model.file_stem().unwrap().to_string_lossy().into_owned();
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients/structured_client.py");
    let out = Command::new(py)
        .arg(script)
        .args([&s.url(), &name])
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success() && stdout.contains("all passed"),
        "the openai client failed on {name}:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_openai_client_gets_documents_and_tool_calls() {
    openai_client_against(models::smollm2_gguf());
}

/// The same client, unchanged, on the second model: Gemma-3's 262k vocabulary and its own
/// chat template.
#[test]
fn the_openai_client_gets_documents_and_tool_calls_from_gemma3() {
    openai_client_against(models::gemma3_gguf());
}

#[test]
fn curl_streams_a_document_of_the_schema() {
    let curl = require_program("curl");
    let s = serve(&models::smollm2_gguf());
    let body = r#"{"messages":[{"role":"user","content":"Name three colours."}],
        "max_tokens":40,"temperature":0,"stream":true,
        "response_format":{"type":"json_schema","json_schema":{"name":"colours","schema":
            {"type":"object","properties":{"colours":{"type":"array","items":{"type":"string"},
             "minItems":1,"maxItems":3}},"required":["colours"]}}}}"#;
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
    assert_eq!(events.last(), Some(&"data: [DONE]"), "{text}");
    let mut content = String::new();
    for e in &events[..events.len() - 1] {
        let chunk: serde_json::Value =
            serde_json::from_str(e.strip_prefix("data: ").expect("a data: line")).unwrap();
        content += chunk["choices"][0]["delta"]["content"]
            .as_str()
            .unwrap_or("");
    }
    let doc: serde_json::Value = serde_json::from_str(&content)
        .unwrap_or_else(|e| panic!("the streamed answer is not JSON ({e}): {content:?}"));
    let colours = doc["colours"].as_array().expect("colours is a list");
    assert!(
        (1..=3).contains(&colours.len()) && colours.iter().all(|c| c.is_string()),
        "{doc}"
    );
}

#[test]
fn bad_serve_flags_and_a_missing_model_are_clear_errors() {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_ch12-structured"))
            .args(args)
            .output()
            .expect("the binary runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(&["--bogus"]);
    assert!(code == Some(2) && err.contains("--bogus"), "{code:?} {err}");
    let (code, err) = run(&["serve", "--parallel", "0"]);
    assert!(
        code == Some(2) && err.contains("--parallel"),
        "{code:?} {err}"
    );
    let (code, err) = run(&["-m", "/nonexistent/model.gguf", "generate"]);
    assert!(
        code == Some(2) && err.contains("a command comes first"),
        "{code:?} {err}"
    );
    let (code, err) = run(&["-m", "/nonexistent/model.gguf", "--port", "0"]);
    assert!(
        code == Some(1) && err.contains("/nonexistent/model.gguf"),
        "{code:?} {err}"
    );
}

/// Chapter 11's chat page, unchanged, in headless Chromium against this chapter's binary,
/// driven by chapter 11's own script and checks (`common` is chapter 11's test module,
/// included by its path): a plain chat still streams through the server that now also
/// takes grammars, and Stop still cancels it.
#[test]
fn chapter_11s_chat_page_streams_through_this_server() {
    let s = serve(&models::smollm2_gguf());
    let page = common::get(s.addr, "/");
    assert!(
        page.body.contains("<script>") && page.body.contains(r#"id="send""#),
        "the server serves chapter 11's chat page at /:\n{}",
        page.body
    );
    common::chat_page_streams_and_stops(&s, "SmolLM2-135M-Instruct.Q4_1");
}
