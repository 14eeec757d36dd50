//! `cargo run --release -p ch01-tensors`: the chapter's ideas on real numbers.
//!
//! 1. Views: a transpose, a narrow and a row of one small tensor, sharing its storage.
//! 2. Matmul: naive i-j-k vs i-k-j vs blocked, in GFLOP/s on this machine.
//! 3. Safetensors: open SmolLM2's weights through mmap (or a small file we write, when
//!    the model has not been fetched) and list what is inside.

use ch01_tensors::safetensors::{self, SafeTensors};
use ch01_tensors::{Tensor, models, ops};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

const USAGE: &str = "\
usage: ch01-tensors [--size N]... [--sizes A,B,...] [--model PATH] [--fetch] [--json]
       ch01-tensors --mine [--size N]...

  --size N         matmul size to benchmark (N×N · N×N); repeatable. Default: 256 and 512
  --sizes A,B,...  several sizes at once, e.g. --sizes 128,256,512
  --model PATH     safetensors file to load (default: SmolLM2's model.safetensors)
  --fetch          fetch and convert SmolLM2 first if it is missing (runs scripts/models.sh)
  --json           print every number as one JSON object instead of text
  --mine           exercise 3: time YOUR matmul_ikj (src/exercises.rs) against the chapter's
  -h, --help       this help";

const MAX_SIZE: usize = 2048; // the naive kernel needs about a minute at 2048

struct Args {
    sizes: Vec<usize>,
    model: Option<PathBuf>,
    fetch: bool,
    json: bool,
    mine: bool,
}

fn parse_args() -> Result<Args, lexopt::Error> {
    use lexopt::prelude::*;
    let mut args = Args {
        sizes: Vec::new(),
        model: None,
        fetch: false,
        json: false,
        mine: false,
    };
    let mut parser = lexopt::Parser::from_env();
    while let Some(arg) = parser.next()? {
        match arg {
            Long("size") => args.sizes.push(parse_size(&parser.value()?.string()?)?),
            Long("sizes") => {
                for s in parser.value()?.string()?.split(',') {
                    args.sizes.push(parse_size(s)?);
                }
            }
            Long("model") => args.model = Some(parser.value()?.into()),
            Long("fetch") => args.fetch = true,
            Long("json") => args.json = true,
            Long("mine") => args.mine = true,
            Short('h') | Long("help") => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ => return Err(arg.unexpected()),
        }
    }
    if args.sizes.is_empty() {
        args.sizes = vec![256, 512];
    }
    Ok(args)
}

fn parse_size(s: &str) -> Result<usize, lexopt::Error> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_SIZE).contains(&n) => Ok(n),
        _ => {
            Err(format!("invalid size {s:?}: expected a whole number from 1 to {MAX_SIZE}").into())
        }
    }
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("error: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    if args.mine {
        return time_mine(&args.sizes);
    }
    let text = !args.json;
    let views = demo_views(text)?;
    let matmul = demo_matmul(&args.sizes, text)?;
    let model = match (&args.model, args.fetch) {
        (Some(path), _) => Some(path.clone()),
        (None, true) => Some(models::ensure_smollm2_hf()?.join("model.safetensors")),
        (None, false) => {
            let path = models::smollm2_hf_dir().join("model.safetensors");
            path.exists().then_some(path)
        }
    };
    let loaded = demo_safetensors(model, text)?;
    if args.json {
        let all = json!({ "views": views, "matmul": matmul, "safetensors": loaded });
        println!("{}", serde_json::to_string_pretty(&all)?);
    }
    Ok(())
}

