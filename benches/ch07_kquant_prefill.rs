//! Chapter 7's K-quant prefill kernels: four rows of Q4_K or Q6_K super-blocks against
//! sixteen tokens (`ManyTokens::dot16x4_k`), on every SIMD level this CPU has. The AVX-512
//! level runs the sixteen-token kernel (`kernels/avx512_sixteens4_q32_k.rs`), the others two
//! calls of their eight-token one, so the levels' times say what the wider kernel buys.
//! Random blocks and activations, 8 192 columns (32 super-blocks); no model needed.
//!
//!     cargo bench --bench ch07_kquant_prefill

use std::hint::black_box;

use ch07_simd_parallel::Isa;
use ch07_simd_parallel::kernels::for_isa;
use ch07_simd_parallel::layout::eights_k::{EightsK, RowsK};
use ch07_simd_parallel::layout::kquant::{
    BlockQ8K, KQuant, Q4_K_BYTES, Q6_K_BYTES, QK_K, quantize_q8_k,
};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

const BLOCKS: usize = 32;

/// A small xorshift: the same blocks on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// `BLOCKS` random super-blocks of `bytes` each, every f16 scale (at `scales`) 2^-7 (0x2000).
fn row(rng: &mut Rng, bytes: usize, scales: &[usize]) -> Vec<u8> {
    (0..BLOCKS)
        .flat_map(|_| {
            let mut b: Vec<u8> = (0..bytes).map(|_| rng.next() as u8).collect();
            for &at in scales {
                b[at..at + 2].copy_from_slice(&0x2000u16.to_le_bytes());
            }
            b
        })
        .collect()
}

fn kquant_prefill(c: &mut Criterion) {
    let mut rng = Rng(0x5eed);
    let tokens: Vec<Vec<BlockQ8K>> = (0..16)
        .map(|_| {
            (0..BLOCKS)
                .map(|_| {
                    let x: [f32; QK_K] =
                        std::array::from_fn(|_| (rng.next() % 2001) as f32 / 1000.0 - 1.0);
                    quantize_q8_k(&x)
                })
                .collect()
        })
        .collect();
    let first = EightsK::new(std::array::from_fn(|t| &tokens[t][..]));
    let second = EightsK::new(std::array::from_fn(|t| &tokens[8 + t][..]));
    let mut group = c.benchmark_group("ch07_kquant_prefill");
    // multiply-adds: 4 rows x 16 tokens x the columns
    group.throughput(Throughput::Elements((4 * 16 * BLOCKS * QK_K) as u64));
    for (name, format, bytes, scales) in [
        ("q4_k", KQuant::Q4_K, Q4_K_BYTES, &[0, 2][..]),
        ("q6_k", KQuant::Q6_K, Q6_K_BYTES, &[208][..]),
    ] {
        let rows: Vec<Vec<u8>> = (0..4).map(|_| row(&mut rng, bytes, scales)).collect();
        let rows: Vec<&[u8]> = rows.iter().map(|r| &r[..]).collect();
        for isa in Isa::available() {
            let k = for_isa(isa).expect("a level this CPU has");
            let mut unpacked = RowsK::default();
            k.unpack_rows_k(format, &rows, &mut unpacked);
            group.bench_function(BenchmarkId::new(name, format!("{isa:?}")), |b| {
                b.iter(|| k.dot16x4_k(format, black_box(&unpacked), 0, [&first, &second]))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, kquant_prefill);
criterion_main!(benches);
