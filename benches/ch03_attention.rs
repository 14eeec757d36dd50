//! Chapter 3: attention at SmolLM2's shape (9 query heads over 3 KV heads, head_dim 64).
//!
//! - decode: one new query against a KV cache of 128, 512 and 2048 tokens, the work of
//!   one layer per generated token;
//! - prefill: a 512-token prompt, causal, every query at once.
//!
//! Each compares the two-pass kernel (`attention`) with the one-pass online-softmax
//! kernel (`attention_online`). Run: `cargo bench --bench ch03_attention`.

use std::hint::black_box;
use std::time::Duration;

use ch03_attention::{Heads, Mask, attention, attention_online};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

/// Deterministic values in [-1, 1): the kernels' speed does not depend on them.
fn data(n: usize, seed: u32) -> Vec<f32> {
    ch01_tensors::random::uniform(n, u64::from(seed))
}

/// The two kernels under comparison; they share one signature.
type Kernel = fn(&mut [f32], &[f32], &[f32], &[f32], Heads, Mask);
const KERNELS: [(&str, Kernel); 2] = [("two_pass", attention), ("online", attention_online)];

fn smollm2() -> Heads {
    Heads::new(9, 3, 64).expect("SmolLM2's head layout")
}

fn decode(c: &mut Criterion) {
    let heads = smollm2();
    let mut group = c.benchmark_group("ch03_decode");
    group
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for seq_k in [128usize, 512, 2048] {
        let q = data(heads.q_dim(), 1); // (1, 9 * 64)
        let k = data(seq_k * heads.kv_dim(), 2); // (seq_k, 3 * 64)
        let v = data(seq_k * heads.kv_dim(), 3); // (seq_k, 3 * 64)
        let mut out = vec![0.0f32; heads.q_dim()]; // (1, 9 * 64)
        // Bytes of K and V read per step: the KV cache of one layer.
        group.throughput(Throughput::Bytes((2 * seq_k * heads.kv_dim() * 4) as u64));
        for (name, kernel) in KERNELS {
            group.bench_with_input(BenchmarkId::new(name, seq_k), &seq_k, |b, _| {
                b.iter(|| {
                    kernel(
                        black_box(&mut out),
                        black_box(&q),
                        &k,
                        &v,
                        heads,
                        Mask::Causal,
                    )
                })
            });
        }
    }
    group.finish();
}

fn prefill(c: &mut Criterion) {
    let heads = smollm2();
    let seq = 512;
    let q = data(seq * heads.q_dim(), 4); // (512, 9 * 64)
    let k = data(seq * heads.kv_dim(), 5); // (512, 3 * 64)
    let v = data(seq * heads.kv_dim(), 6); // (512, 3 * 64)
    let mut out = vec![0.0f32; q.len()]; // (512, 9 * 64)
    let mut group = c.benchmark_group("ch03_prefill");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    // Work: per head, the causal half of q·kᵀ and of w·v, 2 FLOPs per multiply-add:
    // 9 · 2 · (2 · 64) · 512·513/2 ≈ 303 MFLOP per call.
    for (name, kernel) in KERNELS {
        group.bench_function(format!("{name}_512x512"), |b| {
            b.iter(|| {
                kernel(
                    black_box(&mut out),
                    black_box(&q),
                    &k,
                    &v,
                    heads,
                    Mask::Causal,
                )
            })
        });
    }
    group.finish();
}

criterion_group!(benches, decode, prefill);
criterion_main!(benches);
