//! The eight-row Q8_0, Q4_1 and Q4_0 decode kernels against chapter 6's one-row scalar dots, bit
//! for bit, on random rows (any quant, any finite f16 scale, subnormals included) and at the
//! extremes.

use ch06_quantization::blocks::{BlockQ8_0, BlockQ8_1};
use ch06_quantization::dot::{dot_q4_0_q8_0, dot_q4_1_q8_1, dot_q8_0_q8_0};
use ch07_simd_parallel::Isa;
use ch07_simd_parallel::kernels::{ManyTokens, for_isa};
use proptest::prelude::*;

/// `h` (f16 bits) made finite: an infinity or NaN loses its exponent's top bit.
fn finite(h: u16) -> u16 {
    if h & 0x7c00 == 0x7c00 { h & 0x83ff } else { h }
}

/// Eight Q8_0 rows of `nb` blocks, back to back: quants from `q`, block `i`'s scale from
/// `scales[i]` (f16 bits, made finite).
fn rows(q: &[i8], scales: &[u16], nb: usize) -> Vec<u8> {
    (0..8 * nb)
        .flat_map(|i| {
            let quants = q[i * 32..][..32].iter().map(|&v| v as u8);
            finite(scales[i])
                .to_le_bytes()
                .into_iter()
                .chain(quants)
                .collect::<Vec<u8>>()
        })
        .collect()
}

/// Checks an eight-row kernel (`kernel`, run on every level this CPU has, named `format`)
/// against chapter 6's one-row dot (`dot`) on each of the eight rows of `w`, bit for bit.
/// Returns how many SIMD levels were checked.
fn check_eight(
    format: &str,
    w: &[u8],
    kernel: impl Fn(&dyn ManyTokens) -> [f32; 8],
    dot: impl Fn(&[u8]) -> f32,
) -> usize {
    let row_len = w.len() / 8;
    let mut simd = 0;
    for isa in Isa::available() {
        let got = kernel(for_isa(isa).expect("a level this CPU has"));
        simd += usize::from(isa != Isa::Scalar);
        for (r, got) in got.into_iter().enumerate() {
            let want = dot(&w[r * row_len..(r + 1) * row_len]);
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "eight {format} rows on {isa:?}, row {r}: {got} instead of chapter 6's dot, {want}"
            );
        }
    }
    simd
}

fn check(w: &[u8], a: &[BlockQ8_0]) -> usize {
    check_eight(
        "Q8_0",
        w,
        |k| k.rows8_q8_0(w, a),
        |row| dot_q8_0_q8_0(row, a),
    )
}

