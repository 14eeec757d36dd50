//! `loadtest --compare`: starting a server on a free port, waiting until it is healthy, and
//! running the same load against this server and llama-server.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::json;

use super::alone;
use super::client::{get_json, runtime};
use super::load::run;
use super::options::LoadOptions;

/// A server started for `--compare`; stopped (SIGTERM, then waited for) when dropped.
pub(crate) struct Started(pub(crate) Child);

impl Drop for Started {
    fn drop(&mut self) {
        // SAFETY: kill(2) with our own child's pid; it has not been waited for yet.
        unsafe {
            libc::kill(self.0.id() as i32, libc::SIGTERM);
        }
        let _ = self.0.wait();
    }
}

/// A port nobody listens on now (llama-server has no "pick one" flag).
pub(crate) fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

/// Waits until `GET /health` answers 200, at most a minute.
pub(crate) async fn wait_healthy(addr: SocketAddr, child: &mut Child) -> Result<(), String> {
    for _ in 0..600 {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "llama-server exited while starting ({status}); if a signal ended it, it may \
                 have been built for another CPU: rebuild it with `bash scripts/llamacpp.sh`"
            ));
        }
        if get_json(addr, "/health").await.is_ok() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err("the server did not become healthy within a minute".into())
}

// ANCHOR: compare
/// `loadtest --compare`: the same load against this server and llama-server, each started
/// here on `model` with `parallel` slots and `threads` threads, one after the other.
pub fn compare(
    o: &LoadOptions,
    model: &Path,
    threads: usize,
    parallel: usize,
) -> Result<(), String> {
    let llama_server =
        ch07_simd_parallel::compare::llama_bench_path()?.with_file_name("llama-server");
    if !llama_server.is_file() {
        return Err(format!(
            "{} is not built: run `bash scripts/llamacpp.sh`",
            llama_server.display()
        ));
    }
    // Each slot holds one request's prompt and reply at most.
    let per_slot = (o.prompt * 3 / 2 + o.reply * 3 / 2 + 64).next_multiple_of(256);
    let rt = runtime()?;
    let (mut reports, mut alone) = (Vec::new(), None);
    for which in ["ch11-server", "llama-server"] {
        let port = free_port()?;
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let mut cmd = if which == "ch11-server" {
            let mut c = Command::new(std::env::current_exe().map_err(|e| e.to_string())?);
            c.args(["--queue", "4096", "--ctx", &per_slot.to_string()]);
            c
        } else {
            let mut c = Command::new(&llama_server);
            c.args([
                "-np",
                &parallel.to_string(),
                "-c",
                &(per_slot * parallel).to_string(),
            ]);
            c.arg("--no-webui");
            c
        };
        cmd.arg("-m").arg(model);
        cmd.args([
            "-t",
            &threads.to_string(),
            "--port",
            &port.to_string(),
            "--host",
            "127.0.0.1",
        ]);
        if which == "ch11-server" {
            cmd.args(["--parallel", &parallel.to_string()]);
        }
        eprintln!("starting {which} ...");
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("could not start {which}: {e}"))?;
        let ready = rt.block_on(wait_healthy(addr, &mut child));
        let started = Started(child);
        ready.map_err(|e| format!("{which}: {e}"))?;
        let mut report = rt.block_on(run(addr, o))?;
        report.target = which.to_string();
        // one client: its stream against chapter 9's generator, request by request in turn
        if which == "ch11-server" && o.clients == 1 {
            eprintln!("one client's stream and chapter 9's generator, in turn ...");
            alone = Some(alone::stream_and_generator(&rt, addr, o, model, threads)?);
        }
        drop(started);
        reports.push(report);
    }
    let (ours, theirs) = (&reports[0], &reports[1]);
    if o.json {
        let mut j = json!({"ch11_server": ours.json(), "llama_server": theirs.json(),
            "output_tok_s_ratio": ours.output_tok_s / theirs.output_tok_s,
            "ttft_ms_p99_ratio": ours.ttft_ms_p99 / theirs.ttft_ms_p99});
        if let Some((served, g)) = alone {
            j["one_client_streamed_tok_s"] = json!(served);
            j["generator_streamed_tok_s"] = json!(g);
            j["streamed_ratio"] = json!(served / g);
        }
        println!("{j}");
    } else {
        println!("{}\n{}", ours.text(), theirs.text());
        println!(
            "ours / llama-server: output tok/s {:.2}x, time to first token p99 {:.2}x",
            ours.output_tok_s / theirs.output_tok_s,
            ours.ttft_ms_p99 / theirs.ttft_ms_p99
        );
        if let Some((served, g)) = alone {
            println!(
                "one client's stream, {served:.1} tok/s after the first token; chapter 9's generator on the same requests in turn, {g:.1} tok/s ({:.2}x)",
                served / g
            );
        }
    }
    Ok(())
}
// ANCHOR_END: compare
