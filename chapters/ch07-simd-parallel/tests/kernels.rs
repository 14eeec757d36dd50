//! Every SIMD kernel against chapter 6's scalar kernel, on every level this CPU has: bit for
//! bit, on random rows and on edge cases (all zero, extremes of every quant, −128 weights,
//! scales at f16's limits).

use ch01_tensors::random::uniform;
use ch06_quantization::blocks::{BlockQ8_0, BlockQ8_1, QK};
use ch06_quantization::{Format, Kernels, QMatrix, Scalar, ScaleRule};
use ch07_simd_parallel::Isa;
use ch07_simd_parallel::kernels::for_isa;

/// The SIMD levels this CPU has (the scalar level is the reference).
fn simd_levels() -> Vec<(Isa, &'static dyn Kernels)> {
    let levels: Vec<_> = Isa::available()
        .into_iter()
        .filter(|&i| i != Isa::Scalar)
        .filter_map(|i| for_isa(i).map(|k| (i, k as &dyn Kernels)))
        .collect();
    if levels.is_empty() {
        eprintln!(
            "no SIMD level runs here (the CPU has none, or LLM_BOOK_ISA=scalar caps it): \
             only the scalar kernels run, and there is nothing to compare them with"
        );
    } else {
        eprintln!(
            "SIMD levels tested on this CPU: {:?}",
            levels.iter().map(|(i, _)| i.name()).collect::<Vec<_>>()
        );
    }
    levels
}

/// Rows of activations: random at several scales, plus edge cases.
fn activation_rows(cols: usize) -> Vec<Vec<f32>> {
    let mut rows: Vec<Vec<f32>> = (0..6)
        .map(|s| {
            uniform(cols, 100 + s)
                .iter()
                .map(|x| x * 10f32.powi(s as i32 - 3))
                .collect()
        })
        .collect();
    // scales whose f16 is subnormal, flushed to zero, or infinite (the SIMD levels convert
    // with F16C, the scalar one in plain Rust)
    for scale in [1e-4, 1e-6, 1e-9, 1e7] {
        rows.push(uniform(cols, 7).iter().map(|x| x * scale).collect());
    }
    rows.push(vec![0.0; cols]);
    rows.push(
        (0..cols)
            .map(|j| if j % 32 == 5 { 1000.0 } else { 1e-3 })
            .collect(),
    ); // one outlier a block
    rows.push((0..cols).map(|j| (j % 7) as f32 - 3.0).collect()); // exact halves after scaling
    rows.push(
        (0..cols)
            .map(|j| if j % 2 == 0 { -0.5 } else { 0.5 })
            .collect(),
    );
    rows
}

#[test]
fn activation_quantizers_equal_the_scalar_ones_bit_for_bit() {
    for (isa, k) in simd_levels() {
        for (i, x) in activation_rows(8 * QK).iter().enumerate() {
            let (mut a, mut b) = (Vec::<BlockQ8_0>::new(), Vec::<BlockQ8_0>::new());
            Scalar.quantize_q8_0(x, &mut a);
            k.quantize_q8_0(x, &mut b);
            assert!(
                a == b,
                "{isa}: Q8_0 quantization of activation row {i} differs from the scalar one"
            );
            let (mut a, mut b) = (Vec::<BlockQ8_1>::new(), Vec::<BlockQ8_1>::new());
            Scalar.quantize_q8_1(x, &mut a);
            k.quantize_q8_1(x, &mut b);
            assert!(
                a == b,
                "{isa}: Q8_1 quantization of activation row {i} differs from the scalar one"
            );
        }
        // halves exactly: x · (1/d) lands on k + 0.5, where roundf and round-to-even disagree
        let mut x = vec![0.0f32; QK];
        x[0] = 127.0;
        x[1] = 2.5;
        x[2] = -3.5;
        x[3] = 0.5;
        let (mut a, mut b) = (Vec::new(), Vec::new());
        Scalar.quantize_q8_0(&x, &mut a);
        k.quantize_q8_0(&x, &mut b);
        assert_eq!(
            (b[0].qs[1], b[0].qs[2], b[0].qs[3]),
            (3, -4, 1),
            "{isa}: halves must round away from zero"
        );
        assert!(a == b, "{isa}: halves");
    }
}

