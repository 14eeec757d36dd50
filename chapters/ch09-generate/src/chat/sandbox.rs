//! A chat template runs in a child process whose memory the kernel bounds.
//!
//! Fuel bounds a template's steps and [`super::render::render_with`] bounds what it writes,
//! but nothing inside the interpreter bounds what it builds in between:
//! `{% set ns.s = ns.s ~ ns.s %}` forty times is a few hundred steps and a terabyte of string,
//! and an allocation that fails ends the whole process. So a template from a model file renders in a child: this same
//! program, started with [`CHILD_FLAG`], which lowers its own data limit (`RLIMIT_DATA`: heap
//! and anonymous mappings) and CPU limit before it reads the conversation from standard input,
//! and writes the text to standard output. A template over either limit ends the child; the
//! caller, a server say, answers with an error and its memory does not move.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, ExitCode, ExitStatus, Stdio};

use serde_json::json;

use super::environment::Vars;
use super::render::render_with;
use super::template::{ChatTemplate, Message};

/// The hidden first argument that makes a binary a template child (see [`child_main`]).
pub const CHILD_FLAG: &str = "--render-chat-template";

/// The child's data limit: this much, plus [`BYTES_PER_MESSAGE_BYTE`] for every byte of the
/// messages. SmolLM2's template needs about 2 MiB for a short chat.
pub const BASE_MEMORY: u64 = 32 << 20;
pub const BYTES_PER_MESSAGE_BYTE: u64 = 8;

/// The child's CPU time limit, in seconds: a template that loops over a string of megabytes
/// is within its fuel and could still take minutes.
pub const CPU_SECONDS: u64 = 2;

/// The exit code of a child whose template refused the conversation, or was refused.
const REFUSED: i32 = 3;

/// Where templates render: a program that answers [`CHILD_FLAG`].
#[derive(Clone, Debug)]
pub struct Sandbox {
    exe: PathBuf,
}

impl Sandbox {
    /// The running program as the child: its `main` must call [`child_main`] first.
    pub fn this_program() -> Result<Sandbox, String> {
        let exe = std::env::current_exe()
            .map_err(|e| format!("cannot find this program to render the chat template in: {e}"))?;
        Ok(Sandbox { exe })
    }

    /// Another program as the child (a test names the binary under test).
    pub fn program(exe: impl Into<PathBuf>) -> Sandbox {
        Sandbox { exe: exe.into() }
    }

    /// [`Sandbox::render_with`] without special tokens, the clock at this moment.
    pub fn render(
        &self,
        source: &str,
        messages: &[Message],
        add_generation_prompt: bool,
    ) -> Result<String, String> {
        self.render_with(source, messages, add_generation_prompt, &Vars::now())
    }

    // ANCHOR: sandbox_render
    /// [`render_with`] of the Jinja template `source`, in a child process.
    pub fn render_with(
        &self,
        source: &str,
        messages: &[Message],
        add_generation_prompt: bool,
        vars: &Vars,
    ) -> Result<String, String> {
        let tools_bytes = vars
            .tools
            .as_ref()
            .map_or(0, |t| t.to_string().len() as u64);
        let text_bytes: u64 = tools_bytes
            + messages
                .iter()
                .map(|m| (m.role.len() + m.content.len()) as u64)
                .sum::<u64>();
        let limit = BASE_MEMORY.saturating_add(text_bytes.saturating_mul(BYTES_PER_MESSAGE_BYTE));
        let mut child = Command::new(&self.exe)
            .arg(CHILD_FLAG)
            .arg(limit.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                format!(
                    "cannot start {} to render the chat template: {e}",
                    self.exe.display()
                )
            })?;
        let request = json!({
            "template": source,
            "messages": messages.iter().map(|m| json!({"role": m.role, "content": m.content})).collect::<Vec<_>>(),
            "add_generation_prompt": add_generation_prompt,
            "bos_token": vars.bos_token,
            "eos_token": vars.eos_token,
            "now": vars.now,
            "tools": vars.tools,
        });
        let mut stdin = child.stdin.take().expect("stdin is piped");
        // A child that died early closes the pipe: its status says why, below.
        let _ = serde_json::to_writer(&mut stdin, &request);
        drop(stdin);
        let out = child
            .wait_with_output()
            .map_err(|e| format!("the chat template's process failed: {e}"))?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        match refusal(out.status, &stderr, limit) {
            None => String::from_utf8(out.stdout)
                .map_err(|_| "the chat template wrote text that is not UTF-8".to_string()),
            Some(e) => Err(e),
        }
    }
    // ANCHOR_END: sandbox_render
}

