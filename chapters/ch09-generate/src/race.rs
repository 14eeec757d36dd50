//! Time to first token and memory, as a user meets them: a whole process started with the
//! model file out of the page cache, asked for one token after a 32-token prompt, timed from
//! spawn to exit, with the peak resident memory the kernel recorded for it. Ours and
//! llama.cpp's `llama-completion` on the same file, alternating, medians.

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use serde::Serialize;

/// A prompt of 32 tokens for both SmolLM2's and Gemma-3's tokenizers, before any BOS
/// (checked by a test).
pub const PROMPT: &str = "Write one short sentence about the sea, the wind and the old lighthouse keeper who lived alone on the rocky island far from the town, with his small dog.";

/// Medians over the rounds, ours and llama.cpp's.
#[derive(Clone, Debug, Serialize)]
pub struct ProcessRace {
    pub rounds: usize,
    pub ours_ttft_cold_ms: f64,
    pub llama_cpp_ttft_cold_ms: f64,
    pub ours_peak_rss_bytes: u64,
    pub llama_cpp_peak_rss_bytes: u64,
}

/// Runs `program` with `args` to its end, under GNU `time`: wall milliseconds from spawn to
/// exit, and the peak resident set `time` reports. Not `wait4` on our own child: Linux
/// carries the parent's peak over to an exec'd child, so every child of a 200 MB benchmark
/// would report at least 200 MB; `time` is a small process, and its child starts clean.
pub fn run_process(program: &Path, args: &[OsString]) -> Result<(f64, u64), String> {
    const MARK: &str = "llm-book-peak-kb ";
    let start = Instant::now();
    let out = Command::new("/usr/bin/time")
        .args(["-f", &format!("{MARK}%M")])
        .arg(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("cannot run /usr/bin/time (GNU time: apt-get install time): {e}"))?;
    let ms = start.elapsed().as_secs_f64() * 1e3;
    if !out.status.success() {
        return Err(ch07_simd_parallel::compare::llama_tool_failed(
            program,
            out.status,
            &out.stderr,
        ));
    }
    let kb = String::from_utf8_lossy(&out.stderr)
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix(MARK)?.trim().parse::<u64>().ok())
        .ok_or_else(|| {
            format!(
                "/usr/bin/time did not report {}'s peak memory",
                program.display()
            )
        })?;
    Ok((ms, kb * 1024))
}

/// `rounds` alternating rounds: the file evicted, our generator for one token; evicted
/// again, `llama-completion` for one token. Both on `threads` threads with the same prompt.
pub fn race(
    gguf: &Path,
    llama_completion: &Path,
    threads: usize,
    rounds: usize,
) -> Result<ProcessRace, String> {
    let ours = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let t = threads.to_string();
    let common = ["-p", PROMPT, "-n", "1", "--temp", "0", "-t", &t];
    let args = |extra: &[&str]| -> Vec<OsString> {
        [OsString::from("-m"), gguf.as_os_str().to_owned()]
            .into_iter()
            .chain(common.iter().chain(extra).map(OsString::from))
            .collect()
    };
    // a cold start means the file is not in the page cache; if some process maps it (the
    // caller must not), the kernel keeps its pages, and the race would be warm
    let evict = || {
        let left = ch08_gguf::memory::evict_checked(gguf)
            .map_err(|e| format!("{}: {e}", gguf.display()))?;
        if left > 1 << 20 {
            return Err(format!(
                "{}: {:.1} MB stayed in the page cache after eviction (is another process \
                 mapping it?), so the start would not be cold",
                gguf.display(),
                left as f64 / 1e6
            ));
        }
        Ok::<(), String>(())
    };
    let (mut ours_ms, mut theirs_ms, mut ours_rss, mut theirs_rss) =
        (vec![], vec![], vec![], vec![]);
    for _ in 0..rounds {
        evict()?;
        let (ms, rss) = run_process(&ours, &args(&[]))?;
        ours_ms.push(ms);
        ours_rss.push(rss as f64);
        evict()?;
        let (ms, rss) = run_process(llama_completion, &args(&["-c", "512", "--no-warmup"]))?;
        theirs_ms.push(ms);
        theirs_rss.push(rss as f64);
    }
    let med = |v: &mut Vec<f64>| ch07_simd_parallel::stats::median(v);
    Ok(ProcessRace {
        rounds,
        ours_ttft_cold_ms: med(&mut ours_ms),
        llama_cpp_ttft_cold_ms: med(&mut theirs_ms),
        ours_peak_rss_bytes: med(&mut ours_rss) as u64,
        llama_cpp_peak_rss_bytes: med(&mut theirs_rss) as u64,
    })
}

/// `llama-completion`, built beside `llama-bench` by `scripts/llamacpp.sh`.
pub fn llama_completion_path() -> Result<std::path::PathBuf, String> {
    let bench = ch07_simd_parallel::compare::llama_bench_path()?;
    let path = bench.with_file_name("llama-completion");
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "{} is not built: run `bash scripts/llamacpp.sh`",
            path.display()
        ))
    }
}
