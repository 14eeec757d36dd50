//! Every path a matrix product can take — a decode step, a few tokens, bands of four, the
//! eight-token kernels — gives the scalar kernel's numbers, bit for bit, on every level this
//! CPU runs and at every thread count: the choice of path is about speed only.

use ch06_quantization::matrix::{Bytes, Format};
use ch06_quantization::search::ScaleRule;
use ch06_quantization::{QMatrix, Scalar};
use ch07_simd_parallel::Isa;
use ch07_simd_parallel::kernels::{ManyTokens, for_isa};
use ch08_gguf::matrix::{KMatrix, Matrix, Packed, matmul_group, matmul_pair_then};

const ROWS: usize = 44;
const COLS: usize = 512;

/// A deterministic pseudo-random stream (no dependency on a crate's generator).
fn stream(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    }
}

fn floats(n: usize, seed: u64) -> Vec<f32> {
    let mut next = stream(seed);
    (0..n)
        .map(|_| (next() % 20_001) as f32 / 10_000.0 - 1.0)
        .collect()
}

/// Random blocks of a K-quant format with every f16 scale a small finite number.
fn k_matrix(format: Format, seed: u64) -> KMatrix {
    let (values, bytes) = (format.block_values(), format.block_bytes());
    let scales: &[usize] = match format {
        Format::Q5_0 => &[0],
        Format::Q4_K => &[0, 2],
        Format::Q6_K => &[208],
        f => unreachable!("{} is not a K-matrix format", f.name()),
    };
    let mut next = stream(seed);
    let mut data: Vec<u8> = (0..ROWS * COLS / values * bytes)
        .map(|_| next() as u8)
        .collect();
    for block in data.chunks_exact_mut(bytes) {
        for &at in scales {
            // an f16 between 2^-8 and 2^-6: exponent bits 7..9, any mantissa
            let h = (((7 + next() % 3) as u16) << 10) | (next() as u16 & 0x3ff);
            block[at..at + 2].copy_from_slice(&h.to_le_bytes());
        }
    }
    KMatrix::new(format, ROWS, COLS, Bytes::from_vec(data)).expect("whole blocks")
}

/// Every matrix kind the files hold, but F32 (chapter 4's `linear`, not a quantized kernel).
fn matrices() -> Vec<(String, Matrix)> {
    let w = floats(ROWS * COLS, 7);
    let mut out: Vec<(String, Matrix)> = [Format::Q4_0, Format::Q4_1, Format::Q8_0]
        .into_iter()
        .map(|f| {
            let m = QMatrix::quantize(&w, ROWS, COLS, f, ScaleRule::Absmax).expect("quantizes");
            (f.name().to_string(), Matrix::Q(m))
        })
        .collect();
    for (i, f) in [Format::Q5_0, Format::Q4_K, Format::Q6_K]
        .into_iter()
        .enumerate()
    {
        out.push((f.name().to_string(), Matrix::K(k_matrix(f, 11 + i as u64))));
    }
    // Q4_0, Q4_1, Q5_0, Q4_K and Q6_K interleaved eight rows at a time, as the AVX2 level loads them:
    // 40 rows
    let rows = ROWS / 8 * 8;
    for (f, p) in [(Format::Q4_0, Format::Q4_0), (Format::Q4_1, Format::Q4_1)] {
        let m = QMatrix::quantize(&w[..rows * COLS], rows, COLS, f, ScaleRule::Absmax)
            .expect("quantizes");
        let p = Packed::new(p, rows, COLS, m.rows_bytes(0, rows)).expect("whole groups");
        out.push((format!("{} packed", f.name()), Matrix::P(p)));
    }
    let q5_0 = k_matrix(Format::Q5_0, 11);
    let bytes = &q5_0.bytes_all()[..rows * COLS / 32 * 22];
    let p = Packed::new(Format::Q5_0, rows, COLS, bytes).expect("whole groups");
    out.push(("Q5_0 packed".to_string(), Matrix::P(p)));
    for (i, (f, pf)) in [(Format::Q4_K, Format::Q4_K), (Format::Q6_K, Format::Q6_K)]
        .into_iter()
        .enumerate()
    {
        let k = k_matrix(f, 12 + i as u64);
        let bytes = &k.bytes_all()[..rows * k.row_len()];
        let p = Packed::new(pf, rows, COLS, bytes).expect("whole groups");
        out.push((format!("{} packed", f.name()), Matrix::P(p)));
    }
    out
}

