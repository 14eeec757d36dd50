//! The K-quant kernels: every SIMD level this CPU has gives the scalar kernel's bits, on
//! random blocks and on Gemma-3's real rows; and the whole model gives the same logits on
//! every level and thread count.

use ch01_tensors::models;
use ch06_quantization::Scalar;
use ch06_quantization::blocks::BlockQ8_0;
use ch06_quantization::f16::f32_to_f16;
use ch06_quantization::matrix::Q32;
use ch07_simd_parallel::Isa;
use ch07_simd_parallel::kernels::{ManyTokens, OneToken, for_isa};
use ch07_simd_parallel::layout::eights::{Eights, Rows32};
use ch07_simd_parallel::layout::eights_k::{EightsK, RowsK};
use ch07_simd_parallel::layout::kquant::*;
use ch07_simd_parallel::layout::quads::{ActQuads, KQuads};
use proptest::prelude::*;

fn levels() -> Vec<(Isa, &'static dyn ManyTokens)> {
    Isa::available()
        .into_iter()
        .map(|isa| (isa, for_isa(isa).expect("a level this CPU has")))
        .collect()
}

/// The interleaved prefill kernels exist on the AVX-512 level: where this process runs it,
/// one of them must have been checked; where it does not (an AVX2-only CPU, or a level
/// capped by `LLM_BOOK_ISA`), say what was checked instead of passing quietly.
fn expect_interleaved(ran: usize, format: &str) {
    if Isa::Avx512.supported() {
        assert!(
            ran > 0,
            "the AVX-512 level should have run the interleaved {format} kernel"
        );
    } else {
        eprintln!(
            "{format}: no level here has an interleaved kernel (AVX-512 VNNI is not on this CPU \
             or LLM_BOOK_ISA caps it); {ran} kernel(s) checked, the four-token path is checked \
             by the other tests"
        );
    }
}

/// Random bytes with every f16 scale set to a finite value (random scale bytes can be NaN).
fn block(bytes: &[u8], len: usize, halves: &[usize], seed: usize) -> Vec<u8> {
    let mut b = bytes[..len].to_vec();
    for (i, &at) in halves.iter().enumerate() {
        let v = ((seed.wrapping_mul(2654435761).wrapping_add(i) % 1000) as f32 + 1.0) * 1e-5;
        b[at..at + 2].copy_from_slice(&f32_to_f16(v).to_le_bytes());
    }
    b
}

