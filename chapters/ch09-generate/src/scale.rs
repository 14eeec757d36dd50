//! `scale`: speed and memory against the model's size. For each file, in the order given:
//! the whole-process memory race (ours against `llama-completion`, the file evicted before
//! each start), then pp512 and tg128 in alternating rounds with `llama-bench`, and the decode
//! ceiling from the bytes a token reads and the read bandwidth, measured once at the start.
//! Synthetic files (`llama-7b-q4_0`) are written by `scripts/make_synthetic_gguf.py` when
//! missing.

use std::path::{Path, PathBuf};
use std::process::Command;

use ch01_tensors::models;
use ch07_simd_parallel::compare::llama_bench_path;
use ch07_simd_parallel::stats::median;
use ch09_generate::scaling::{self, ScaleRow, Setup};

use crate::cli::Args;

/// One file to measure: where it is, and how to make it if it is a missing synthetic one.
struct Target {
    path: PathBuf,
    make: Option<(&'static str, &'static str)>,
}

/// A name (`smollm2`, `gemma3`, `llama-7b-q4_0`) or a path to a GGUF file.
fn resolve(arg: &str) -> Result<Target, String> {
    let path = match arg {
        "smollm2" => models::smollm2_gguf(),
        "gemma3" => models::gemma3_gguf(),
        _ => match scaling::synthetic_spec(arg) {
            Some(spec) => {
                return Ok(Target {
                    path: models::models_dir().join(format!("synthetic/{arg}.gguf")),
                    make: Some(spec),
                });
            }
            None => {
                let p = PathBuf::from(arg);
                if !p.is_file() {
                    return Err(format!(
                        "{arg}: no such file, and not a name scale knows (smollm2, gemma3, or \
                         llama-SHAPE-MIX with SHAPE one of {:?} and MIX one of {:?})",
                        scaling::SYNTHETIC_SHAPES,
                        scaling::SYNTHETIC_MIXES
                    ));
                }
                return Ok(Target {
                    path: p,
                    make: None,
                });
            }
        },
    };
    Ok(Target { path, make: None })
}

/// `$LLM_BOOK_VENV`'s Python (default: `.venv` at the workspace root), checked to import
/// the `gguf` and `numpy` packages the synthetic-file script needs.
fn venv_python() -> Result<PathBuf, String> {
    let venv = match std::env::var_os("LLM_BOOK_VENV") {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => models::workspace_root().join(".venv"),
    };
    let py = venv.join("bin/python");
    let ok = Command::new(&py)
        .args(["-c", "import gguf, numpy"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        Ok(py)
    } else {
        Err(format!(
            "making a synthetic file needs a Python environment with the gguf and numpy \
             packages, and {} has none; `bash scripts/models.sh smollm2-gguf` makes .venv and \
             installs them, or point LLM_BOOK_VENV at one that has them",
            venv.display()
        ))
    }
}

/// Writes a synthetic file with the script, its progress shown as it goes.
fn make_synthetic(py: &Path, out: &Path, shape: &str, mix: &str) -> Result<(), String> {
    let script = models::workspace_root().join("scripts/make_synthetic_gguf.py");
    eprintln!(
        "making {} ({shape} {mix}, random weights) with {} ...",
        out.display(),
        models::shown(&script)
    );
    let status = Command::new(py)
        .arg(&script)
        .args(["--shape", shape, "--mix", mix, "--out"])
        .arg(out)
        .arg("--tokenizer-from")
        .arg(models::smollm2_gguf())
        .stdout(std::io::stderr()) // its last line too: the table alone goes to stdout
        .status()
        .map_err(|e| format!("cannot run {}: {e}", py.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "{} failed ({status}); see its message above",
            script.display()
        ))
    }
}

/// `rounds` alternating rounds on one file (chapter 8's `race_rounds`, llama-bench first);
/// medians of (ours pp512, ours tg128, llama.cpp pp512, llama.cpp tg128). `end_to_end`
/// runs once unmeasured before each measured run, and llama-bench warms up by itself.
fn speeds(
    engine: &ch08_gguf::engine::Engine,
    path: &Path,
    bench: &Path,
    threads: usize,
    rounds: usize,
) -> Result<[f64; 4], String> {
    let per_round = ch08_gguf::bench::race_rounds(engine, path, bench, threads, rounds)?;
    let med = |i: usize| median(&mut per_round.iter().map(|r| r[i]).collect::<Vec<_>>());
    Ok([med(0), med(1), med(2), med(3)])
}