/// The scalar kernels' product, one token at a time; for a packed matrix, of its rows as the
/// file stores them.
fn reference(m: &Matrix, x: &[f32], seq: usize) -> Vec<f32> {
    if let Matrix::P(p) = m {
        let bytes = Bytes::from_vec((0..p.rows).flat_map(|r| p.row_bytes(r)).collect());
        let (rows, cols) = (p.rows, p.cols);
        let as_stored = match p.format {
            Format::Q4_0 => QMatrix::from_blocks(Format::Q4_0, rows, cols, bytes).map(Matrix::Q),
            Format::Q4_1 => QMatrix::from_blocks(Format::Q4_1, rows, cols, bytes).map(Matrix::Q),
            Format::Q5_0 => KMatrix::new(Format::Q5_0, rows, cols, bytes).map(Matrix::K),
            Format::Q4_K => KMatrix::new(Format::Q4_K, rows, cols, bytes).map(Matrix::K),
            Format::Q6_K => KMatrix::new(Format::Q6_K, rows, cols, bytes).map(Matrix::K),
            f => unreachable!("{} is never packed", f.name()),
        };
        return reference(&as_stored.expect("whole blocks"), x, seq);
    }
    let mut out = vec![0.0f32; seq * m.rows()];
    for (t, o) in out.chunks_exact_mut(m.rows()).enumerate() {
        let xt = &x[t * COLS..(t + 1) * COLS];
        ch07_simd_parallel::pool::in_pool(1, || m.matmul(&Scalar, &Scalar, o, xt, 1))
            .expect("a pool of one thread");
    }
    out
}

fn levels() -> Vec<(
    Isa,
    &'static dyn ch06_quantization::Kernels,
    &'static dyn ManyTokens,
)> {
    Isa::available()
        .into_iter()
        .map(|isa| {
            let k = for_isa(isa).expect("available");
            (isa, k as &dyn ch06_quantization::Kernels, k)
        })
        .collect()
}