/// Prints one view: its layout, whether it shares `base`'s storage, and its elements.
fn show(label: &str, t: &Tensor, base: &Tensor, text: bool) -> Value {
    let shares = t.shares_storage(base);
    if text {
        println!("{label}");
        println!(
            "  shape {:?}  strides {:?}  offset {}  contiguous: {}  shares t's storage: {}",
            t.shape(),
            t.strides(),
            t.offset(),
            t.is_contiguous(),
            if shares { "yes" } else { "no (copied)" }
        );
        for line in t.to_string().lines() {
            println!("  {line}");
        }
    }
    json!({ "view": label, "shape": t.shape(), "strides": t.strides(), "offset": t.offset(),
            "contiguous": t.is_contiguous(), "shares_storage": shares, "values": t.to_vec() })
}

fn demo_views(text: bool) -> Result<Value, ch01_tensors::Error> {
    if text {
        println!("== 1. Views: one buffer, many tensors ==");
    }
    let t = Tensor::from_vec((0..6).map(|v| v as f32).collect(), &[2, 3])?; // (2, 3)
    let shown = vec![
        show(
            "t = Tensor::from_vec([0, 1, 2, 3, 4, 5], &[2, 3])",
            &t,
            &t,
            text,
        ),
        show("t.transpose(0, 1)", &t.transpose(0, 1), &t, text),
        show(
            "t.narrow(1, 1, 2)   (columns 1..3)",
            &t.narrow(1, 1, 2)?,
            &t,
            text,
        ),
        show("t.row(1)", &t.row(1), &t, text),
        show(
            "t.transpose(0, 1).contiguous()",
            &t.transpose(0, 1).contiguous(),
            &t,
            text,
        ),
    ];
    Ok(Value::Array(shown))
}

/// Deterministic pseudo-random values in [-1, 1): a 64-bit LCG, top bits kept.
fn random_matrix(len: usize, seed: u64) -> Vec<f32> {
    ch01_tensors::random::uniform(len, seed)
}

/// Best time in seconds over repeated runs (at least 2, until ~0.25 s have passed).
fn best_time(mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    let mut best = f64::INFINITY;
    let mut runs = 0;
    while runs < 2 || start.elapsed().as_secs_f64() < 0.25 {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed().as_secs_f64());
        runs += 1;
    }
    best
}

/// Exercise 3's check in numbers: the reader's `exercises::matmul_ikj` beside the chapter's,
/// on the same matrices, with their results compared. A stub that still says `todo!()` is
/// reported as such, not as a crash.
fn time_mine(sizes: &[usize]) -> Result<(), Box<dyn std::error::Error>> {
    println!("exercise 3: your matmul_ikj (src/exercises.rs) against the chapter's, GFLOP/s");
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {})); // the todo!() message is ours to say
    let probe = std::panic::catch_unwind(|| {
        let mut out = [0.0f32; 1];
        ch01_tensors::exercises::matmul_ikj(&mut out, &[1.0], &[1.0], 1, 1, 1);
    });
    std::panic::set_hook(default_hook);
    if probe.is_err() {
        return Err("your matmul_ikj is not written yet (it still panics with todo!()): fill it in, then run this again".into());
    }
    for &n in sizes {
        let (a, b) = (random_matrix(n * n, 1), random_matrix(n * n, 2));
        let flops = 2.0 * (n as f64).powi(3);
        let (mut ours, mut yours) = (vec![0.0; n * n], vec![0.0; n * n]);
        let t_ours = best_time(|| ops::matmul_ikj(&mut ours, &a, &b, n, n, n));
        let t_yours =
            best_time(|| ch01_tensors::exercises::matmul_ikj(&mut yours, &a, &b, n, n, n));
        let scale = ours.iter().fold(0.0f32, |m, v| m.max(v.abs())).max(1.0);
        let agree = ours
            .iter()
            .zip(&yours)
            .all(|(x, y)| (x - y).abs() <= 1e-4 * scale);
        println!(
            "n = {n}   chapter {:.2} GFLOP/s | yours {:.2} GFLOP/s | results {}",
            flops / t_ours / 1e9,
            flops / t_yours / 1e9,
            if agree {
                "agree"
            } else {
                "DIFFER: run `cargo xtask exercises ch01`"
            }
        );
    }
    Ok(())
}

