//! Chapter 1: naive vs i-k-j vs blocked matmul, and matvec, on n×n matrices.
//!
//! Throughput is set to the FLOPs of one call (2n³ for matmul, 2n² for matvec), so
//! criterion's "elem/s" reads as FLOP/s: "12.3 Gelem/s" is 12.3 GFLOP/s.
//!
//!     cargo bench --bench ch01_matmul                 # full run
//!     cargo bench --bench ch01_matmul -- --quick      # a quick estimate
//!     cargo bench --bench ch01_matmul -- blocked      # just one kernel

use ch01_tensors::ops;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::time::Duration;

const SIZES: [usize; 3] = [128, 256, 512];

/// Deterministic values in [-1, 1) from a 64-bit LCG.
fn random(len: usize, seed: u64) -> Vec<f32> {
    ch01_tensors::random::uniform(len, seed)
}

type Kernel = fn(&mut [f32], &[f32], &[f32], usize, usize, usize);

fn matmul(c: &mut Criterion) {
    let mut group = c.benchmark_group("ch01_matmul");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    let kernels: [(&str, Kernel); 3] = [
        ("naive", ops::matmul_naive),
        ("ikj", ops::matmul_ikj),
        ("blocked", ops::matmul_blocked),
    ];
    for n in SIZES {
        let a = random(n * n, 1); // (n, n)
        let b = random(n * n, 2); // (n, n)
        let mut out = vec![0.0; n * n]; // (n, n)
        group.throughput(Throughput::Elements(2 * (n as u64).pow(3)));
        for (name, kernel) in kernels {
            group.bench_with_input(BenchmarkId::new(name, n), &n, |bench, &n| {
                bench.iter(|| kernel(black_box(&mut out), black_box(&a), black_box(&b), n, n, n))
            });
        }
    }
    group.finish();
}

fn matvec(c: &mut Criterion) {
    let mut group = c.benchmark_group("ch01_matvec");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2));
    for n in SIZES {
        let w = random(n * n, 3); // (n, n)
        let x = random(n, 4); // (n,)
        let mut out = vec![0.0; n]; // (n,)
        group.throughput(Throughput::Elements(2 * (n as u64).pow(2)));
        group.bench_with_input(BenchmarkId::new("matvec", n), &n, |bench, _| {
            bench.iter(|| ops::matvec(black_box(&mut out), black_box(&w), black_box(&x)))
        });
    }
    group.finish();
}

criterion_group!(benches, matmul, matvec);
criterion_main!(benches);
