//! Chapter 11's server with this chapter's grammar plugged in, through real clients: the
//! official `openai` Python package (response_format, pydantic models, tools, streamed and
//! whole), `curl -N`, and chapter 11's chat page in headless Chromium. A missing client fails
//! the test with how to install it.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use ch01_tensors::models;

/// `ch12-structured` serving a model on a free loopback port; killed when dropped.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    /// Serves `model`, or fails saying how to fetch it.
    fn start(model: PathBuf) -> Server {
        let model = models::require(&model).unwrap_or_else(|e| panic!("{e}"));
        let mut child = Command::new(env!("CARGO_BIN_EXE_ch12-structured"))
            .arg("-m")
            .arg(model)
            .args(["--port", "0", "--host", "127.0.0.1", "--parallel", "4"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the server binary starts");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let (mut url, mut line) = (None, String::new());
        loop {
            line.clear();
            if stdout.read_line(&mut line).unwrap_or(0) == 0 {
                panic!("the server exited before it was ready: {:?}", child.wait());
            }
            if let Some(rest) = line.split("on http://").nth(1) {
                url = rest
                    .split_whitespace()
                    .next()
                    .map(|a| format!("http://{a}"));
            }
            if line.contains("ready") {
                break;
            }
        }
        Server {
            child,
            url: url.expect("the server says where it listens before it is ready"),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The venv's Python with `module`, or a failure saying how to get it.
fn python_with(module: &str) -> PathBuf {
    let venv = std::env::var_os("LLM_BOOK_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| models::workspace_root().join(".venv"));
    let py = venv.join("bin/python");
    let found = Command::new(&py)
        .args(["-c", &format!("import {module}")])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "{} has no `{module}`: run `bash scripts/test-deps.sh` (or set LLM_BOOK_VENV)",
        py.display()
    );
    py
}

/// Runs `tests/clients/structured_client.py` against `model` served by this chapter's binary;
/// the server names the model by its file's stem.
fn openai_client_against(model: PathBuf) {
    let py = python_with("openai");
    let s = Server::start(model.clone());
    let name = model.file_stem().unwrap().to_string_lossy().into_owned();
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients/structured_client.py");
    let out = Command::new(py)
        .arg(script)
        .args([&s.url, &name])
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
    let curl = which("curl");
    let s = Server::start(models::smollm2_gguf());
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
        .arg(format!("{}/v1/chat/completions", s.url))
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

fn which(name: &str) -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("`{name}` is not installed: run `bash scripts/test-deps.sh`"))
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

/// `curl -s URL`'s body, or a failure naming the URL.
fn curl_get(url: &str) -> String {
    let out = Command::new(which("curl"))
        .args(["-sS", "--max-time", "10", url])
        .output()
        .expect("curl runs");
    assert!(out.status.success(), "GET {url} failed: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The value of an unlabelled metric on `/metrics`.
fn metric(url: &str, name: &str) -> Option<f64> {
    curl_get(&format!("{url}/metrics"))
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// Chapter 11's chat page, unchanged, in headless Chromium against this chapter's binary,
/// driven by chapter 11's own script (called by its path, not copied): a plain chat still
/// streams through the server that now also takes grammars, and Stop still cancels it.
#[test]
fn chapter_11s_chat_page_streams_through_this_server() {
    let chromium = which("chromium");
    let py = python_with("json"); // the driver needs only the standard library
    let s = Server::start(models::smollm2_gguf());
    let page = curl_get(&format!("{}/", s.url));
    assert!(
        page.contains("<script>") && page.contains(r#"id="send""#),
        "the server serves chapter 11's chat page at /:\n{page}"
    );
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../ch11-server/tests/clients/chat_page.py");
    let out = Command::new(py)
        .arg(script)
        .arg(chromium)
        .arg(format!("{}/", s.url))
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "driving the page failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: serde_json::Value =
        serde_json::from_str(stdout.trim()).expect("the driver prints JSON");
    assert_eq!(seen["model"], "SmolLM2-135M-Instruct.Q4_1", "{seen}");
    assert!(
        seen["streamed"].as_str().is_some_and(|t| t.len() > 20),
        "the reply streamed into the page: {seen}"
    );
    assert_eq!(seen["status"], "stopped", "{seen}");
    assert_eq!(seen["send_enabled"], true, "{seen}");
    // Stop closed the connection: the server cancelled the sequence.
    let mut running = metric(&s.url, "llm_running_sequences");
    for _ in 0..100 {
        if running == Some(0.0) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        running = metric(&s.url, "llm_running_sequences");
    }
    assert_eq!(
        running,
        Some(0.0),
        "the stopped reply still runs on the server"
    );
}