type Kernel = fn(&mut [f32], &[f32], &[f32], usize, usize, usize);

fn demo_matmul(sizes: &[usize], text: bool) -> Result<Value, String> {
    if text {
        println!("\n== 2. Matmul: out (n, n) = a (n, n) · b (n, n), 2n³ FLOPs ==");
        // No padding around timings: the book's output check masks the numbers, so the
        // text between them must not depend on how wide they are.
        println!("(GFLOP/s, best of several runs; higher is better)");
    }
    let kernels: [(&str, Kernel); 3] = [
        ("naive", ops::matmul_naive),
        ("ikj", ops::matmul_ikj),
        ("blocked", ops::matmul_blocked),
    ];
    let mut rows = Vec::new();
    for &n in sizes {
        let a = random_matrix(n * n, 1); // (n, n)
        let b = random_matrix(n * n, 2); // (n, n)
        let flops = 2.0 * (n as f64).powi(3);
        let mut outs = Vec::new(); // one (n, n) result per kernel
        let mut row = json!({ "n": n });
        let mut gflops = Vec::new();
        for (name, kernel) in kernels {
            let mut out = vec![0.0; n * n]; // (n, n)
            let secs = best_time(|| kernel(&mut out, &a, &b, n, n, n));
            gflops.push(flops / secs / 1e9);
            row[format!("{name}_gflops")] = json!(flops / secs / 1e9);
            row[format!("{name}_ms")] = json!(secs * 1e3);
            outs.push(out);
        }
        // Different summation orders round differently; 1e-4 of the largest entry is far
        // above f32 rounding for n ≤ 2048 and far below any indexing bug.
        let scale = outs[0].iter().fold(0.0f32, |m, v| m.max(v.abs())).max(1.0);
        let agree = outs[1..].iter().all(|o| {
            o.iter()
                .zip(&outs[0])
                .all(|(x, y)| (x - y).abs() <= 1e-4 * scale)
        });
        if !agree {
            return Err(format!("matmul kernels disagree at n = {n}: this is a bug"));
        }
        let speedup = gflops[2] / gflops[0];
        row["speedup_blocked_vs_naive"] = json!(speedup);
        if text {
            println!(
                "n = {n:<5} naive {:.2} GFLOP/s | i-k-j {:.2} GFLOP/s | blocked {:.2} GFLOP/s | blocked/naive {speedup:.1}x",
                gflops[0], gflops[1], gflops[2]
            );
        }
        rows.push(row);
    }
    if text {
        println!("(all three kernels agree on every size, to 1e-4 of the largest entry)");
    }
    Ok(Value::Array(rows))
}

fn demo_safetensors(
    model: Option<PathBuf>,
    text: bool,
) -> Result<Value, Box<dyn std::error::Error>> {
    if text {
        println!("\n== 3. Loading safetensors through mmap ==");
    }
    let (path, source) = match model {
        Some(path) => (path, "model"),
        None => {
            let path =
                std::env::temp_dir().join(format!("ch01-demo-{}.safetensors", std::process::id()));
            write_small_file(&path)?;
            if text {
                let missing = models::smollm2_hf_dir().join("model.safetensors");
                println!(
                    "SmolLM2 is not prepared ({} is missing),",
                    missing.display()
                );
                println!(
                    "so this demo writes and loads a small file instead. To get the model, run"
                );
                println!("    cargo run --release -p ch01-tensors -- --fetch");
                println!("or  {}", models::FETCH_HINT);
            }
            (path, "demo file")
        }
    };
    let result = list_file(&path, source, text);
    if source == "demo file" {
        let _ = std::fs::remove_file(&path);
    }
    let mut report = result?;
    report["source"] = json!(source);
    Ok(report)
}