fn token(q: &[i8], d: &[u16]) -> Vec<BlockQ8_0> {
    q.chunks_exact(32)
        .zip(d)
        .map(|(c, &d)| BlockQ8_0 {
            d: d & 0x7bff,
            qs: c.try_into().unwrap(),
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn eight_q8_0_rows_equal_the_one_row_dot(
        wq in proptest::collection::vec(any::<i8>(), 8 * 24 * 32),
        ws in proptest::collection::vec(any::<u16>(), 8 * 24),
        aq in proptest::collection::vec(-127i8..=127, 24 * 32),
        ad in proptest::collection::vec(any::<u16>(), 24),
        nb in 1usize..=24,
    ) {
        let w = rows(&wq[..8 * nb * 32], &ws[..8 * nb], nb);
        check(&w, &token(&aq[..nb * 32], &ad[..nb]));
    }
}

#[test]
fn eight_q8_0_rows_are_exact_at_the_extremes() {
    let mut simd = 0;
    let nb = 20;
    // activations come from chapter 6's quantizer, in −127..=127; a weight from a file may
    // be −128
    for (wq, aq) in [
        (-128i8, -127i8),
        (-128, 127),
        (127, -127),
        (127, 127),
        (0, -127),
    ] {
        let w = rows(&vec![wq; 8 * nb * 32], &vec![0x3c00; 8 * nb], nb); // scale 1.0
        simd += check(&w, &token(&vec![aq; nb * 32], &vec![0x3800; nb])); // 0.5
    }
    if Isa::Avx2.supported() {
        assert!(
            simd > 0,
            "the AVX2 level should have run its eight-row Q8_0 kernel"
        );
    }
}

/// Eight Q4_1 rows of `nb` blocks, back to back: nibbles from `q`, block `i`'s `d` and `m`
/// from `dm[2i]` and `dm[2i + 1]` (f16 bits, made finite).
fn rows_q4_1(q: &[u8], dm: &[u16], nb: usize) -> Vec<u8> {
    (0..8 * nb)
        .flat_map(|i| {
            let (d, m) = (finite(dm[2 * i]), finite(dm[2 * i + 1]));
            let mut block = d.to_le_bytes().to_vec();
            block.extend(m.to_le_bytes());
            block.extend(&q[i * 16..][..16]);
            block
        })
        .collect()
}

fn check_q4_1(w: &[u8], a: &[BlockQ8_1]) -> usize {
    check_eight(
        "Q4_1",
        w,
        |k| k.rows8_q4_1(w, a),
        |row| dot_q4_1_q8_1(row, a),
    )
}

fn token_q8_1(q: &[i8], ds: &[u16]) -> Vec<BlockQ8_1> {
    q.chunks_exact(32)
        .enumerate()
        .map(|(i, c)| BlockQ8_1 {
            d: ds[2 * i] & 0x7bff,
            s: ds[2 * i + 1] & 0xfbff,
            qs: c.try_into().unwrap(),
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn eight_q4_1_rows_equal_the_one_row_dot(
        wq in proptest::collection::vec(any::<u8>(), 8 * 24 * 16),
        wdm in proptest::collection::vec(any::<u16>(), 8 * 24 * 2),
        aq in proptest::collection::vec(-127i8..=127, 24 * 32),
        ads in proptest::collection::vec(any::<u16>(), 24 * 2),
        nb in 1usize..=24,
    ) {
        let w = rows_q4_1(&wq[..8 * nb * 16], &wdm[..8 * nb * 2], nb);
        check_q4_1(&w, &token_q8_1(&aq[..nb * 32], &ads[..nb * 2]));
    }
}

#[test]
fn eight_q4_1_rows_are_exact_at_the_extremes() {
    let mut simd = 0;
    let nb = 20;
    for (wq, aq) in [(0xffu8, -127i8), (0xff, 127), (0x00, -127), (0x0f, 127)] {
        // d 1.0 and m -0.5 on every block; the token's d 0.5 and s 2.0
        let w = rows_q4_1(&vec![wq; 8 * nb * 16], &[0x3c00, 0xb800].repeat(8 * nb), nb);
        simd += check_q4_1(
            &w,
            &token_q8_1(&vec![aq; nb * 32], &[0x3800, 0x4000].repeat(nb)),
        );
    }
    if Isa::Avx2.supported() {
        assert!(
            simd > 0,
            "the AVX2 level should have run its eight-row Q4_1 kernel"
        );
    }
}

/// Eight Q4_0 rows of `nb` blocks, back to back: nibbles from `q`, block `i`'s scale from
/// `d[i]` (f16 bits, made finite).
fn rows_q4_0(q: &[u8], d: &[u16], nb: usize) -> Vec<u8> {
    (0..8 * nb)
        .flat_map(|i| {
            let mut block = finite(d[i]).to_le_bytes().to_vec();
            block.extend(&q[i * 16..][..16]);
            block
        })
        .collect()
}

fn check_q4_0(w: &[u8], a: &[BlockQ8_0]) -> usize {
    check_eight(
        "Q4_0",
        w,
        |k| k.rows8_q4_0(w, a),
        |row| dot_q4_0_q8_0(row, a),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn eight_q4_0_rows_equal_the_one_row_dot(
        wq in proptest::collection::vec(any::<u8>(), 8 * 24 * 16),
        wd in proptest::collection::vec(any::<u16>(), 8 * 24),
        aq in proptest::collection::vec(-127i8..=127, 24 * 32),
        ad in proptest::collection::vec(any::<u16>(), 24),
        nb in 1usize..=24,
    ) {
        let w = rows_q4_0(&wq[..8 * nb * 16], &wd[..8 * nb], nb);
        check_q4_0(&w, &token(&aq[..nb * 32], &ad[..nb]));
    }
}

#[test]
fn eight_q4_0_rows_are_exact_at_the_extremes() {
    let mut simd = 0;
    let nb = 20;
    for (wq, aq) in [
        (0xffu8, -127i8),
        (0xff, 127),
        (0x00, -127),
        (0x00, 127),
        (0x88, 127),
    ] {
        // d 1.0 on every block; the token's d 0.5
        let w = rows_q4_0(&vec![wq; 8 * nb * 16], &vec![0x3c00; 8 * nb], nb);
        simd += check_q4_0(&w, &token(&vec![aq; nb * 32], &vec![0x3800; nb]));
    }
    if Isa::Avx2.supported() {
        assert!(
            simd > 0,
            "the AVX2 level should have run its eight-row Q4_0 kernel"
        );
    }
}
