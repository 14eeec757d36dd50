//! The four-row decode kernels against the one-row scalar dot, bit for bit, on random Q5_0
//! rows (every fifth bit pattern, every scale) and at the extremes.

use ch06_quantization::Scalar;
use ch06_quantization::f16::f32_to_f16;
use ch07_simd_parallel::Isa;
use ch07_simd_parallel::kernels::{OneToken, for_isa};
use ch07_simd_parallel::layout::kquant::{Q5_0_BYTES, Q8_0Wide};
use proptest::prelude::*;

/// Four Q5_0 rows of `nb` blocks from `raw`, each block's scale set to a finite f16.
fn rows(raw: &[u8], nb: usize, scale: f32) -> Vec<Vec<u8>> {
    (0..4)
        .map(|r| {
            (0..nb)
                .flat_map(|b| {
                    let mut block = raw[(r * nb + b) * Q5_0_BYTES..][..Q5_0_BYTES].to_vec();
                    let d = scale * (1.0 + (r * nb + b) as f32 / 7.0);
                    block[..2].copy_from_slice(&f32_to_f16(d).to_le_bytes());
                    block
                })
                .collect()
        })
        .collect()
}

/// Returns how many SIMD levels were checked.
fn check(w: &[Vec<u8>], a: &[Q8_0Wide]) -> usize {
    let mut simd = 0;
    for isa in Isa::available() {
        let got = for_isa(isa)
            .expect("a level this CPU has")
            .rows4_q5_0(std::array::from_fn(|r| &w[r][..]), a);
        simd += usize::from(isa != Isa::Scalar);
        for r in 0..4 {
            let want = Scalar.dot_q5_0(&w[r], a);
            assert_eq!(
                got[r].to_bits(),
                want.to_bits(),
                "four Q5_0 rows on {isa:?}, row {r}: {} instead of the one-row dot's {want}",
                got[r]
            );
        }
    }
    simd
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn four_q5_0_rows_equal_the_one_row_dot(
        raw in proptest::collection::vec(any::<u8>(), 4 * 24 * Q5_0_BYTES),
        q in proptest::collection::vec(any::<i8>(), 24 * 32),
        nb in 1usize..=24,
        scale in 1e-4f32..1.0,
    ) {
        let a: Vec<Q8_0Wide> = q[..nb * 32]
            .chunks_exact(32)
            .enumerate()
            .map(|(i, c)| Q8_0Wide::new(0.01 + i as f32 * 0.003, c.try_into().unwrap()))
            .collect();
        check(&rows(&raw, nb, scale), &a);
    }
}

#[test]
fn four_q5_0_rows_are_exact_at_the_extremes() {
    let mut simd = 0;
    for (wq, aq) in [(0xffu8, -128i8), (0xff, 127), (0x00, -128), (0x00, 127)] {
        let nb = 20;
        let a: Vec<Q8_0Wide> = (0..nb).map(|_| Q8_0Wide::new(0.5, [aq; 32])).collect();
        simd += check(&rows(&vec![wq; 4 * nb * Q5_0_BYTES], nb, 0.25), &a);
    }
    if Isa::Avx2.supported() {
        assert!(
            simd > 0,
            "the AVX2 level should have run its four-row Q5_0 kernel"
        );
    }
}