fn acts(values: &[i8], d: f32) -> Vec<BlockQ8K> {
    values
        .chunks_exact(QK_K)
        .map(|c| {
            let qs: [i8; QK_K] = c.try_into().unwrap();
            let mut bsums = [0i16; 16];
            for (s, g) in bsums.iter_mut().zip(qs.chunks_exact(16)) {
                *s = g.iter().map(|&q| i16::from(q)).sum();
            }
            BlockQ8K { d, qs, bsums }
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn simd_equals_scalar_bit_for_bit(
        raw in proptest::collection::vec(any::<u8>(), 2 * Q6_K_BYTES),
        q8 in proptest::collection::vec(any::<i8>(), 2 * QK_K),
        seed in 0usize..1_000_000,
    ) {
        // Two super-blocks of each K format; eight Q5_0 blocks.
        let q4k: Vec<u8> = [block(&raw, Q4_K_BYTES, &[0, 2], seed), block(&raw[Q4_K_BYTES..], Q4_K_BYTES, &[0, 2], seed + 1)].concat();
        let q6k: Vec<u8> = [block(&raw, Q6_K_BYTES, &[208], seed), block(&raw[Q6_K_BYTES..], Q6_K_BYTES, &[208], seed + 1)].concat();
        let q50: Vec<u8> = (0..8).flat_map(|i| block(&raw[i * Q5_0_BYTES..], Q5_0_BYTES, &[0], seed + i)).collect();
        let a = acts(&q8, 0.013);
        // -128 is a legal Q8_0 quant but never a Q8_K one (their rule clamps to ±127).
        let a8: Vec<Q8_0Wide> = q8[..256]
            .chunks_exact(32)
            .enumerate()
            .map(|(i, c)| Q8_0Wide::from(&BlockQ8_0 { d: f32_to_f16(0.01 + i as f32 * 1e-3), qs: c.try_into().unwrap() }))
            .collect();
        for (isa, k) in levels() {
            prop_assert_eq!(k.dot_q4_k(&q4k, &a).to_bits(), Scalar.dot_q4_k(&q4k, &a).to_bits(), "Q4_K on {:?}", isa);
            prop_assert_eq!(k.dot_q6_k(&q6k, &a).to_bits(), Scalar.dot_q6_k(&q6k, &a).to_bits(), "Q6_K on {:?}", isa);
            prop_assert_eq!(k.dot_q5_0(&q50, &a8).to_bits(), Scalar.dot_q5_0(&q50, &a8).to_bits(), "Q5_0 on {:?}", isa);
        }
    }
}

#[test]
fn extreme_quants_are_exact_too() {
    // Every quant at its largest, every activation at ±127: the integer sums at their widest.
    let q4k = block(&[0xff; Q4_K_BYTES], Q4_K_BYTES, &[0, 2], 1);
    let q6k = block(&[0xff; Q6_K_BYTES], Q6_K_BYTES, &[208], 2);
    for v in [127i8, -127] {
        let a = acts(&[v; QK_K], 0.5);
        for (isa, k) in levels() {
            assert_eq!(
                k.dot_q4_k(&q4k, &a).to_bits(),
                Scalar.dot_q4_k(&q4k, &a).to_bits(),
                "Q4_K {isa:?}"
            );
            assert_eq!(
                k.dot_q6_k(&q6k, &a).to_bits(),
                Scalar.dot_q6_k(&q6k, &a).to_bits(),
                "Q6_K {isa:?}"
            );
        }
    }
}

#[test]
fn gemma_logits_are_the_same_on_every_level_and_thread_count() {
    let path = models::require(&models::gemma3_gguf()).unwrap_or_else(|e| panic!("{e}"));
    let f = ch08_gguf::GgufFile::open(&path).unwrap();
    let model = ch08_gguf::arch::load_model(&f).unwrap();
    let ids = [2u32, 818, 5279, 529, 7001, 563, 236761, 107, 4923];
    let mut reference: Option<Vec<f32>> = None;
    for isa in Isa::available() {
        let k = ch07_simd_parallel::kernels::for_isa(isa).expect("a level this CPU has");
        let e =
            ch08_gguf::engine::Engine::new(&model, k, for_isa(isa).expect("a level this CPU has"));
        for threads in [1, 2] {
            let got = ch07_simd_parallel::pool::in_pool(threads, || e.window_logits(&ids).unwrap())
                .unwrap();
            match &reference {
                None => reference = Some(got),
                Some(r) => assert!(
                    r.iter().zip(&got).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "Gemma-3 logits on {isa:?} with {threads} threads differ from the first level's"
                ),
            }
        }
    }
}

#[test]
fn four_token_kernels_equal_one_token_kernels() {
    let raw: Vec<u8> = (0..4 * Q6_K_BYTES).map(|i| (i * 37 % 251) as u8).collect();
    let q4k = [
        block(&raw, Q4_K_BYTES, &[0, 2], 3),
        block(&raw[300..], Q4_K_BYTES, &[0, 2], 4),
    ]
    .concat();
    let q6k = [
        block(&raw, Q6_K_BYTES, &[208], 5),
        block(&raw[400..], Q6_K_BYTES, &[208], 6),
    ]
    .concat();
    // seven Q5_0 blocks: four at a time, then a tail of three
    let q50: Vec<u8> = (0..7)
        .flat_map(|i| block(&raw[i * 30..], Q5_0_BYTES, &[0], 7 + i))
        .collect();
    let tokens: Vec<Vec<i8>> = (0..4)
        .map(|t| {
            (0..2 * QK_K)
                .map(|i| ((i * 13 + t * 71) % 255) as i8)
                .collect()
        })
        .collect();
    let a: Vec<Vec<BlockQ8K>> = tokens.iter().map(|q| acts(q, 0.02)).collect();
    // every (token, block) its own scale, so that a scale read from the wrong lane shows
    let a8: Vec<Vec<Q8_0Wide>> = tokens
        .iter()
        .enumerate()
        .map(|(t, q)| {
            q[..224]
                .chunks_exact(32)
                .enumerate()
                .map(|(i, c)| {
                    Q8_0Wide::new(0.01 + 0.001 * (8 * t + i) as f32, c.try_into().unwrap())
                })
                .collect()
        })
        .collect();
    for (isa, k) in levels() {
        let four = k.tokens4_q4_k(&q4k, std::array::from_fn(|t| &a[t][..]));
        let four6 = k.tokens4_q6_k(&q6k, std::array::from_fn(|t| &a[t][..]));
        let four5 = k.tokens4_q5_0(&q50, std::array::from_fn(|t| &a8[t][..]));
        // the same through the interleaved activations (one group of four blocks, a tail of three)
        let quads = ActQuads::new(std::array::from_fn(|t| &a8[t][..]));
        let four5q = k.tokens4_q5_0_quads(&q50, &quads, std::array::from_fn(|t| &a8[t][..]));
        for t in 0..4 {
            assert_eq!(
                four[t].to_bits(),
                Scalar.dot_q4_k(&q4k, &a[t]).to_bits(),
                "Q4_K token {t} {isa:?}"
            );
            assert_eq!(
                four6[t].to_bits(),
                Scalar.dot_q6_k(&q6k, &a[t]).to_bits(),
                "Q6_K token {t} {isa:?}"
            );
            assert_eq!(
                four5[t].to_bits(),
                Scalar.dot_q5_0(&q50, &a8[t]).to_bits(),
                "Q5_0 token {t} {isa:?}"
            );
            assert_eq!(
                four5q[t].to_bits(),
                Scalar.dot_q5_0(&q50, &a8[t]).to_bits(),
                "Q5_0 (interleaved) token {t} {isa:?}"
            );
        }
    }
}

#[test]
fn four_row_kernels_equal_one_row_kernels() {
    let raw: Vec<u8> = (0..16 * Q6_K_BYTES).map(|i| (i * 53 % 249) as u8).collect();
    let rows = |len: usize, halves: &[usize], n: usize| -> Vec<Vec<u8>> {
        (0..4)
            .map(|r| {
                (0..n)
                    .flat_map(|b| block(&raw[(r * n + b) * 37..], len, halves, r * 10 + b))
                    .collect()
            })
            .collect()
    };
    let (q4k, q6k, q50) = (
        rows(Q4_K_BYTES, &[0, 2], 2),
        rows(Q6_K_BYTES, &[208], 2),
        rows(Q5_0_BYTES, &[0], 7), // seven blocks: four at a time, then a tail of three
    );
    let q: Vec<i8> = (0..2 * QK_K).map(|i| ((i * 29) % 255) as i8).collect();
    let a = acts(&q, 0.03);
    let a8: Vec<Q8_0Wide> = q[..224]
        .chunks_exact(32)
        .map(|c| Q8_0Wide::new(0.02, c.try_into().unwrap()))
        .collect();
    for (isa, k) in levels() {
        let r4 = k.rows4_q4_k(std::array::from_fn(|r| &q4k[r][..]), &a);
        let r6 = k.rows4_q6_k(std::array::from_fn(|r| &q6k[r][..]), &a);
        let r5 = k.rows4_q5_0(std::array::from_fn(|r| &q50[r][..]), &a8);
        for r in 0..4 {
            assert_eq!(
                r4[r].to_bits(),
                Scalar.dot_q4_k(&q4k[r], &a).to_bits(),
                "Q4_K row {r} {isa:?}"
            );
            assert_eq!(
                r6[r].to_bits(),
                Scalar.dot_q6_k(&q6k[r], &a).to_bits(),
                "Q6_K row {r} {isa:?}"
            );
            assert_eq!(
                r5[r].to_bits(),
                Scalar.dot_q5_0(&q50[r], &a8).to_bits(),
                "Q5_0 row {r} {isa:?}"
            );
        }
    }
}

#[test]
fn interleaved_q4_1_kernel_equals_chapter_6s_dot() {
    use ch06_quantization::Kernels;
    // Seven Q4_1 blocks (one group of four, a tail of three), each with its own d and m.
    let raw: Vec<u8> = (0..7 * 20).map(|i| (i * 89 % 251) as u8).collect();
    let row: Vec<u8> = (0..7)
        .flat_map(|b| block(&raw[b * 20..], 20, &[0, 2], 3 * b + 1))
        .collect();
    let tokens: Vec<Vec<ch06_quantization::blocks::BlockQ8_1>> = (0..4)
        .map(|t| {
            (0..7)
                .map(|b| {
                    let x: [f32; 32] = std::array::from_fn(|i| {
                        ((i * 7 + b * 13 + t * 29) % 61) as f32 / 9.0 - 3.0
                    });
                    ch06_quantization::quantize::quantize_q8_1(&x)
                })
                .collect()
        })
        .collect();
    let a: [&[ch06_quantization::blocks::BlockQ8_1]; 4] = std::array::from_fn(|t| &tokens[t][..]);
    let quads = ActQuads::from_q8_1(a);
    let mut ran = 0;
    for (isa, k) in levels() {
        if let Some(got) = k.tokens4_q4_1_quads(&row, &quads, a) {
            ran += 1;
            for t in 0..4 {
                assert_eq!(
                    got[t].to_bits(),
                    ch06_quantization::Scalar
                        .dot_q4_1_q8_1(&row, a[t])
                        .to_bits(),
                    "Q4_1 (interleaved) token {t} {isa:?}: not chapter 6's number"
                );
            }
        }
    }
    expect_interleaved(ran, "Q4_1");
}

#[test]
fn interleaved_q4_k_kernel_equals_the_scalar_dot() {
    // Six Q4_K super-blocks (one group of four, a tail of two), each with its own d and dmin,
    // against four tokens whose every block has its own scale.
    let raw: Vec<u8> = (0..6 * Q4_K_BYTES).map(|i| (i * 131 % 253) as u8).collect();
    let row: Vec<u8> = (0..6)
        .flat_map(|b| block(&raw[b * Q4_K_BYTES..], Q4_K_BYTES, &[0, 2], 5 * b + 2))
        .collect();
    let tokens: Vec<Vec<BlockQ8K>> = (0..4)
        .map(|t| {
            (0..6)
                .map(|b| {
                    let x: [f32; QK_K] = std::array::from_fn(|i| {
                        ((i * 11 + b * 17 + t * 23) % 97) as f32 / 13.0 - 3.5
                    });
                    quantize_q8_k(&x)
                })
                .collect()
        })
        .collect();
    let a: [&[BlockQ8K]; 4] = std::array::from_fn(|t| &tokens[t][..]);
    let quads = KQuads::new(a);
    let mut ran = 0;
    for (isa, k) in levels() {
        if let Some(got) = k.tokens4_q4_k_quads(&row, &quads, a) {
            ran += 1;
            for t in 0..4 {
                assert_eq!(
                    got[t].to_bits(),
                    Scalar.dot_q4_k(&row, a[t]).to_bits(),
                    "Q4_K (interleaved) token {t} {isa:?}: not the scalar kernel's number"
                );
            }
        }
    }
    expect_interleaved(ran, "Q4_K");
}

/// `row`'s blocks rotated left by 0, 1, 2 and 3 places: four different rows (given two
/// blocks or more) for the four-row kernels.
fn four_rows(row: &[u8], bytes: usize) -> [Vec<u8>; 4] {
    rotated_rows(row, bytes)
}

/// `N` rows made from `row`, row `j` its blocks rotated left by `j` (modulo the count).
fn rotated_rows<const N: usize>(row: &[u8], bytes: usize) -> [Vec<u8>; N] {
    let nb = row.len() / bytes;
    std::array::from_fn(|j| {
        let mut r = row.to_vec();
        r.rotate_left(j % nb * bytes);
        r
    })
}

/// Every level's four-row K-quant kernels (Q6_K with `q6_k`) against their scalar twin row
/// by row, bit for bit: against `eights`, and against two eights side by side (`eights`, then
/// `second`, another eight tokens).
fn check_four_k_rows(q6_k: bool, row: &[u8], eights: &EightsK, second: &EightsK) {
    let bytes = if q6_k { Q6_K_BYTES } else { Q4_K_BYTES };
    let kquant = if q6_k { KQuant::Q6_K } else { KQuant::Q4_K };
    let four = four_rows(row, bytes);
    let n = row.len() / bytes;
    for (isa, k) in levels() {
        let mut rows = RowsK::default();
        k.unpack_rows_k(kquant, &four.each_ref().map(|r| &r[..]), &mut rows);
        let got = if q6_k {
            k.dot8x4_q6_k(&rows, 0, eights)
        } else {
            k.dot8x4_q4_k(&rows, 0, eights)
        };
        for (r, got) in got.iter().enumerate() {
            let twin = if q6_k {
                ch07_simd_parallel::layout::eights_k::dot8_q6_k(&rows, r, eights)
            } else {
                ch07_simd_parallel::layout::eights_k::dot8_q4_k(&rows, r, eights)
            };
            assert_eq!(
                got.map(f32::to_bits),
                twin.map(f32::to_bits),
                "{} four rows against eight tokens, {n} blocks, row {r}, {isa:?}",
                if q6_k { "Q6_K" } else { "Q4_K" }
            );
        }
        let got = k.dot16x4_k(kquant, &rows, 0, [eights, second]);
        for (r, got) in got.iter().enumerate() {
            let twin = |a| match q6_k {
                true => ch07_simd_parallel::layout::eights_k::dot8_q6_k(&rows, r, a),
                false => ch07_simd_parallel::layout::eights_k::dot8_q4_k(&rows, r, a),
            };
            assert_eq!(
                got.map(f32::to_bits),
                sixteen_bits(twin(eights), twin(second)),
                "{} four rows against two eights of tokens, {n} blocks, row {r}, {isa:?}",
                if q6_k { "Q6_K" } else { "Q4_K" }
            );
        }
    }
}

/// The bits a sixteen-token kernel's row must give: the first eight's lanes, then the
/// second's.
fn sixteen_bits(first: [f32; 8], second: [f32; 8]) -> [u32; 16] {
    std::array::from_fn(|t| if t < 8 { first[t] } else { second[t - 8] }.to_bits())
}

/// The eight tokens of `tokens` in reverse order, interleaved: a second eight for the
/// sixteen-token kernels.
fn reversed_k(tokens: &[Vec<BlockQ8K>]) -> EightsK {
    EightsK::new(std::array::from_fn(|t| &tokens[7 - t][..]))
}

/// Eight tokens of `nb` Q8_0 blocks from `q` (any i8, −128 too), each block its own scale.
fn q8_0_tokens(q: &[i8], nb: usize) -> Vec<Vec<Q8_0Wide>> {
    (0..8)
        .map(|t| {
            (0..nb)
                .map(|i| {
                    let qs = q[(t * nb + i) * 32..][..32].try_into().unwrap();
                    Q8_0Wide::new(0.01 + 0.001 * (nb * t + i) as f32, qs)
                })
                .collect()
        })
        .collect()
}

/// Eight tokens of `nb` Q8_1 blocks from `q`, each block its own `d` and `s` (not
/// necessarily `d · Σq`: the kernels must follow the scalar arithmetic whatever the values).
fn q8_1_tokens(q: &[i8], nb: usize) -> Vec<Vec<ch06_quantization::blocks::BlockQ8_1>> {
    (0..8)
        .map(|t| {
            (0..nb)
                .map(|i| ch06_quantization::blocks::BlockQ8_1 {
                    d: f32_to_f16(0.02 + 0.003 * (nb * t + i) as f32),
                    s: f32_to_f16(-1.5 + 0.25 * (5 * t + i) as f32),
                    qs: q[(t * nb + i) * 32..][..32].try_into().unwrap(),
                })
                .collect()
        })
        .collect()
}

/// Eight tokens of `nb` of chapter 6's Q8_0 blocks from `q` (Q4_0's activations).
fn q8_0_blocks(q: &[i8], nb: usize) -> Vec<Vec<BlockQ8_0>> {
    (0..8)
        .map(|t| {
            (0..nb)
                .map(|i| BlockQ8_0 {
                    d: f32_to_f16(0.015 + 0.002 * (nb * t + i) as f32),
                    qs: q[(t * nb + i) * 32..][..32].try_into().unwrap(),
                })
                .collect()
        })
        .collect()
}

/// Every level's interleaved (four-token) Q5_0 and Q4_1 kernels and eight-token Q4_0, Q5_0
/// and Q4_1 kernels against the scalar dot of each token, bit for bit; returns how many
/// levels had an eight-token kernel of their own.
fn check_interleaved_32(q40: &[u8], q50: &[u8], q41: &[u8], q: &[i8], nb: usize) -> usize {
    use ch06_quantization::Kernels;
    let a8 = q8_0_tokens(q, nb);
    let a8: [&[Q8_0Wide]; 4] = std::array::from_fn(|t| &a8[t][..]);
    let a1 = q8_1_tokens(q, nb);
    let a1: [&[_]; 4] = std::array::from_fn(|t| &a1[t][..]);
    let (quads8, quads1) = (ActQuads::new(a8), ActQuads::from_q8_1(a1));
    let (t8, t1) = (q8_0_tokens(q, nb), q8_1_tokens(q, nb));
    let octs8 = Eights::from_q8_0(std::array::from_fn(|t| &t8[t][..]));
    let octs1 = Eights::from_q8_1(std::array::from_fn(|t| &t1[t][..]));
    let t0 = q8_0_blocks(q, nb);
    let octs0 = Eights::from_q8_0_blocks(std::array::from_fn(|t| &t0[t][..]));
    // the same tokens in reverse order: a second eight for the sixteen-token kernels
    let back0 = Eights::from_q8_0_blocks(std::array::from_fn(|t| &t0[7 - t][..]));
    let back8 = Eights::from_q8_0(std::array::from_fn(|t| &t8[7 - t][..]));
    let back1 = Eights::from_q8_1(std::array::from_fn(|t| &t1[7 - t][..]));
    let mut ran = 0;
    for (isa, k) in levels() {
        ran += usize::from(ch08_gguf::matrix::policy::use_eights(k));
        let mut rows = Rows32::default();
        for (format, w, eights, second) in [
            (Q32::Q4_0, q40, &octs0, &back0),
            (Q32::Q5_0, q50, &octs8, &back8),
            (Q32::Q4_1, q41, &octs1, &back1),
        ] {
            let four = four_rows(w, format.format().block_bytes());
            k.unpack_rows32(format, &four.each_ref().map(|r| &r[..]), &mut rows);
            let got4 = k.dot8x4_row32(format, std::array::from_fn(|r| rows.row(r)), eights);
            for (r, got4) in got4.iter().enumerate() {
                let twin =
                    ch07_simd_parallel::layout::eights::dot8_row32(format, rows.row(r), eights);
                assert_eq!(
                    got4.map(f32::to_bits),
                    twin.map(f32::to_bits),
                    "{format:?} four rows against eight tokens, {nb} blocks, row {r}, {isa:?}"
                );
            }
            let got16 = k.dot16x4_row32(
                format,
                std::array::from_fn(|r| rows.row(r)),
                [eights, second],
            );
            for (r, got16) in got16.iter().enumerate() {
                let twin =
                    |a| ch07_simd_parallel::layout::eights::dot8_row32(format, rows.row(r), a);
                assert_eq!(
                    got16.map(f32::to_bits),
                    sixteen_bits(twin(eights), twin(second)),
                    "{format:?} four rows against two eights of tokens, {nb} blocks, row {r}, {isa:?}"
                );
            }
            let eight: [Vec<u8>; 8] = rotated_rows(w, format.format().block_bytes());
            k.unpack_rows32(format, &eight.each_ref().map(|r| &r[..]), &mut rows);
            let got8 = k.dot16x8_row32(
                format,
                std::array::from_fn(|r| rows.row(r)),
                [eights, second],
            );
            for (r, got8) in got8.iter().enumerate() {
                let twin =
                    |a| ch07_simd_parallel::layout::eights::dot8_row32(format, rows.row(r), a);
                assert_eq!(
                    got8.map(f32::to_bits),
                    sixteen_bits(twin(eights), twin(second)),
                    "{format:?} eight rows against two eights of tokens, {nb} blocks, row {r}, {isa:?}"
                );
            }
            k.unpack_rows32(format, &[w], &mut rows);
            let got = k.dot8_row32(format, rows.row(0), eights);
            let twin = ch07_simd_parallel::layout::eights::dot8_row32(format, rows.row(0), eights);
            for t in 0..8 {
                let want = match format {
                    Q32::Q4_0 => ch06_quantization::Scalar.dot_q4_0_q8_0(w, &t0[t]),
                    Q32::Q5_0 => Scalar.dot_q5_0(w, &t8[t]),
                    Q32::Q4_1 => ch06_quantization::Scalar.dot_q4_1_q8_1(w, &t1[t]),
                };
                assert_eq!(
                    got[t].to_bits(),
                    want.to_bits(),
                    "{format:?} eight tokens, {nb} blocks, token {t}, {isa:?}"
                );
                assert_eq!(
                    twin[t].to_bits(),
                    want.to_bits(),
                    "{format:?} scalar twin, token {t}"
                );
            }
        }
        let got = k.tokens4_q5_0_quads(q50, &quads8, a8);
        for t in 0..4 {
            let want = Scalar.dot_q5_0(q50, a8[t]);
            assert_eq!(
                got[t].to_bits(),
                want.to_bits(),
                "Q5_0 {nb} blocks, token {t}, {isa:?}"
            );
        }
        if let Some(got) = k.tokens4_q4_1_quads(q41, &quads1, a1) {
            for t in 0..4 {
                let want = ch06_quantization::Scalar.dot_q4_1_q8_1(q41, a1[t]);
                assert_eq!(
                    got[t].to_bits(),
                    want.to_bits(),
                    "Q4_1 {nb} blocks, token {t}, {isa:?}"
                );
            }
        }
    }
    ran
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Random rows of 1 to 10 blocks (no whole group, groups, and tails of one to three)
    /// against random activations, −128 included, through the interleaved kernels.
    #[test]
    fn interleaved_q4_0_q5_0_and_q4_1_equal_the_scalar_dots(
        raw in proptest::collection::vec(any::<u8>(), 10 * 22),
        q in proptest::collection::vec(any::<i8>(), 8 * 10 * 32),
        nb in 1usize..=10,
        seed in 0usize..1_000_000,
    ) {
        let q50: Vec<u8> = (0..nb).flat_map(|i| block(&raw[i * 22..], 22, &[0], seed + i)).collect();
        let q41: Vec<u8> = (0..nb).flat_map(|i| block(&raw[i * 20..], 20, &[0, 2], seed + 7 * i)).collect();
        let q40: Vec<u8> = (0..nb).flat_map(|i| block(&raw[i * 18..], 18, &[0], seed + 3 * i)).collect();
        check_interleaved_32(&q40, &q50, &q41, &q, nb);
    }
}

#[test]
fn interleaved_kernels_are_exact_at_the_extremes() {
    // Every quant at its largest or smallest against every activation at −128 or 127: the
    // 16-bit partial sums of the AVX2 kernels at their widest.
    let mut ran = 0;
    for (wq, aq) in [(0xffu8, -128i8), (0xff, 127), (0x00, -128), (0x00, 127)] {
        let nb = 9;
        let q50: Vec<u8> = (0..nb)
            .flat_map(|i| block(&[wq; 22], 22, &[0], i))
            .collect();
        let q41: Vec<u8> = (0..nb)
            .flat_map(|i| block(&[wq; 20], 20, &[0, 2], i))
            .collect();
        let q40: Vec<u8> = (0..nb)
            .flat_map(|i| block(&[wq; 18], 18, &[0], i))
            .collect();
        ran += check_interleaved_32(&q40, &q50, &q41, &vec![aq; 8 * nb * 32], nb);
        // Q4_K: every quant, scale and min at its largest (or zero), six super-blocks (a
        // group of four and a tail of two).
        let q4k: Vec<u8> = (0..6)
            .flat_map(|i| block(&[wq; Q4_K_BYTES], Q4_K_BYTES, &[0, 2], i))
            .collect();
        let tokens: Vec<Vec<BlockQ8K>> = (0..8)
            .map(|t| acts(&vec![aq; 6 * QK_K], 0.01 + 0.002 * t as f32))
            .collect();
        check_q4_k(&q4k, &tokens);
        let q6k: Vec<u8> = (0..6)
            .flat_map(|i| block(&[wq; Q6_K_BYTES], Q6_K_BYTES, &[208], i))
            .collect();
        check_q6_k(&q6k, &tokens);
    }
    // The AVX2 level, when this process runs it, has eight-token kernels of its own.
    if levels().iter().any(|(isa, _)| *isa == Isa::Avx2) {
        assert!(
            ran > 0,
            "the AVX2 level should have run the eight-token kernels"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    /// Random Q4_K and Q6_K rows of 1 to 9 super-blocks against random Q8_K activations (−128 too),
    /// each (token, block) its own scale, through the interleaved kernels.
    #[test]
    fn k_quant_prefill_kernels_equal_the_scalar_dots_on_random_blocks(
        raw in proptest::collection::vec(any::<u8>(), 9 * Q6_K_BYTES),
        q in proptest::collection::vec(any::<i8>(), 8 * 9 * QK_K),
        nb in 1usize..=9,
        seed in 0usize..1_000_000,
    ) {
        let row: Vec<u8> = (0..nb)
            .flat_map(|i| block(&raw[i * Q4_K_BYTES..], Q4_K_BYTES, &[0, 2], seed + i))
            .collect();
        let tokens: Vec<Vec<BlockQ8K>> = (0..8)
            .map(|t| {
                let mut a = acts(&q[t * 9 * QK_K..][..nb * QK_K], 1.0);
                for (i, b) in a.iter_mut().enumerate() {
                    b.d = 0.01 + 0.001 * (nb * t + i) as f32;
                }
                a
            })
            .collect();
        check_q4_k(&row, &tokens);
        let q6k: Vec<u8> = (0..nb)
            .flat_map(|i| block(&raw[i * Q6_K_BYTES..], Q6_K_BYTES, &[208], seed + i))
            .collect();
        check_q6_k(&q6k, &tokens);
    }
}

/// Every level's four-token (interleaved) and eight-token Q4_K kernels, and the eight-token
/// kernel's scalar twin, against the scalar dot of each of eight tokens, bit for bit.
fn check_q4_k(row: &[u8], tokens: &[Vec<BlockQ8K>]) {
    let a: [&[BlockQ8K]; 8] = std::array::from_fn(|t| &tokens[t][..]);
    let a4: [&[BlockQ8K]; 4] = std::array::from_fn(|t| a[t]);
    let (quads, eights) = (KQuads::new(a4), EightsK::new(a));
    check_four_k_rows(false, row, &eights, &reversed_k(tokens));
    let want: Vec<u32> = a
        .iter()
        .map(|a| Scalar.dot_q4_k(row, a).to_bits())
        .collect();
    let n = a[0].len();
    for (isa, k) in levels() {
        if let Some(got) = k.tokens4_q4_k_quads(row, &quads, a4) {
            for t in 0..4 {
                assert_eq!(
                    got[t].to_bits(),
                    want[t],
                    "Q4_K interleaved, {n} blocks, token {t}, {isa:?}"
                );
            }
        }
        let mut rows = RowsK::default();
        k.unpack_rows_k(KQuant::Q4_K, &[row], &mut rows);
        let got = k.dot8_q4_k(&rows, 0, &eights);
        let twin = ch07_simd_parallel::layout::eights_k::dot8_q4_k(&rows, 0, &eights);
        for t in 0..8 {
            assert_eq!(
                got[t].to_bits(),
                want[t],
                "Q4_K eight tokens, {n} blocks, token {t}, {isa:?}"
            );
            assert_eq!(twin[t].to_bits(), want[t], "Q4_K scalar twin, token {t}");
        }
    }
}

/// Every level's eight-token Q6_K kernel and its scalar twin against the scalar dot of each
/// of eight tokens, bit for bit.
fn check_q6_k(row: &[u8], tokens: &[Vec<BlockQ8K>]) {
    let a: [&[BlockQ8K]; 8] = std::array::from_fn(|t| &tokens[t][..]);
    let eights = EightsK::new(a);
    check_four_k_rows(true, row, &eights, &reversed_k(tokens));
    let n = a[0].len();
    for (isa, k) in levels() {
        let mut rows = RowsK::default();
        k.unpack_rows_k(KQuant::Q6_K, &[row], &mut rows);
        let got = k.dot8_q6_k(&rows, 0, &eights);
        let twin = ch07_simd_parallel::layout::eights_k::dot8_q6_k(&rows, 0, &eights);
        for t in 0..8 {
            let want = Scalar.dot_q6_k(row, a[t]).to_bits();
            assert_eq!(
                got[t].to_bits(),
                want,
                "Q6_K eight tokens, {n} blocks, token {t}, {isa:?}"
            );
            assert_eq!(twin[t].to_bits(), want, "Q6_K scalar twin, token {t}");
        }
    }
}
