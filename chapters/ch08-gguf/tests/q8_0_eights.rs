//! The eight-token Q8_0 kernel (a batch's tokens against Gemma-3's LM head), the
//! sixteen-token one, and the product of a block of rows (eight rows in the lanes with VNNI):
//! every level this CPU has, and the scalar twin, give chapter 6's `dot_q8_0_q8_0` of each
//! token, bit for bit, on random rows and at the extremes of the sign trick and of `w + 128`.

use ch06_quantization::blocks::BlockQ8_0;
use ch06_quantization::f16::f32_to_f16;
use ch06_quantization::{Kernels, Scalar};
use ch07_simd_parallel::Isa;
use ch07_simd_parallel::kernels::{ByToken, for_isa};
use ch07_simd_parallel::layout::eights::Eights;
use proptest::prelude::*;

/// A Q8_0 row of `nb` blocks: quants from `q`, scale `d(i)` for block `i`.
fn row(q: &[i8], nb: usize, d: impl Fn(usize) -> f32) -> Vec<u8> {
    (0..nb)
        .flat_map(|i| {
            let mut b = f32_to_f16(d(i)).to_le_bytes().to_vec();
            b.extend(q[32 * i..32 * (i + 1)].iter().map(|&v| v as u8));
            b
        })
        .collect()
}

/// Eight tokens of `nb` activation blocks from `q`, each (token, block) its own scale.
fn tokens(q: &[i8], nb: usize) -> Vec<Vec<BlockQ8_0>> {
    (0..8)
        .map(|t| {
            (0..nb)
                .map(|i| BlockQ8_0 {
                    d: f32_to_f16(0.011 + 0.003 * (nb * t + i) as f32),
                    qs: q[(t * nb + i) * 32..][..32].try_into().unwrap(),
                })
                .collect()
        })
        .collect()
}

/// Returns how many SIMD levels were checked.
fn check(w: &[u8], a: &[Vec<BlockQ8_0>]) -> usize {
    let eights = Eights::from_q8_0_blocks(std::array::from_fn(|t| &a[t][..]));
    // a second eight, the same tokens in reverse order, for the sixteen-token kernel
    let back = Eights::from_q8_0_blocks(std::array::from_fn(|t| &a[7 - t][..]));
    let twin = ch07_simd_parallel::layout::eights_q8_0::dot8_q8_0(w, &eights);
    let mut simd = 0;
    for isa in Isa::available() {
        let got = for_isa(isa)
            .expect("a level this CPU has")
            .dot8_q8_0(w, &eights);
        let both = for_isa(isa)
            .expect("a level this CPU has")
            .dot16_q8_0(w, [&eights, &back]);
        simd += usize::from(isa != Isa::Scalar);
        for t in 0..8 {
            let want = Scalar.dot_q8_0_q8_0(w, &a[t]);
            for (lane, got) in [(t, both[t]), (15 - t, both[15 - t])] {
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "sixteen-token Q8_0 on {isa:?}, lane {lane} (token {t}): {got} instead of chapter 6's {want}"
                );
            }
            assert_eq!(
                got[t].to_bits(),
                want.to_bits(),
                "eight-token Q8_0 on {isa:?}, token {t}: {} instead of chapter 6's {want}",
                got[t]
            );
            assert_eq!(
                twin[t].to_bits(),
                want.to_bits(),
                "the scalar twin, token {t}"
            );
        }
    }
    simd
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Random rows of 1 to 24 blocks (weights −128 included; activations in −127..=127, as
    /// chapter 6's quantization makes them) with a different scale in every block.
    #[test]
    fn eight_token_q8_0_equals_chapter_6s_dot(
        wq in proptest::collection::vec(any::<i8>(), 24 * 32),
        aq in proptest::collection::vec(-127i8..=127, 8 * 24 * 32),
        nb in 1usize..=24,
        scale in 1e-4f32..1.0,
    ) {
        let w = row(&wq, nb, |i| scale * (1.0 + i as f32));
        let a = tokens(&aq, nb);
        check(&w, &a);
        check_rows(&w, &a, nb % 8);
    }
}

#[test]
fn eight_token_q8_0_is_exact_at_the_extremes() {
    // The widest 16-bit pairs of the sign trick: |w| = 128 or 127 against ±127.
    let mut simd = 0;
    for (wq, aq) in [
        (-128i8, 127i8),
        (-128, -127),
        (127, 127),
        (127, -127),
        (-127, -127),
    ] {
        let nb = 20; // a Gemma-3 row: 640 values
        let w = row(&vec![wq; 32 * nb], nb, |i| 0.5 + i as f32);
        let a = tokens(&vec![aq; 8 * 32 * nb], nb);
        simd += check(&w, &a);
        check_rows(&w, &a, 3);
    }
    if Isa::Avx2.supported() {
        assert!(
            simd > 0,
            "the AVX2 level should have run its eight-token Q8_0 kernel"
        );
    }
}

/// `8 + extra` rows (`w` with its blocks rotated by 0, 1, 2, … places) against two eights
/// (the tokens of `a`, then the same in reverse order), through every level's Q8_0 product of
/// a block of rows: each row's lanes the scalar twin's, bit for bit. Then again with only
/// four tokens of the second eight real (a batch of twelve), which takes the rows two at a
/// time on some levels: its first four lanes must still be the twin's.
fn check_rows(w: &[u8], a: &[Vec<BlockQ8_0>], extra: usize) {
    for tokens in [16, 12] {
        check_rows_of(w, a, extra, tokens);
    }
}

fn check_rows_of(w: &[u8], a: &[Vec<BlockQ8_0>], extra: usize, tokens: usize) {
    let groups = [
        Eights::from_q8_0_blocks(std::array::from_fn(|t| &a[t][..])),
        Eights::from_q8_0_blocks(std::array::from_fn(|t| &a[7 - t][..])),
    ];
    let nb = w.len() / 34;
    let rows: Vec<Vec<u8>> = (0..8 + extra)
        .map(|r| {
            let mut row = w.to_vec();
            row.rotate_left(r % nb * 34);
            row
        })
        .collect();
    let rows: Vec<&[u8]> = rows.iter().map(|r| &r[..]).collect();
    for isa in Isa::available() {
        // one output row per real token, as a product gives it
        let mut by_token = vec![vec![f32::NAN; rows.len()]; tokens];
        let mut outs: Vec<&mut [f32]> = by_token.iter_mut().map(|r| &mut r[..]).collect();
        for_isa(isa)
            .expect("a level this CPU has")
            .q8_0_rows_by_eights(&rows, &groups, tokens, &mut ByToken::new(&mut outs));
        for (i, row) in rows.iter().enumerate() {
            for (g, a) in groups.iter().enumerate() {
                let want =
                    ch07_simd_parallel::layout::eights_q8_0::dot8_q8_0(row, a).map(f32::to_bits);
                let real = (tokens - 8 * g).min(8);
                let got: Vec<u32> = (0..real)
                    .map(|l| by_token[8 * g + l][i].to_bits())
                    .collect();
                assert_eq!(
                    got[..],
                    want[..real],
                    "Q8_0 rows by eights on {isa:?}, {tokens} tokens: row {i} of {}, eight {g}",
                    rows.len()
                );
            }
        }
    }
}
