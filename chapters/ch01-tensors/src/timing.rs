//! Demo 2: the three matmul kernels in GFLOP/s on this machine, and exercise 3's `--mine`.

use ch01_tensors::ops;
use serde_json::{Value, json};

/// Deterministic pseudo-random values in [-1, 1): a 64-bit LCG, top bits kept.
fn random_matrix(len: usize, seed: u64) -> Vec<f32> {
    ch01_tensors::random::uniform(len, seed)
}

/// Best time in seconds over repeated runs (at least 2, until ~0.25 s have passed).
fn best_time(f: impl FnMut()) -> f64 {
    ch01_tensors::stopwatch::best_of(2, 0.25, f).seconds
}

/// Exercise 3's check in numbers: the reader's `exercises::matmul_ikj` beside the chapter's,
/// on the same matrices, with their results compared. A stub that still says `todo!()` is
/// reported as such, not as a crash.
pub fn time_mine(sizes: &[usize]) -> Result<(), Box<dyn std::error::Error>> {
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

pub fn demo_matmul(sizes: &[usize], text: bool) -> Result<Value, String> {
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
