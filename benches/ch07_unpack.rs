//! Chapter 7's prefill tiles unpacked out of a packed matrix's groups
//! (`ManyTokens::unpack_packed32`, `unpack_packed_k`), for each packed format on every SIMD
//! level this CPU has: `level` is the level's own (the x86 levels gather a row's four-byte
//! pieces eight at a time, `kernels/avx2_unpack.rs`), `copied` takes the pieces out one at
//! a time (`Packed::unpack_rows32`; a K-quant's rows copied out whole by `Packed::tile`, then
//! unpacked by the level's `unpack_rows_k`), the scalar level's way. A tile of 16 rows of
//! 8 192 columns, rows 4..20 (across three groups); random blocks, no model needed.
//!
//!     cargo bench --bench ch07_unpack

use std::hint::black_box;

use ch06_quantization::matrix::Format;
use ch07_simd_parallel::Isa;
use ch07_simd_parallel::kernels::for_isa;
use ch07_simd_parallel::layout::eights::Rows32;
use ch07_simd_parallel::layout::eights_k::RowsK;
use ch07_simd_parallel::layout::packed::Packed;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

const ROWS: usize = 24;
const COLS: usize = 8192;
const TILE: std::ops::Range<usize> = 4..20;

/// `ROWS` rows of random `format` blocks (a small xorshift: the same on every run), every
/// f16 field (at `halves` in a block) 2^-7 (0x2000).
fn matrix(format: Format, halves: &[usize]) -> Packed {
    let mut s = 0x5eed_u64;
    let mut w: Vec<u8> = (0..ROWS * COLS / format.block_values() * format.block_bytes())
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as u8
        })
        .collect();
    for b in w.chunks_exact_mut(format.block_bytes()) {
        for &at in halves {
            b[at..at + 2].copy_from_slice(&0x2000u16.to_le_bytes());
        }
    }
    Packed::new(format, ROWS, COLS, &w).expect("whole groups of whole blocks")
}

fn unpack(c: &mut Criterion) {
    let mut group = c.benchmark_group("ch07_unpack");
    group.throughput(Throughput::Elements((TILE.len() * COLS) as u64)); // values
    for (name, format, halves) in [
        ("q4_0", Format::Q4_0, &[0][..]),
        ("q4_1", Format::Q4_1, &[0, 2][..]),
        ("q5_0", Format::Q5_0, &[0][..]),
        ("q4_k", Format::Q4_K, &[0, 2][..]),
        ("q6_k", Format::Q6_K, &[208][..]),
    ] {
        let p = matrix(format, halves);
        for isa in Isa::available() {
            let k = for_isa(isa).expect("a level this CPU has");
            let (mut rows32, mut rows_k, mut tile) =
                (Rows32::default(), RowsK::default(), Vec::new());
            // the level's own (on x86: gathered) and, for comparison, the rows copied out of
            // the groups first (a K-quant's then unpacked by the level's row-by-row code)
            group.bench_function(
                BenchmarkId::new(format!("{name}/level"), format!("{isa:?}")),
                |b| {
                    b.iter(|| match format.q32() {
                        Some(_) => k.unpack_packed32(black_box(&p), TILE, &mut rows32),
                        None => k.unpack_packed_k(black_box(&p), TILE, &mut rows_k),
                    })
                },
            );
            group.bench_function(
                BenchmarkId::new(format!("{name}/copied"), format!("{isa:?}")),
                |b| {
                    b.iter(|| match (format.q32(), format.kquant()) {
                        (Some(_), _) => black_box(&p).unpack_rows32(TILE, &mut rows32),
                        (_, Some(kq)) => {
                            k.unpack_rows_k(kq, &black_box(&p).tile(TILE, &mut tile), &mut rows_k)
                        }
                        _ => unreachable!("every format here is Q32 or a K-quant"),
                    })
                },
            );
        }
    }
    group.finish();
}

criterion_group!(benches, unpack);
criterion_main!(benches);