/// Why the child failed, in the caller's terms; `None` when it succeeded.
fn refusal(status: ExitStatus, stderr: &str, limit: u64) -> Option<String> {
    if status.success() {
        return None;
    }
    if status.code() == Some(REFUSED) {
        return Some(stderr.trim().to_string());
    }
    if stderr.contains("memory allocation of") {
        return Some(format!(
            "the model's chat template (tokenizer.chat_template) needed more than {} MiB \
             of memory for this conversation: refusing it",
            limit >> 20
        ));
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if matches!(status.signal(), Some(libc::SIGXCPU | libc::SIGKILL)) {
            return Some(format!(
                "the model's chat template (tokenizer.chat_template) used more than \
                 {CPU_SECONDS} s of CPU: refusing it"
            ));
        }
    }
    Some(format!(
        "the chat template's process failed ({status}): {}",
        stderr.trim()
    ))
}

// ANCHOR: child_main
/// Call first in `main`: when this process was started as a template child, it renders the
/// conversation on standard input and returns the exit code; otherwise `None`.
pub fn child_main() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next().is_none_or(|a| a != CHILD_FLAG) {
        return None;
    }
    let limit = args.next().and_then(|a| a.to_str()?.parse::<u64>().ok());
    let Some(limit) = limit else {
        eprintln!("{CHILD_FLAG} takes the memory limit in bytes");
        return Some(ExitCode::from(2));
    };
    limit_this_process(limit);
    let mut input = Vec::new();
    let rendered = std::io::stdin()
        .read_to_end(&mut input)
        .map_err(|e| e.to_string())
        .and_then(|_| {
            serde_json::from_slice::<serde_json::Value>(&input).map_err(|e| e.to_string())
        })
        .and_then(|request| render_request(&request));
    match rendered {
        Ok(text) => {
            let mut stdout = std::io::stdout().lock();
            if stdout
                .write_all(text.as_bytes())
                .and_then(|_| stdout.flush())
                .is_err()
            {
                return Some(ExitCode::FAILURE);
            }
            Some(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("{e}");
            Some(ExitCode::from(REFUSED as u8))
        }
    }
}
// ANCHOR_END: child_main

fn render_request(request: &serde_json::Value) -> Result<String, String> {
    let source = request["template"].as_str().ok_or("no template")?;
    let messages = request["messages"]
        .as_array()
        .ok_or("no messages")?
        .iter()
        .map(|m| {
            Message::new(
                m["role"].as_str().unwrap_or_default(),
                m["content"].as_str().unwrap_or_default(),
            )
        })
        .collect::<Vec<_>>();
    let add = request["add_generation_prompt"].as_bool().unwrap_or(true);
    let token = |name: &str| request[name].as_str().map(String::from);
    let vars = Vars {
        bos_token: token("bos_token"),
        eos_token: token("eos_token"),
        now: request["now"].as_i64().ok_or("no clock")?,
        tools: Some(request["tools"].clone()).filter(|t| !t.is_null()),
    };
    render_with(
        &ChatTemplate::Jinja(source.to_string()),
        &messages,
        add,
        &vars,
    )
}

/// Lowers this process's data, CPU and core-file limits (Linux counts heap and anonymous
/// mappings in `RLIMIT_DATA`; other systems may bound less).
fn limit_this_process(data_bytes: u64) {
    #[cfg(unix)]
    for (resource, value) in [
        (libc::RLIMIT_DATA, data_bytes),
        (libc::RLIMIT_CPU, CPU_SECONDS),
        (libc::RLIMIT_CORE, 0),
    ] {
        let limit = libc::rlimit {
            rlim_cur: value as libc::rlim_t,
            rlim_max: value as libc::rlim_t,
        };
        // SAFETY: setrlimit reads the struct we pass and changes only this process's limits.
        unsafe {
            libc::setrlimit(resource, &limit);
        }
    }
    #[cfg(not(unix))]
    let _ = data_bytes;
}
