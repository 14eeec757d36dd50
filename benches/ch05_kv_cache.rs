//! Chapter 5: what the KV cache buys.
//!
//! - `ch05_decode`: one generated token with a context of 16, 64, 256 and 512 tokens —
//!   a cached decode step (one token through the model, attending over the cache) versus
//!   chapter 4's uncached step (the whole context through the model again);
//! - `ch05_prefill`: a 128-token prompt through the model as one batch versus one token at
//!   a time;
//! - `ch05_attend`: one layer's attention over 512 cached positions, contiguous vs paged
//!   (reading through the block table) vs ring buffer.
//!
//! Needs SmolLM2 (`models/smollm2-135m-instruct/hf/`) for the first two; panics with the
//! fetch command when it is missing. The binary's `bench` command measures the same
//! things more briefly and draws the curve: `cargo run --release -p ch05-kv-cache -- bench`.
//!
//!     cargo bench --bench ch05_kv_cache                 # everything (a few minutes)
//!     cargo bench --bench ch05_kv_cache -- ch05_attend  # just the attention kernels

use std::hint::black_box;
use std::time::Duration;

use ch01_tensors::models;
use ch03_attention::{Heads, Mask};
use ch04_forward::Model;
use ch04_forward::generate::filler;
use ch05_kv_cache::attend::attend;
use ch05_kv_cache::bench::SEED_IDS;
use ch05_kv_cache::{Engine, KvCache, KvLayout, KvStore, PagedCache, RingCache};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

fn model() -> Model {
    let dir = models::smollm2_hf_dir();
    models::require(&dir.join("model.safetensors")).unwrap_or_else(|e| panic!("{e}"));
    Model::load(&dir).unwrap_or_else(|e| panic!("{e}"))
}

fn decode(c: &mut Criterion) {
    let m = model();
    let engine = Engine::new(&m);
    let mut group = c.benchmark_group("ch05_decode");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Elements(1)); // elem/s = tokens/s
    for positions in [16usize, 64, 256, 512] {
        let ids = filler(SEED_IDS, positions);
        let mut cache = KvCache::new(engine.layout(), positions);
        engine
            .forward(&mut cache, &ids[..positions - 1], 0)
            .unwrap();
        group.bench_with_input(
            BenchmarkId::new("cached", positions),
            &positions,
            |b, &p| {
                b.iter(|| {
                    engine
                        .forward(&mut cache, black_box(&ids[p - 1..]), p - 1)
                        .unwrap()
                })
            },
        );
        group.bench_with_input(
            BenchmarkId::new("uncached", positions),
            &positions,
            |b, _| b.iter(|| m.next_token_logits(black_box(&ids)).unwrap()),
        );
    }
    group.finish();
}

fn prefill(c: &mut Criterion) {
    let m = model();
    let ids = filler(SEED_IDS, 128);
    let mut group = c.benchmark_group("ch05_prefill");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_secs(5));
    group.throughput(Throughput::Elements(ids.len() as u64)); // elem/s = prompt tokens/s
    let mut engine = Engine::new(&m);
    engine.chunk = ids.len();
    let mut cache = KvCache::new(engine.layout(), ids.len());
    group.bench_function("batched_128", |b| {
        b.iter(|| engine.forward(&mut cache, black_box(&ids), 0).unwrap())
    });
    group.bench_function("token_by_token_128", |b| {
        b.iter(|| {
            for (pos, id) in ids.iter().enumerate() {
                engine
                    .forward(&mut cache, std::slice::from_ref(black_box(id)), pos)
                    .unwrap();
            }
        })
    });
    group.finish();
}

/// Deterministic values in [-1, 1).
fn data(n: usize, seed: u64) -> Vec<f32> {
    ch01_tensors::random::uniform(n, seed)
}

/// Fills one layer of `store` with 512 positions.
fn fill<S: KvStore>(store: &mut S, layout: KvLayout, n: usize) {
    store.reserve(n).unwrap();
    for pos in 0..n {
        let row = data(layout.row_len(), pos as u64);
        store.write(0, pos, &row, &row);
    }
}

fn attend_kernels(c: &mut Criterion) {
    const N: usize = 512;
    let heads = Heads::new(9, 3, 64).unwrap();
    let layout = KvLayout {
        n_layers: 1,
        n_kv_heads: 3,
        head_dim: 64,
    };
    let q = data(heads.q_dim(), 7);
    let mut out = vec![0.0f32; heads.q_dim()];
    let mut scores = Vec::new();
    let mut group = c.benchmark_group("ch05_attend");
    group
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    group.throughput(Throughput::Bytes((2 * N * layout.row_len() * 4) as u64)); // K and V read per step

    let mut contiguous = KvCache::new(layout, N);
    fill(&mut contiguous, layout, N);
    group.bench_function("contiguous_512", |b| {
        b.iter(|| {
            attend(
                &mut out,
                black_box(&q),
                &contiguous,
                0,
                heads,
                N - 1,
                Mask::Causal,
                &mut scores,
            )
        })
    });
    let mut pool = PagedCache::new(layout, 2 * N / 16, 16, N);
    let (other, id) = (pool.new_seq(), pool.new_seq());
    for len in (16..=N).step_by(16) {
        pool.seq(other).reserve(len).unwrap(); // interleave the two sequences' blocks
        pool.seq(id).reserve(len).unwrap();
    }
    let mut seq = pool.seq(id);
    fill(&mut seq, layout, N);
    group.bench_function("paged_512", |b| {
        b.iter(|| {
            attend(
                &mut out,
                black_box(&q),
                &seq,
                0,
                heads,
                N - 1,
                Mask::Causal,
                &mut scores,
            )
        })
    });
    let mut ring = RingCache::new(layout, &[Some(128)], N).unwrap();
    fill(&mut ring, layout, N);
    group.bench_function("ring_window_128", |b| {
        b.iter(|| {
            attend(
                &mut out,
                black_box(&q),
                &ring,
                0,
                heads,
                N - 1,
                Mask::SlidingWindow(128),
                &mut scores,
            )
        })
    });
    group.finish();
}

criterion_group!(benches, attend_kernels, prefill, decode);
criterion_main!(benches);