fn write_small_file(path: &std::path::Path) -> Result<(), ch01_tensors::Error> {
    let embed = Tensor::from_vec((0..12).map(|v| v as f32 / 4.0).collect(), &[4, 3])?; // (vocab, dim)
    let norm = Tensor::from_vec(vec![1.0, 1.0, 1.0], &[3])?; // (dim,)
    let proj = Tensor::from_vec((0..6).map(|v| v as f32).collect(), &[2, 3])?; // (out, dim)
    safetensors::write(
        path,
        &[
            ("embed.weight", &embed),
            ("norm.weight", &norm),
            ("proj.weight", &proj),
        ],
    )
}

fn list_file(
    path: &std::path::Path,
    source: &str,
    text: bool,
) -> Result<Value, Box<dyn std::error::Error>> {
    let start = Instant::now();
    let st = SafeTensors::open(path)?;
    let open_ms = start.elapsed().as_secs_f64() * 1e3;

    let start = Instant::now();
    let names = st.names();
    let tensors = names
        .iter()
        .map(|n| st.tensor(n))
        .collect::<Result<Vec<_>, _>>()?;
    let views_ms = start.elapsed().as_secs_f64() * 1e3;
    let params: usize = tensors.iter().map(Tensor::numel).sum();
    let mapped = tensors.iter().filter(|t| t.is_mapped()).count();

    // Read one float every 4 KiB (one per page), twice. Opening mapped the file but read
    // nothing: the first read of a page is a page fault, in which the OS maps that page
    // (and a few neighbours) in, reading it from disk unless it is in the page cache.
    let mut touch_ms = [0.0; 2];
    let mut pages = 0;
    for ms in &mut touch_ms {
        let start = Instant::now();
        let (mut sum, mut touched) = (0.0f32, 0);
        for t in &tensors {
            let values = t
                .as_slice()
                .ok_or("a freshly loaded tensor is contiguous")?;
            for v in values.iter().step_by(1024) {
                sum += v;
                touched += 1;
            }
        }
        std::hint::black_box(sum); // keep the optimizer from dropping the reads
        *ms = start.elapsed().as_secs_f64() * 1e3;
        pages = touched;
    }

    // The demo file has a per-process name; print a fixed one so the output is reproducible.
    let file_name = match source {
        "model" => path
            .file_name()
            .map_or_else(|| "?".into(), |n| n.to_string_lossy()),
        _ => "(small demo file)".into(),
    };
    if text {
        println!(
            "file {file_name}: {} bytes, {} tensors, {params} parameters",
            st.file_size(),
            st.len()
        );
        println!("opened (file mapped, header parsed and validated) in {open_ms:.2} ms");
        println!(
            "{mapped} of {} tensors are zero-copy views of the mapped file; all of them made in {views_ms:.3} ms",
            st.len()
        );
        println!(
            "reading one float every 4 KiB ({pages} reads): first time {:.2} ms, second time {:.2} ms",
            touch_ms[0], touch_ms[1]
        );
        println!(
            "  (the first time pays for page faults: the OS maps the file in lazily, as it is touched)"
        );
        println!("first tensors (sorted by name):");
        for name in names.iter().take(6) {
            let info = st.info(name).ok_or("listed name has no info")?;
            println!("  {name:<48} {:<4} {:?}", info.dtype.as_str(), info.shape);
        }
        if names.len() > 6 {
            println!("  ... and {} more", names.len() - 6);
        }
        if let Some(first) = tensors
            .first()
            .filter(|t| t.shape().len() == 2 && t.shape()[0] >= 1 && t.shape()[1] >= 3)
        {
            let row0 = first.row(0).narrow(0, 0, 3)?; // a view of a view of the mapped file
            println!("{}.row(0).narrow(0, 0, 3) = {row0:.5}", names[0]);
        }
    }
    Ok(
        json!({ "file": file_name, "bytes": st.file_size(), "tensors": st.len(), "params": params,
               "zero_copy": mapped,  "open_ms": open_ms, "views_ms": views_ms,
               "page_touches": pages, "first_touch_ms": touch_ms[0], "second_touch_ms": touch_ms[1] }),
    )
}