#[test]
fn dot_kernels_equal_the_scalar_ones_bit_for_bit() {
    // 27 rows: 24 through the four-row kernels, the last 3 through the one-row ones
    let (rows, cols) = (27, 8 * QK);
    let mut weights: Vec<Vec<f32>> = (0..4)
        .map(|s| {
            uniform(rows * cols, s)
                .iter()
                .map(|x| x * 10f32.powi(s as i32 - 2))
                .collect()
        })
        .collect();
    weights.push(
        (0..rows * cols)
            .map(|j| if j % 3 == 0 { -1.0 } else { 1.0 })
            .collect(),
    ); // the extremes of every quantization step
    weights.push(vec![0.0; rows * cols]);
    weights.push((0..rows * cols).map(|j| (j % 32) as f32 * 1e-7).collect()); // f16-subnormal scales
    for (isa, k) in simd_levels() {
        for format in [Format::Int8, Format::Q8_0, Format::Q4_0, Format::Q4_1] {
            for (wi, w) in weights.iter().enumerate() {
                let m = QMatrix::quantize(w, rows, cols, format, ScaleRule::Absmax).unwrap();
                for (xi, x) in activation_rows(cols).iter().enumerate() {
                    let (mut ours, mut theirs) = (vec![0.0f32; rows], vec![0.0f32; rows]);
                    m.matmul_with(&Scalar, &mut theirs, x, 1);
                    m.matmul_with(k, &mut ours, x, 1);
                    for r in 0..rows {
                        assert!(
                            ours[r].to_bits() == theirs[r].to_bits(),
                            "{isa} {}: weights {wi}, activations {xi}, row {r}: {} vs scalar {}",
                            format.name(),
                            ours[r],
                            theirs[r]
                        );
                    }
                }
            }
        }
    }
}

/// A batch of tokens (a prefill) goes through the four-token kernels; every output must
/// still be the scalar one, and a token's outputs the same as when it is alone.
#[test]
fn batched_products_equal_the_scalar_ones_bit_for_bit() {
    let (rows, cols, seq) = (40, 6 * QK, 11);
    let w = uniform(rows * cols, 21);
    let x = uniform(seq * cols, 22);
    for (isa, k) in simd_levels() {
        for format in [Format::Int8, Format::Q8_0, Format::Q4_0, Format::Q4_1] {
            let m = QMatrix::quantize(&w, rows, cols, format, ScaleRule::Absmax).unwrap();
            let (mut ours, mut theirs) = (vec![0.0f32; seq * rows], vec![0.0f32; seq * rows]);
            m.matmul_with(&Scalar, &mut theirs, &x, seq);
            m.matmul_with(k, &mut ours, &x, seq);
            for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
                assert!(
                    a.to_bits() == b.to_bits(),
                    "{isa} {}: token {}, row {}: {a} vs scalar {b}",
                    format.name(),
                    i / rows,
                    i % rows
                );
            }
            let mut alone = vec![0.0f32; rows];
            m.matmul_with(k, &mut alone, &x[5 * cols..6 * cols], 1);
            assert!(
                alone == ours[5 * rows..6 * rows],
                "{isa} {}: token 5 alone differs from token 5 in the batch",
                format.name()
            );
        }
    }
}

/// A Q8_0 weight of −128 cannot come from the quantizer (it stops at ±127), but a file can
/// hold one: `|−128|` must still be read as 128, not −128.
#[test]
fn q8_0_weights_of_minus_128_are_handled() {
    let mut row = vec![0u8; BlockQ8_0::BYTES];
    row[..2].copy_from_slice(&0x3c00u16.to_le_bytes()); // d = 1
    for b in &mut row[2..] {
        *b = 0x80; // −128
    }
    let a = vec![BlockQ8_0 {
        d: 0x3c00,
        qs: [127; QK],
    }];
    let expected = Scalar.dot_q8_0_q8_0(&row, &a);
    assert_eq!(expected, -128.0 * 127.0 * 32.0);
    for (isa, k) in simd_levels() {
        assert_eq!(
            k.dot_q8_0_q8_0(&row, &a),
            expected,
            "{isa}: weights of −128"
        );
    }
}

