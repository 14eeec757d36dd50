//! Starting the real server binary on a free loopback port, and talking to it with plain
//! TCP, curl, or Python.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ch01_tensors::models;

/// The model every test serves; a test without it fails saying how to fetch it.
pub fn model() -> PathBuf {
    models::require(&models::smollm2_gguf()).unwrap_or_else(|e| panic!("{e}"))
}

/// The server under test: chapter 11's binary, or chapter 12's when chapter 12's tests
/// include this module by its path (Cargo names only the tested package's binaries, so
/// exactly one of the two is set).
fn binary() -> &'static str {
    option_env!("CARGO_BIN_EXE_ch12-structured")
        .or(option_env!("CARGO_BIN_EXE_ch11-server"))
        .expect("this module is compiled into chapter 11's or chapter 12's tests")
}

/// A running server binary; killed when dropped.
pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    pub stdout: BufReader<std::process::ChildStdout>,
}

impl Server {
    /// Starts the binary with `args` (besides the model and `--port 0`) and waits until
    /// it is ready.
    pub fn start(args: &[&str]) -> Server {
        Server::start_with_env(args, &[])
    }

    pub fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Server {
        Server::start_model(&model(), args, env)
    }

    /// The server on another model file.
    pub fn start_model(model: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> Server {
        let mut cmd = Command::new(binary());
        cmd.arg("-m").arg(model).args(["--port", "0"]).args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the server binary starts");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut addr = None;
        let mut line = String::new();
        loop {
            line.clear();
            if stdout.read_line(&mut line).unwrap_or(0) == 0 {
                panic!("the server exited before it was ready: {:?}", child.wait());
            }
            if let Some(rest) = line.split("on http://").nth(1) {
                let a = rest.split_whitespace().next().unwrap();
                addr = Some(a.parse().expect("the server says where it listens"));
            }
            if line.contains("ready") {
                break;
            }
        }
        Server {
            child,
            addr: addr.expect("an address before ready"),
            stdout,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A line of the server's `/proc/PID/status` in KiB (`VmRSS`, `VmHWM`: Linux).
    pub fn memory_kib(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("the server's /proc status");
        let line = status
            .lines()
            .find(|l| l.starts_with(field))
            .unwrap_or_else(|| panic!("no {field} in /proc status"));
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// Sends a signal (libc's number) to the server.
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child, not yet waited for.
        unsafe {
            libc::kill(self.child.id() as i32, sig);
        }
    }

    /// Waits for the process to exit, at most `secs`.
    pub fn wait_exit(&mut self, secs: u64) -> Option<std::process::ExitStatus> {
        let until = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < until {
            if let Ok(Some(s)) = self.child.try_wait() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// A metric's value from `/metrics` (the first line that starts with `name`).
    pub fn metric(&self, name: &str) -> f64 {
        let m = get(self.addr, "/metrics").body;
        m.lines()
            .find(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no metric {name} in:\n{m}"))
    }

    /// Polls until `metric(name) == want`, at most `secs`; the last value seen.
    pub fn wait_metric(&self, name: &str, want: f64, secs: u64) -> f64 {
        let until = Instant::now() + Duration::from_secs(secs);
        loop {
            let v = self.metric(name);
            if v == want || Instant::now() > until {
                return v;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.signal(libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

/// An HTTP answer.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: String,
    pub body: String,
}

impl Resp {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.headers.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    }

    /// Asserts OpenAI's error shape and the status; the error object.
    pub fn error(&self, status: u16) -> serde_json::Value {
        assert_eq!(self.status, status, "{}", self.body);
        let j = self.json();
        let e = &j["error"];
        assert!(
            e["message"].is_string() && e["type"].is_string(),
            "not OpenAI's error shape: {j}"
        );
        assert!(
            e.get("param").is_some() && e.get("code").is_some(),
            "param and code must be present (maybe null): {j}"
        );
        e.clone()
    }
}

/// One request on its own connection (`Connection: close`), raw bytes in.
pub fn raw(addr: SocketAddr, request: &[u8]) -> Resp {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s.write_all(request).unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    parse(&buf)
}

pub fn parse(buf: &[u8]) -> Resp {
    let text = String::from_utf8_lossy(buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let body = if chunked {
        unchunk(body)
    } else {
        body.to_string()
    };
    Resp {
        status,
        headers: head.to_string(),
        body,
    }
}

fn unchunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Resp {
    let mut r = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
    {
        r.push_str("Content-Type: application/json\r\n");
    }
    for (k, v) in headers {
        r.push_str(&format!("{k}: {v}\r\n"));
    }
    r.push_str("\r\n");
    let mut bytes = r.into_bytes();
    bytes.extend_from_slice(body);
    raw(addr, &bytes)
}

pub fn post(addr: SocketAddr, path: &str, body: &str) -> Resp {
    request(addr, "POST", path, &[], body.as_bytes())
}

pub fn get(addr: SocketAddr, path: &str) -> Resp {
    request(addr, "GET", path, &[], b"")
}

/// The project's Python (`LLM_BOOK_VENV`, or `.venv` at the workspace root).
pub fn venv_python() -> PathBuf {
    let venv = std::env::var_os("LLM_BOOK_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| models::workspace_root().join(".venv"));
    venv.join("bin/python")
}

/// The venv's Python, with the `openai` package: the test fails if it is missing.
pub fn python_with(module: &str) -> PathBuf {
    let py = venv_python();
    let ok = Command::new(&py)
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "the Python package '{module}' is missing from {}: install what chapter 11's tests need with\n    bash scripts/test-deps.sh",
        py.display()
    );
    py
}

/// A program on the PATH, or a failure saying how to install it.
pub fn require_program(name: &str) -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(name))
            .find(|p| p.is_file())
    });
    found.unwrap_or_else(|| {
        panic!("'{name}' is not installed: install what chapter 11's tests need with\n    bash scripts/test-deps.sh")
    })
}

/// Chapter 11's chat page in headless Chromium, driven by `tests/clients/chat_page.py`: a
/// message streams into the page, Stop cancels it, and the server stops the sequence.
/// What the driver saw, for the caller's own checks.
pub fn chat_page_streams_and_stops(s: &Server, model: &str) -> serde_json::Value {
    let chromium = require_program("chromium");
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../ch11-server/tests/clients/chat_page.py"
    );
    let out = Command::new(venv_python())
        .arg(script)
        .arg(chromium)
        .arg(format!("{}/", s.url()))
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
    assert_eq!(seen["model"], model, "{seen}");
    assert!(
        seen["streamed"].as_str().is_some_and(|t| t.len() > 20),
        "the reply streamed into the page: {seen}"
    );
    assert_eq!(seen["status"], "stopped", "{seen}");
    assert_eq!(seen["send_enabled"], true, "{seen}");
    // Stop closed the connection: the server cancelled the sequence.
    assert_eq!(
        s.wait_metric("llm_running_sequences", 0.0, 5),
        0.0,
        "the stopped reply still runs on the server"
    );
    seen
}

/// The directory of the Python client scripts.
pub fn scripts() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}
