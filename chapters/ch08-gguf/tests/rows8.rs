//! The eight-row Q8_0 decode kernel against chapter 6's one-row scalar dot, bit for bit, on
//! random rows (any quant, any finite f16 scale, subnormals included) and at the extremes.

use ch06_quantization::blocks::BlockQ8_0;
use ch06_quantization::dot::dot_q8_0_q8_0;
use ch07_simd_parallel::Isa;
use ch08_gguf::ksimd::for_isa;
use proptest::prelude::*;

/// Eight Q8_0 rows of `nb` blocks, back to back: quants from `q`, block `i`'s scale from
/// `scales[i]` (f16 bits; an infinite or NaN one is made finite).
fn rows(q: &[i8], scales: &[u16], nb: usize) -> Vec<u8> {
    (0..8 * nb)
        .flat_map(|i| {
            let d = if scales[i] & 0x7c00 == 0x7c00 {
                scales[i] & 0x83ff
            } else {
                scales[i]
            };
            let quants = q[i * 32..][..32].iter().map(|&v| v as u8);
            d.to_le_bytes()
                .into_iter()
                .chain(quants)
                .collect::<Vec<u8>>()
        })
        .collect()
}

/// Returns how many SIMD levels were checked.
fn check(w: &[u8], a: &[BlockQ8_0]) -> usize {
    let row_len = w.len() / 8;
    let mut simd = 0;
    for isa in Isa::available() {
        let got = for_isa(isa).rows8_q8_0(w, a);
        simd += usize::from(isa != Isa::Scalar);
        for (r, got) in got.into_iter().enumerate() {
            let want = dot_q8_0_q8_0(&w[r * row_len..(r + 1) * row_len], a);
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "eight Q8_0 rows on {isa:?}, row {r}: {got} instead of chapter 6's dot, {want}"
            );
        }
    }
    simd
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