pub fn scale(a: &Args) -> Result<(), String> {
    let names: Vec<&str> = if a.files.is_empty() {
        scaling::DEFAULT_FILES.to_vec()
    } else {
        a.files.iter().map(String::as_str).collect()
    };
    // Everything that can fail before a measurement fails now, not an hour in.
    let targets = names
        .iter()
        .map(|n| resolve(n))
        .collect::<Result<Vec<_>, _>>()?;
    for out in [&a.markdown, &a.svg].into_iter().flatten() {
        let dir = out.parent().filter(|d| !d.as_os_str().is_empty());
        if dir.is_some_and(|d| !d.is_dir()) {
            return Err(format!("{}: its folder does not exist", out.display()));
        }
    }
    let bench = llama_bench_path()?;
    let completion = ch09_generate::race::llama_completion_path()?;
    let missing: Vec<&Target> = targets
        .iter()
        .filter(|t| t.make.is_some() && !t.path.exists())
        .collect();
    // the real models are fetched on first use; the synthetic files borrow SmolLM2's tokenizer
    let wants = |p: PathBuf| targets.iter().any(|t| t.path == p);
    if (!missing.is_empty() || wants(models::smollm2_gguf())) && !models::smollm2_gguf().exists() {
        models::fetch("smollm2-gguf")?;
    }
    if wants(models::gemma3_gguf()) && !models::gemma3_gguf().exists() {
        models::fetch("gemma3")?;
    }
    if !missing.is_empty() {
        let py = venv_python()?;
        for t in missing {
            if let Some((shape, mix)) = t.make {
                make_synthetic(&py, &t.path, shape, mix)?;
            }
        }
    }
    eprintln!("measuring the read bandwidth on {} threads ...", a.threads);
    let bandwidth = ch07_simd_parallel::bench::read_bandwidth(a.threads, 5)?;
    let mut rows = Vec::new();
    let mut isa = "";
    for (i, t) in targets.iter().enumerate() {
        let path = models::require(&t.path)?;
        let shown = models::shown(&path);
        eprintln!(
            "[{}/{}] {shown}: whole-process memory race ...",
            i + 1,
            targets.len()
        );
        // first, while this process maps nothing of the file, so each start is cold
        let process = ch09_generate::race::race(&path, &completion, a.threads, a.rounds)?;
        let m = ch08_gguf::load(&path).map_err(|e| format!("{shown}: {e}"))?;
        let engine = m.engine()?;
        isa = engine.kernels.name();
        eprintln!("[{}/{}] {shown}: pp512 and tg128 ...", i + 1, targets.len());
        let [op, ot, lp, lt] = speeds(&engine, &path, &bench, a.threads, a.rounds)?;
        let bytes_per_token = m.model.bytes_read_per_token() as u64;
        rows.push(ScaleRow {
            model: path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into(),
            params: m.file.gguf.tensors.iter().map(|t| t.elements()).sum(),
            file_bytes: std::fs::metadata(&path).map_or(0, |md| md.len()),
            bytes_per_token,
            ours_pp512_tok_s: op,
            llama_cpp_pp512_tok_s: lp,
            ours_tg128_tok_s: ot,
            llama_cpp_tg128_tok_s: lt,
            ceiling_tok_s: bandwidth * 1e9 / bytes_per_token.max(1) as f64,
            ours_peak_rss_bytes: process.ours_peak_rss_bytes,
            llama_cpp_peak_rss_bytes: process.llama_cpp_peak_rss_bytes,
        });
    }
    let setup = Setup {
        threads: a.threads,
        rounds: a.rounds,
        isa,
        bandwidth_gb_s: bandwidth,
    };
    let table = scaling::markdown(&rows, &setup);
    let write = |out: &Path, text: &str| {
        std::fs::write(out, text).map_err(|e| format!("cannot write {}: {e}", out.display()))
    };
    if let Some(out) = &a.markdown {
        write(out, &table)?;
    }
    if let Some(out) = &a.svg {
        write(out, &scaling::svg(&rows, a.threads))?;
    }
    if a.json {
        let json = serde_json::json!({"threads": a.threads, "rounds": a.rounds, "isa": isa,
                                      "read_bandwidth_gb_s": bandwidth, "files": rows});
        println!("{json:#}");
    } else {
        print!("{table}");
    }
    Ok(())
}
