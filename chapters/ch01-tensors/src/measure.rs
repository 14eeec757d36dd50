//! `--markdown FILE`: the chapter's speed table, measured on this machine and written as
//! Markdown for the book (`cargo xtask perf ch01` runs it; the page includes the file).
//!
//! For each size n: the three matmul kernels on (n, n) · (n, n), and `matvec` of an
//! (n, n) matrix by an n-vector, each the best of at least three timed runs, in GFLOP/s
//! (a multiply and an add count as two). Every kernel's result is checked against the naive
//! one first, so a fast wrong kernel cannot make the table.

use ch01_tensors::ops;
use ch01_tensors::random::uniform;
use ch01_tensors::stopwatch::best_of;

/// Each timing: at least this many runs, and at least this long in all.
const MIN_RUNS: usize = 3;
const MIN_SECONDS: f64 = 0.5;

type Kernel = fn(&mut [f32], &[f32], &[f32], usize, usize, usize);
const KERNELS: [(&str, Kernel); 3] = [
    ("naive", ops::matmul_naive),
    ("ikj", ops::matmul_ikj),
    ("blocked", ops::matmul_blocked),
];

/// One row of the table: GFLOP/s of naive, i-k-j, blocked, and matvec at size `n`.
struct Row {
    n: usize,
    matmul: [f64; 3],
    matvec: f64,
}

fn measure_size(n: usize) -> Result<Row, String> {
    let a = uniform(n * n, 1); // (n, n)
    let b = uniform(n * n, 2); // (n, n)
    let flops = 2.0 * (n as f64).powi(3);
    let mut matmul = [0.0; 3];
    let mut reference: Vec<f32> = Vec::new(); // (n, n), the naive kernel's result
    for (i, (name, kernel)) in KERNELS.into_iter().enumerate() {
        let mut out = vec![0.0; n * n]; // (n, n)
        let best = best_of(MIN_RUNS, MIN_SECONDS, || kernel(&mut out, &a, &b, n, n, n));
        matmul[i] = flops / best.seconds / 1e9;
        if i == 0 {
            reference = out;
        } else {
            // the demo's tolerance: far above f32 rounding, far below an indexing bug
            let scale = reference
                .iter()
                .fold(0.0f32, |m, v| m.max(v.abs()))
                .max(1.0);
            if out
                .iter()
                .zip(&reference)
                .any(|(x, y)| (x - y).abs() > 1e-4 * scale)
            {
                return Err(format!(
                    "matmul_{name} disagrees with matmul_naive at n = {n}"
                ));
            }
        }
    }
    let x = uniform(n, 3); // (n)
    let mut y = vec![0.0; n]; // (n)
    let best = best_of(MIN_RUNS, MIN_SECONDS, || ops::matvec(&mut y, &a, &x));
    let matvec = 2.0 * (n * n) as f64 / best.seconds / 1e9;
    Ok(Row { n, matmul, matvec })
}

/// Measures every size (printing each row as it is done: the naive kernel at n = 1024
/// takes a while) and returns the Markdown table.
pub fn markdown(sizes: &[usize]) -> Result<String, String> {
    let mut s = format!(
        "GFLOP/s on one core, each the best of at least {MIN_RUNS} runs and {MIN_SECONDS} s \
         (`cargo run --release -p ch01-tensors -- --sizes {} --markdown FILE`):\n\n\
         | n | naive i-j-k | i-k-j | blocked | blocked / naive | blocked / i-k-j | matvec (n × n · n) |\n\
         |---:|---:|---:|---:|---:|---:|---:|\n",
        sizes
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(",")
    );
    for &n in sizes {
        let r = measure_size(n)?;
        let [naive, ikj, blocked] = r.matmul;
        let line = format!(
            "| {} | {naive:.2} | {ikj:.1} | {blocked:.1} | {:.0}× | {:.1}× | {:.2} |\n",
            r.n,
            blocked / naive,
            blocked / ikj,
            r.matvec
        );
        eprint!("{line}");
        s.push_str(&line);
    }
    Ok(s)
}