#[test]
fn every_product_path_gives_the_scalar_numbers() {
    let mats = matrices();
    // by rows under 16 tokens; one band, its rows shared by the threads, under 64 (and on
    // five threads always: no band count from two to four divides five); from 64, two bands
    // on two and eight threads (four runs of rows each on eight), three on three threads
    // from 96, four on eight from 128 (bands of 32 tokens or more)
    for seq in [1, 2, 3, 5, 8, 9, 16, 17, 24, 40, 45, 63, 64, 70, 130] {
        let x = floats(seq * COLS, 100 + seq as u64);
        for (name, m) in &mats {
            let want = reference(m, &x, seq);
            for (isa, k, kk) in levels() {
                for threads in [1, 2, 3, 5, 8] {
                    let rows = m.rows();
                    let mut got = vec![0.0f32; seq * rows];
                    ch07_simd_parallel::pool::in_pool(threads, || {
                        m.matmul(k, kk, &mut got, &x, seq)
                    })
                    .expect("a pool");
                    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                        assert_eq!(
                            g.to_bits(),
                            w.to_bits(),
                            "{name}, {seq} tokens, {isa}, {threads} threads: token {}, row {} \
                             is {g}, the scalar kernel gives {w}",
                            i / rows,
                            i % rows
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn grouped_products_equal_single_products() {
    let mats = matrices();
    // Q8_0 before Q4_0: one kind of activations, and only the second has an eight-token kernel
    let mut reordered = matrices();
    reordered.swap(0, 2);
    // a KMatrix and a packed matrix of one kind of activations: Q5_0 with Q5_0, Q4_K with
    // Q4_K (in a prefill the first one's quantization serves the second)
    let mut mixed = matrices();
    mixed.swap(4, 8);
    // and Q4_1 beside Q4_1 packed (Q8_1 blocks, from chapter 6's quantizer either way)
    mixed.swap(2, 7);
    // from 20 tokens the prefill kernels, on the input quantized once per kind; 70 are two
    // bands on two and three threads, each with tokens beyond its last whole eight
    for seq in [1, 3, 6, 8, 20, 70] {
        let x = floats(seq * COLS, 300 + seq as u64);
        // Q, K and V of chapter 8's layers: matrices of different formats, one input
        for group in [
            &mats[0..3],
            &mats[3..6],
            &mats[1..5],
            &reordered[0..3],
            &mats[5..9],
            &mats[8..11],
            &mixed[1..3],
            &mixed[3..5],
            &mixed[8..10],
        ] {
            let want: Vec<Vec<f32>> = group.iter().map(|(_, m)| reference(m, &x, seq)).collect();
            for (isa, k, kk) in levels() {
                // three threads: a decode step's tasks cut across the matrices unevenly
                for threads in [1, 2, 3] {
                    let mut outs: Vec<Vec<f32>> = group
                        .iter()
                        .map(|(_, m)| vec![0.0; seq * m.rows()])
                        .collect();
                    let refs: Vec<&Matrix> = group.iter().map(|(_, m)| m).collect();
                    ch07_simd_parallel::pool::in_pool(threads, || {
                        let mut o: Vec<&mut [f32]> = outs.iter_mut().map(|o| &mut o[..]).collect();
                        matmul_group(k, kk, &refs, &mut o, &x, seq)
                    })
                    .expect("a pool");
                    for ((name, _), (got, want)) in group.iter().zip(outs.iter().zip(&want)) {
                        assert!(
                            got.iter()
                                .zip(want)
                                .all(|(g, w)| g.to_bits() == w.to_bits()),
                            "{name} in a group, {seq} tokens, {isa}, {threads} threads: not the \
                             scalar numbers"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn paired_products_finish_their_rows_with_the_same_numbers() {
    let mats = matrices();
    let named = |name: &str| &mats.iter().find(|(n, _)| n == name).expect(name).1;
    // SiLU(first) · second, as a layer's gate and up: elementwise, so any block of rows may
    // finish on its own
    let then = |f: &mut [f32], s: &[f32]| {
        ch01_tensors::ops::silu_inplace(f);
        ch01_tensors::ops::mul_inplace(f, s);
    };
    // the same kind of activations (paired in a decode step), and two kinds (never paired)
    let pairs = [
        ("q4_0", "q8_0"),
        ("q4_1", "q4_1"),
        ("q4_1 packed", "q4_1 packed"),
        ("Q5_0 packed", "Q5_0 packed"),
        ("q4_k", "q6_k"),
        ("q4_0", "q4_1"),
    ];
    for seq in [1, 3, 20] {
        let x = floats(seq * COLS, 500 + seq as u64);
        for (a, b) in pairs {
            let (ma, mb) = (named(a), named(b));
            let rows = ma.rows();
            let mut want = reference(ma, &x, seq);
            let second = reference(mb, &x, seq);
            for (f, s) in want.chunks_exact_mut(rows).zip(second.chunks_exact(rows)) {
                then(f, s);
            }
            for (isa, k, kk) in levels() {
                for threads in [1, 2] {
                    let (mut f, mut s) = (vec![0.0; seq * rows], vec![0.0; seq * rows]);
                    ch07_simd_parallel::pool::in_pool(threads, || {
                        matmul_pair_then(k, kk, [ma, mb], [&mut f, &mut s], &x, seq, &then)
                    })
                    .expect("a pool");
                    assert!(
                        f.iter().zip(&want).all(|(g, w)| g.to_bits() == w.to_bits()),
                        "{a} with {b}, {seq} tokens, {isa}, {threads} threads: the finished \
                         rows are not the scalar products' numbers through `then`"
                    );
                }
            }
        }
    }
}

/// A decode step's tasks are cut by bytes, none under a few tens of kilobytes, so the small
/// matrices above make one task alone. Every matrix three times over makes a group large
/// enough to be cut at every thread count, across matrices of every kind, unevenly: the
/// cut must not change a bit, with one thread or sixteen (oversubscribed on a small machine).
#[test]
fn a_large_decode_group_is_the_same_bits_at_any_thread_count() {
    let mats = matrices();
    let x = floats(COLS, 500);
    let group: Vec<&(String, Matrix)> = mats.iter().chain(&mats).chain(&mats).collect();
    let want: Vec<Vec<f32>> = group.iter().map(|(_, m)| reference(m, &x, 1)).collect();
    let refs: Vec<&Matrix> = group.iter().map(|(_, m)| m).collect();
    for (isa, k, kk) in levels() {
        for threads in [1, 2, 3, 16] {
            let mut outs: Vec<Vec<f32>> = refs.iter().map(|m| vec![0.0; m.rows()]).collect();
            ch07_simd_parallel::pool::in_pool(threads, || {
                let mut o: Vec<&mut [f32]> = outs.iter_mut().map(|o| &mut o[..]).collect();
                matmul_group(k, kk, &refs, &mut o, &x, 1)
            })
            .expect("a pool");
            for (i, ((name, _), (got, want))) in
                group.iter().zip(outs.iter().zip(&want)).enumerate()
            {
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(got),
                    bits(want),
                    "{name} (matrix {i} of a decode group of {}), {isa}, {threads} threads: \
                     not the scalar kernel's numbers",
                    refs.len()
                );
            }
        }
    }
}