#[test]
fn f32_dots_and_axpy_equal_the_scalar_ones_bit_for_bit() {
    for (isa, k) in simd_levels() {
        for n in [1, 7, 8, 9, 64, 100, 576] {
            let (a, b) = (uniform(n, n as u64), uniform(n, 1000 + n as u64));
            let (x, y) = (Scalar.dot_f32(&a, &b), k.dot_f32(&a, &b));
            assert!(
                x.to_bits() == y.to_bits(),
                "{isa}: dot of {n} floats: {y} vs scalar {x}"
            );
            let (mut p, mut q) = (b.clone(), b.clone());
            Scalar.axpy(&mut p, 0.37, &a);
            k.axpy(&mut q, 0.37, &a);
            assert!(
                p == q,
                "{isa}: axpy of {n} floats differs from the scalar one"
            );
        }
    }
}

#[test]
fn forcing_a_level_the_cpu_lacks_is_an_error() {
    assert!(Isa::parse("avx9000").is_none());
    assert!(for_isa(Isa::Scalar).is_some());
    for isa in Isa::ALL {
        assert_eq!(for_isa(isa).is_some(), isa.supported(), "{isa}");
    }
}

#[test]
fn attention_row_kernels_equal_one_call_per_row() {
    // head sizes: SmolLM2's 64 (held in registers), Gemma-3's 256, and 20 (a tail of four)
    for d in [64usize, 256, 20] {
        let n = 37;
        let q = uniform(d, 1);
        let rows = uniform(n * d, 2);
        let w: Vec<f32> = uniform(n, 3).iter().map(|v| v.abs() * 0.1).collect();
        let y0 = uniform(d, 4);
        for (isa, k) in simd_levels()
            .into_iter()
            .chain([(Isa::Scalar, &Scalar as &dyn Kernels)])
        {
            let mut scores = vec![0.0f32; n];
            k.dot_f32_rows(&q, &rows, &mut scores);
            let mut y = y0.clone();
            k.axpy_rows(&mut y, &w, &rows);
            let mut want_y = y0.clone();
            for (j, row) in rows.chunks_exact(d).enumerate() {
                assert_eq!(
                    scores[j].to_bits(),
                    Scalar.dot_f32(&q, row).to_bits(),
                    "{isa:?} d={d}: score {j} differs from one dot_f32"
                );
                Scalar.axpy(&mut want_y, w[j], row);
            }
            let same = y
                .iter()
                .zip(&want_y)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(
                same,
                "{isa:?} d={d}: axpy_rows differs from one axpy per row"
            );
        }
    }
}

