//! `ch03-attention bench --markdown FILE`: the two attention kernels timed at SmolLM2's shape,
//! the table the book shows (`cargo xtask perf ch03` runs it; the page includes the file).
//!
//! The cases of the criterion bench `benches/ch03_attention.rs`: one decode step (one query)
//! against 128, 512 and 2048 cached keys, and a 512-token causal prefill. Each time is the
//! best of at least three runs; GFLOP/s counts the multiply-adds of q·k and w·v as two
//! operations each (the softmax's exponentials are not counted).

use ch01_tensors::random::uniform;
use ch01_tensors::stopwatch::best_of;
use ch03_attention::{Heads, Mask, attention, attention_online};

/// Each timing: at least this many runs, and at least this long in all.
const MIN_RUNS: usize = 3;
const MIN_SECONDS: f64 = 0.5;

type Kernel = fn(&mut [f32], &[f32], &[f32], &[f32], Heads, Mask);
const KERNELS: [Kernel; 2] = [attention, attention_online];

/// A time for the table, to about three digits: µs below a millisecond, ms above.
fn time(seconds: f64) -> String {
    let ms = seconds * 1e3;
    match ms {
        _ if ms < 1.0 => format!("{:.0} µs", ms * 1e3),
        _ if ms < 10.0 => format!("{ms:.2} ms"),
        _ if ms < 100.0 => format!("{ms:.1} ms"),
        _ => format!("{ms:.0} ms"),
    }
}

/// Seconds of each kernel for `seq_q` causal queries (the last `seq_q` positions) against
/// `seq_k` keys, after checking that the two kernels agree.
fn measure_case(heads: Heads, seq_q: usize, seq_k: usize) -> Result<[f64; 2], String> {
    let q = uniform(seq_q * heads.q_dim(), 1); // (seq_q, 9 * 64)
    let k = uniform(seq_k * heads.kv_dim(), 2); // (seq_k, 3 * 64)
    let v = uniform(seq_k * heads.kv_dim(), 3); // (seq_k, 3 * 64)
    let mut outs = [vec![0.0f32; q.len()], vec![0.0f32; q.len()]]; // (seq_q, 9 * 64) each
    let mut seconds = [0.0; 2];
    for ((kernel, out), s) in KERNELS.into_iter().zip(&mut outs).zip(&mut seconds) {
        *s = best_of(MIN_RUNS, MIN_SECONDS, || {
            kernel(out, &q, &k, &v, heads, Mask::Causal)
        })
        .seconds;
    }
    // weights sum to 1, so outputs are averages of values in [-1, 1]
    if outs[0]
        .iter()
        .zip(&outs[1])
        .any(|(a, b)| (a - b).abs() > 1e-4)
    {
        return Err(format!(
            "attention and attention_online disagree at {seq_q} × {seq_k}"
        ));
    }
    Ok(seconds)
}

/// Measures every case; returns the Markdown table.
pub fn markdown() -> Result<String, String> {
    let heads = Heads::new(9, 3, 64).map_err(|e| e.to_string())?; // SmolLM2's layout
    let mut s = format!(
        "SmolLM2's shape (9 query heads, 3 K/V heads, head_dim 64), one thread, each time the best \
         of at least {MIN_RUNS} runs and {MIN_SECONDS} s (`cargo run --release -p ch03-attention \
         -- bench --markdown FILE`):\n\n\
         | case | two-pass `attention` | one-pass `attention_online` | GFLOP/s, two-pass | GFLOP/s, one-pass |\n\
         |---|---:|---:|---:|---:|\n"
    );
    let cases = [(1, 128), (1, 512), (1, 2048), (512, 512)];
    for (seq_q, seq_k) in cases {
        let [two, one] = measure_case(heads, seq_q, seq_k)?;
        // query i (of the last seq_q positions) sees seq_k − seq_q + i + 1 keys
        let pairs: usize = (0..seq_q).map(|i| seq_k - seq_q + i + 1).sum();
        let flops = (heads.n_heads * pairs * 2 * heads.head_dim * 2) as f64;
        let label = if seq_q == 1 {
            format!("decode, 1 query × {seq_k} keys")
        } else {
            format!("prefill, {seq_q} × {seq_k} causal")
        };
        let line = format!(
            "| {label} | {} | {} | {:.2} | {:.2} |\n",
            time(two),
            time(one),
            flops / two / 1e9,
            flops / one / 1e9
        );
        eprint!("{line}");
        s.push_str(&line);
    }
    Ok(s)
}
