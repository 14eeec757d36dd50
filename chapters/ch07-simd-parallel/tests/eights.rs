//! The eight-token kernel ([`ch07_simd_parallel::layout::eights`]) against chapter 6's
//! one-token dot product: every lane must be `dot_q4_1_q8_1` of its own token, bit for bit,
//! for the scalar twin and for every SIMD level, on random rows and at the extremes of the
//! 16-bit sums.

use ch01_tensors::random::uniform;
use ch06_quantization::blocks::{BlockQ4_1, BlockQ8_1, QK};
use ch06_quantization::dot::dot_q4_1_q8_1;
use ch06_quantization::matrix::Q32;
use ch06_quantization::quantize::{quantize_q4_1, quantize_q8_1};
use ch07_simd_parallel::Isa;
use ch07_simd_parallel::kernels::for_isa;
use ch07_simd_parallel::layout::eights::{Eights, dot8_row32, unpack_block};

/// Tokens an eight-token kernel serves.
const TOKENS: usize = 8;

/// The scalar twin on a row as it lies in the file: each block unpacked, then the eight dots.
fn dot8_q4_1(w: &[u8], a: &Eights) -> [f32; TOKENS] {
    let row: Vec<_> = w
        .chunks_exact(BlockQ4_1::BYTES)
        .map(|b| unpack_block(Q32::Q4_1, b))
        .collect();
    dot8_row32(Q32::Q4_1, &row, a)
}

fn q4_1_row(x: &[f32]) -> Vec<u8> {
    let mut row = vec![0u8; x.len() / QK * BlockQ4_1::BYTES];
    for (block, out) in x
        .chunks_exact(QK)
        .zip(row.chunks_exact_mut(BlockQ4_1::BYTES))
    {
        quantize_q4_1(block.try_into().unwrap(), out.try_into().unwrap());
    }
    row
}

fn q8_1_row(x: &[f32]) -> Vec<BlockQ8_1> {
    x.chunks_exact(QK)
        .map(|b| quantize_q8_1(b.try_into().unwrap()))
        .collect()
}

/// (weights, eight tokens' activations) cases: random at several scales, and the extremes:
/// every weight quant 15 against activations of ±127, the largest 16-bit sums a step makes.
fn cases(blocks: usize) -> Vec<(Vec<f32>, Vec<Vec<f32>>)> {
    let n = blocks * QK;
    let mut cases = Vec::new();
    for seed in 0..6u64 {
        let scale = 10f32.powi(seed as i32 - 3);
        let w: Vec<f32> = uniform(n, 7 + seed).iter().map(|v| v * scale).collect();
        let acts = (0..TOKENS as u64)
            .map(|t| {
                uniform(n, 100 + 8 * seed + t)
                    .iter()
                    .map(|v| v * 3.0)
                    .collect()
            })
            .collect();
        cases.push((w, acts));
    }
    // a block whose minimum is 0 and every other weight at the top level (quant 15)
    let w: Vec<f32> = (0..n)
        .map(|j| if j % QK == 0 { 0.0 } else { 1.5 })
        .collect();
    let acts = (0..TOKENS)
        .map(|t| {
            (0..n)
                .map(|j| if (j + t) % 2 == 0 { 1.0 } else { -1.0 })
                .collect()
        })
        .collect();
    cases.push((w, acts));
    let w: Vec<f32> = (0..n)
        .map(|j| if j % QK == 0 { -1.0 } else { 1.0 })
        .collect();
    let acts = (0..TOKENS).map(|_| vec![1.0; n]).collect(); // every product 15 · 127
    cases.push((w, acts));
    cases
}

#[allow(clippy::needless_range_loop)] // t names a token in the messages
fn check(name: &str, f: impl Fn(&[u8], &Eights) -> [f32; TOKENS]) {
    for blocks in [1, 2, 5, 18] {
        for (c, (w, acts)) in cases(blocks).iter().enumerate() {
            let row = q4_1_row(w);
            let tokens: Vec<Vec<BlockQ8_1>> = acts.iter().map(|a| q8_1_row(a)).collect();
            let e = Eights::from_q8_1(std::array::from_fn(|t| &tokens[t][..]));
            let got = f(&row, &e);
            for t in 0..TOKENS {
                let want = dot_q4_1_q8_1(&row, &tokens[t]);
                assert!(
                    got[t].to_bits() == want.to_bits(),
                    "{name}: {blocks} blocks, case {c}, token {t}: lane gives {} where chapter \
                     6's dot gives {want}",
                    got[t]
                );
            }
        }
    }
}

#[test]
fn the_scalar_twin_is_chapter_6s_dot_in_every_lane() {
    check("scalar", dot8_q4_1);
}

#[test]
fn every_simd_level_is_chapter_6s_dot_in_every_lane() {
    let simd: Vec<Isa> = Isa::available()
        .into_iter()
        .filter(|&i| i != Isa::Scalar)
        .collect();
    for &isa in &simd {
        let k = for_isa(isa).expect("an available level");
        check(isa.name(), |w, a| k.dot8_raw32(Q32::Q4_1, w, a));
    }
    if simd.is_empty() {
        eprintln!("no SIMD level here (or LLM_BOOK_ISA caps it): only the scalar twin runs");
    }
}

#[test]
#[allow(clippy::needless_range_loop)] // b, k and t name a block, a step and a token
fn the_layout_puts_quants_4k_to_4k_plus_4_of_token_t_at_step_k_lane_t() {
    let tokens: Vec<Vec<BlockQ8_1>> = (0..TOKENS as u64)
        .map(|t| q8_1_row(&uniform(2 * QK, 300 + t)))
        .collect();
    let e = Eights::from_q8_1(std::array::from_fn(|t| &tokens[t][..]));
    for b in 0..2 {
        for k in 0..QK / 4 {
            for t in 0..TOKENS {
                assert_eq!(
                    e.qs[b][32 * k + 4 * t..][..4],
                    tokens[t][b].qs[4 * k..4 * k + 4],
                    "block {b} step {k} token {t}"
                );
            }
        }
    }
}

/// Given each block's `Σ qs` (as a packed Q4_0 matrix's activations keep them), the eights
/// are the ones `from_q8_0_blocks` makes summing the quants itself.
#[test]
fn the_sums_given_make_the_same_eights() {
    use ch06_quantization::blocks::BlockQ8_0;
    use ch06_quantization::quantize::quantize_q8_0;
    let tokens: Vec<Vec<BlockQ8_0>> = (0..TOKENS as u64)
        .map(|t| {
            let x = uniform(3 * QK, 400 + t);
            x.chunks_exact(QK)
                .map(|b| quantize_q8_0(b.try_into().unwrap()))
                .collect()
        })
        .collect();
    let sums: Vec<Vec<i32>> = tokens
        .iter()
        .map(|t| {
            t.iter()
                .map(|b| b.qs.iter().map(|&q| i32::from(q)).sum())
                .collect()
        })
        .collect();
    let summed = Eights::from_q8_0_blocks(std::array::from_fn(|t| &tokens[t][..]));
    let given = Eights::from_q8_0_sums(
        std::array::from_fn(|t| &tokens[t][..]),
        std::array::from_fn(|t| &sums[t][..]),
    );
    assert_eq!(given.qs, summed.qs, "the quants, interleaved");
    assert_eq!(
        given.offset, summed.offset,
        "8 · Σ qs of each block and token"
    );
    assert_eq!(given.d, summed.d, "the scales");
    assert_eq!(given.s, summed.s, "Q8_0 has no s");
}