#[test]
fn grouped_row_dots_equal_one_dot_per_query_and_row() {
    // SmolLM2's 64 floats with three heads a KV head, Gemma-3's 256; 20 (not whole steps of
    // eight: the fallback); one to five queries (the side-by-side sums, and the fallback);
    // keys in sixteens, with pairs and an odd one left over, or none
    for d in [64usize, 256, 20] {
        for (heads, n) in (1..=5).flat_map(|h| [(h, 37), (h, 48), (h, 7)]) {
            let qs = uniform(heads * d, 20 + heads as u64);
            let rows = uniform(n * d, 2);
            for (isa, k) in simd_levels()
                .into_iter()
                .chain([(Isa::Scalar, &Scalar as &dyn Kernels)])
            {
                let mut out = vec![0.0f32; heads * n];
                k.dot_f32_rows_many(&qs, d, &rows, &mut out);
                for (h, q) in qs.chunks_exact(d).enumerate() {
                    for (j, row) in rows.chunks_exact(d).enumerate() {
                        assert_eq!(
                            out[h * n + j].to_bits(),
                            Scalar.dot_f32(q, row).to_bits(),
                            "{isa:?} d={d}, {heads} heads: head {h}'s score for row {j} differs from one dot_f32"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn grouped_row_sums_equal_one_axpy_per_output_and_row() {
    // SmolLM2's 64 floats (one to four heads in registers), 128 (one or two), Gemma-3's 256
    // and 20 (the fallback); five heads (past what the registers hold)
    for d in [64usize, 128, 256, 20] {
        for heads in 1..=5 {
            let n = 37;
            let rows = uniform(n * d, 2);
            let w: Vec<f32> = uniform(heads * n, 3)
                .iter()
                .map(|v| v.abs() * 0.1)
                .collect();
            let y0 = uniform(heads * d, 4);
            let mut want = y0.clone();
            for (y, w) in want.chunks_exact_mut(d).zip(w.chunks_exact(n)) {
                for (&w, row) in w.iter().zip(rows.chunks_exact(d)) {
                    Scalar.axpy(y, w, row);
                }
            }
            for (isa, k) in simd_levels()
                .into_iter()
                .chain([(Isa::Scalar, &Scalar as &dyn Kernels)])
            {
                let mut y = y0.clone();
                k.axpy_rows_many(&mut y, d, &w, &rows);
                for (i, (a, b)) in y.iter().zip(&want).enumerate() {
                    assert_eq!(
                        a.to_bits(),
                        b.to_bits(),
                        "{isa:?} d={d}, {heads} heads: output {} element {} differs from one axpy per row",
                        i / d,
                        i % d
                    );
                }
            }
        }
    }
}

#[test]
fn attention_group_kernels_equal_one_call_per_head() {
    // Gemma-3's 256 floats and four heads a KV head; SmolLM2's 64; 48 (sixteens, not the
    // 512-bit sums' thirty-twos); 20 (a tail of four); one to five heads (the four-at-a-time
    // path, its remainder, and the fallback); one key, two, and 37 (pairs and an odd one;
    // tiles of sixteen and a part)
    for (d, n) in [256usize, 64, 48, 20]
        .into_iter()
        .flat_map(|d| [1, 2, 37].map(|n| (d, n)))
    {
        for heads in 1..=5 {
            let qs: Vec<Vec<f32>> = (0..heads).map(|h| uniform(d, 10 + h as u64)).collect();
            let qs: Vec<&[f32]> = qs.iter().map(|q| &q[..]).collect();
            let rows = uniform(n * d, 2);
            let rows: Vec<&[f32]> = rows.chunks_exact(d).collect();
            let w: Vec<f32> = uniform(heads * n, 3)
                .iter()
                .map(|v| v.abs() * 0.1)
                .collect();
            let y0 = uniform(heads * d, 4);
            for (isa, k) in simd_levels()
                .into_iter()
                .chain([(Isa::Scalar, &Scalar as &dyn Kernels)])
            {
                let mut dots = vec![0.0f32; heads * n];
                k.dot_f32_many(&qs, &rows, &mut dots);
                for (h, q) in qs.iter().enumerate() {
                    for (j, row) in rows.iter().enumerate() {
                        assert_eq!(
                            dots[h * n + j].to_bits(),
                            Scalar.dot_f32(q, row).to_bits(),
                            "{isa:?} d={d}, {heads} heads: head {h}'s dot with row {j} differs \
                             from one dot_f32"
                        );
                    }
                }
                let mut y = y0.clone();
                k.axpy_many(&mut y, &w, &rows);
                let mut want = y0.clone();
                for (j, row) in rows.iter().enumerate() {
                    for (h, y) in want.chunks_exact_mut(d).enumerate() {
                        Scalar.axpy(y, w[h * n + j], row);
                    }
                }
                assert!(
                    y.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{isa:?} d={d}, {heads} heads: axpy_many differs from one axpy per row and head"
                );
            }
        }
    }
}

/// An f16 cache's halves read back as f32 (chapter 10's `--kv f16`): all 65 536 of them, in
/// slices whose lengths leave every tail (0 to 7 after the last eight), as chapter 6's
/// decoder gives them. A NaN may come out quiet, so NaN in need only be NaN out.
#[test]
fn f16_halves_convert_as_the_scalar_decoder_does() {
    let all: Vec<u16> = (0..=u16::MAX).collect();
    let mut want = vec![0.0f32; all.len()];
    Scalar.f16_to_f32s(&all, &mut want);
    for (isa, k) in simd_levels() {
        for len in [1, 7, 8, 9, 15, 64, 1000, all.len()] {
            for start in [0, 3.min(all.len() - len), all.len() - len] {
                let src = &all[start..start + len];
                let mut got = vec![0.0f32; len];
                k.f16_to_f32s(src, &mut got);
                for (i, (g, w)) in got.iter().zip(&want[start..start + len]).enumerate() {
                    assert!(
                        g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                        "{isa:?}: f16 {:#06x} (at {i} of a slice of {len}) became {g:e}, \
                         chapter 6's decoder says {w:e}",
                        src[i]
                    );
                }
            }
        }
    }
}

/// Each of the four tokens' activations, quantized by `quantize` (Q8_0 or Q8_1).
fn quantized<B>(tokens: [&Vec<f32>; 4], quantize: impl Fn(&[f32], &mut Vec<B>)) -> [Vec<B>; 4] {
    tokens.map(|t| {
        let mut a = Vec::new();
        quantize(t, &mut a);
        a
    })
}

/// The four-dot kernels' general case, four different rows against four different tokens:
/// the engine sends only one row with four tokens (a prefill) or four rows with one token
/// (a decode step), so nothing else reaches the code for the mixed case.
#[test]
fn four_dots_of_four_rows_and_four_tokens_equal_the_scalar_ones() {
    let cols = 8 * QK;
    let w = uniform(4 * cols, 11);
    let x = activation_rows(cols);
    let tokens = [&x[0], &x[3], &x[7], &x[8]]; // random, random, an outlier a block, halves
    for (isa, k) in simd_levels() {
        for format in [Format::Q8_0, Format::Q4_0, Format::Q4_1] {
            let m = QMatrix::quantize(&w, 4, cols, format, ScaleRule::Absmax).unwrap();
            let rows: [&[u8]; 4] = std::array::from_fn(|r| m.row_bytes(r));
            let (ours, theirs): ([f32; 4], [f32; 4]) = if format == Format::Q4_1 {
                let a = quantized(tokens, |t, a| Scalar.quantize_q8_1(t, a));
                let a: [&[BlockQ8_1]; 4] = std::array::from_fn(|i| &a[i][..]);
                (
                    k.dot4_q4_1_q8_1(rows, a),
                    std::array::from_fn(|i| Scalar.dot_q4_1_q8_1(rows[i], a[i])),
                )
            } else {
                let a = quantized(tokens, |t, a| Scalar.quantize_q8_0(t, a));
                let a: [&[BlockQ8_0]; 4] = std::array::from_fn(|i| &a[i][..]);
                if format == Format::Q8_0 {
                    (
                        k.dot4_q8_0_q8_0(rows, a),
                        std::array::from_fn(|i| Scalar.dot_q8_0_q8_0(rows[i], a[i])),
                    )
                } else {
                    (
                        k.dot4_q4_0_q8_0(rows, a),
                        std::array::from_fn(|i| Scalar.dot_q4_0_q8_0(rows[i], a[i])),
                    )
                }
            };
            for i in 0..4 {
                assert!(
                    ours[i].to_bits() == theirs[i].to_bits(),
                    "{isa} {}: row {i} against token {i} of four different pairs: {} vs scalar {}",
                    format.name(),
                    ours[i],
                    theirs[i]
                );
            }
        }
    }
}

/// The SIMD `exp` against the C library's `expf` (`f32::exp`) on every one of the 2^32
/// floats: the same bits, or a NaN for a NaN. (x86 only: the ARM levels use `f32::exp`
/// itself, and under an emulator 2^32 calls would take an hour.)
#[cfg(target_arch = "x86_64")]
#[test]
fn exp_equals_the_libraries_expf_on_every_float() {
    use rayon::prelude::*;
    for (isa, k) in simd_levels() {
        let wrong = (0..1u64 << 16)
            .into_par_iter()
            .map_init(
                || vec![0.0f32; 1 << 16],
                |x, hi| {
                    for (lo, v) in x.iter_mut().enumerate() {
                        *v = f32::from_bits((hi << 16) as u32 | lo as u32);
                    }
                    k.exp_inplace(x);
                    (0..1u32 << 16)
                        .map(|lo| f32::from_bits((hi << 16) as u32 | lo))
                        .zip(x.iter())
                        .filter(|(a, e)| {
                            let want = a.exp();
                            want.to_bits() != e.to_bits() && !(want.is_nan() && e.is_nan())
                        })
                        .map(|(a, e)| (a, *e))
                        .min_by(|p, q| p.0.total_cmp(&q.0))
                },
            )
            .flatten()
            .collect::<Vec<_>>();
        if let Some(&(x, got)) = wrong.iter().min_by(|p, q| p.0.total_cmp(&q.0)) {
            panic!(
                "{isa}: exp({x:e}) (bits {:#010x}) = {got:e}, the C library says {:e}; \
                 {} blocks of 65 536 floats have a difference",
                x.to_bits(),
                x.exp(),
                wrong.len()
            );
        }
    }
}

/// Softmax and SiLU through the kernels' `exp` give chapter 1's bits, masked rows included.
#[test]
fn softmax_and_silu_equal_chapter_1s_bit_for_bit() {
    type Pair = (&'static str, fn(&mut [f32]), fn(&dyn Kernels, &mut [f32]));
    let pairs: [Pair; 2] = [
        ("softmax", ch01_tensors::ops::softmax_inplace, |k, x| {
            k.softmax(x)
        }),
        ("SiLU", ch01_tensors::ops::silu_inplace, |k, x| k.silu(x)),
    ];
    for (isa, k) in std::iter::once((Isa::Scalar, &Scalar as &dyn Kernels)).chain(simd_levels()) {
        for n in [1, 7, 8, 9, 64, 100, 577] {
            for scale in [0.01, 1.0, 30.0, 200.0] {
                let mut x: Vec<f32> = uniform(n, n as u64 + 7).iter().map(|v| v * scale).collect();
                if n > 8 {
                    x[3] = f32::NEG_INFINITY; // a masked key
                }
                for (name, chapter_1, kernel) in pairs {
                    let (mut want, mut got) = (x.clone(), x.clone());
                    chapter_1(&mut want);
                    kernel(k, &mut got);
                    assert!(
                        want.iter()
                            .zip(&got)
                            .all(|(a, b)| a.to_bits() == b.to_bits()),
                        "{isa}: {name} of {n} values at scale {scale} differs from chapter 1's"
                    );
                }
            }
        }
    }
}

/// Each level's softmax of several rows at once gives every row chapter 1's bits: one to
/// nine rows (the sums four at a time and a rest), masked keys, a row of zeros of both signs
/// at the top, a row with a NaN, a row all −∞ (NaN out, as chapter 1's).
#[test]
fn softmax_of_rows_equals_chapter_1s_row_by_row() {
    for (isa, k) in std::iter::once((Isa::Scalar, &Scalar as &dyn Kernels)).chain(simd_levels()) {
        for n in [1, 7, 16, 17, 64, 100, 577] {
            for rows in 1..=9 {
                let scale = [0.01, 1.0, 30.0, 200.0][rows % 4];
                let mut x: Vec<f32> = uniform(rows * n, (rows * n) as u64 + 9)
                    .iter()
                    .map(|v| v * scale)
                    .collect();
                x.iter_mut()
                    .step_by(13)
                    .for_each(|v| *v = f32::NEG_INFINITY);
                if rows >= 4 {
                    let zeros = &mut x[n..2 * n];
                    zeros.iter_mut().for_each(|v| *v = -v.abs());
                    zeros[n / 2] = -0.0;
                    zeros[n - 1] = 0.0;
                    x[2 * n + n / 3] = f32::NAN;
                    x[3 * n..4 * n].fill(f32::NEG_INFINITY);
                }
                let mut want = x.clone();
                want.chunks_exact_mut(n)
                    .for_each(ch01_tensors::ops::softmax_inplace);
                k.softmax_rows(&mut x, n);
                for (i, (g, w)) in x.iter().zip(&want).enumerate() {
                    assert!(
                        g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                        "{isa}: {rows} rows of {n}, row {} value {}: {g}, chapter 1's {w}",
                        i / n,
                        i % n
                    );
                }
            }
        }
    }
}
