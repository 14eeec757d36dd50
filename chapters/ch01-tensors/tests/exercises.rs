#![cfg(feature = "exercises")]
//! One test per exercise in `src/exercises.rs`. Each compares your function with the
//! chapter's own implementation and with values worked out by hand.
//! Run: `cargo xtask exercises ch01`.

use ch01_tensors::exercises;
use ch01_tensors::{Error, Tensor, half, ops};

/// A (2, 3, 4) tensor holding 0..24, so element [i, j, k] is 12i + 4j + k.
fn iota_234() -> Tensor {
    Tensor::from_vec((0..24).map(|v| v as f32).collect(), &[2, 3, 4]).unwrap()
}

/// Deterministic values in [-1, 1) from a 64-bit LCG.
fn random(len: usize, seed: u64) -> Vec<f32> {
    ch01_tensors::random::uniform(len, seed)
}

#[test]
fn ex1_transpose_view() {
    let t = iota_234();
    let v = exercises::transpose_view(&t, 0, 2);
    assert_eq!(
        v.shape(),
        &[4, 3, 2],
        "swapping dims 0 and 2 of a (2, 3, 4) tensor gives shape (4, 3, 2)"
    );
    assert_eq!(
        v.strides(),
        &[1, 4, 12],
        "the strides (12, 4, 1) must be swapped along with the shape"
    );
    assert!(
        v.shares_storage(&t),
        "a transpose is a view: it must share t's storage, not copy it"
    );
    assert_eq!(
        v.get(&[3, 1, 0]),
        7.0,
        "element [3, 1, 0] of the transpose is t[0, 1, 3] = 7"
    );
    assert_eq!(
        v.to_vec(),
        t.transpose(0, 2).to_vec(),
        "every element should match Tensor::transpose"
    );
    let m = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    let mt = exercises::transpose_view(&m, 0, 1);
    assert_eq!(
        mt.to_vec(),
        vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0],
        "the transpose of [[1 2 3] [4 5 6]] reads 1 4 2 5 3 6"
    );
    let back = exercises::transpose_view(&mt, 0, 1);
    assert_eq!(
        back.to_vec(),
        m.to_vec(),
        "transposing twice must give the original back"
    );
}

#[test]
fn ex2_narrow_view() {
    let t = iota_234();
    let v = exercises::narrow_view(&t, 1, 1, 2).expect("rows j = 1..3 of a size-3 dimension fit");
    assert_eq!(
        v.shape(),
        &[2, 2, 4],
        "narrowing dim 1 to 2 elements gives shape (2, 2, 4)"
    );
    assert_eq!(
        v.strides(),
        t.strides(),
        "narrow keeps the strides: the elements do not move"
    );
    assert_eq!(
        v.offset(),
        4,
        "starting at j = 1 skips one step of stride 4"
    );
    assert!(
        v.shares_storage(&t),
        "a narrow is a view: it must share t's storage, not copy it"
    );
    assert_eq!(
        v.get(&[1, 0, 0]),
        16.0,
        "element [1, 0, 0] of the view is t[1, 1, 0] = 16"
    );
    assert_eq!(
        v.to_vec(),
        t.narrow(1, 1, 2).unwrap().to_vec(),
        "every element should match Tensor::narrow"
    );
    let last = exercises::narrow_view(&t, 2, 3, 1).expect("the last column k = 3 fits");
    assert_eq!(
        last.to_vec(),
        vec![3.0, 7.0, 11.0, 15.0, 19.0, 23.0],
        "column k = 3 holds 3, 7, 11, ..."
    );
    assert!(
        matches!(exercises::narrow_view(&t, 1, 2, 2), Err(Error::Shape(_))),
        "j = 2..4 runs past dimension 1 (size 3): that must be an Error::Shape"
    );
    assert!(
        matches!(exercises::narrow_view(&t, 3, 0, 1), Err(Error::Shape(_))),
        "a (2, 3, 4) tensor has no dimension 3: that must be an Error::Shape"
    );
}

#[test]
fn ex3_matmul_ikj() {
    let mut out = [f32::NAN; 4];
    exercises::matmul_ikj(
        &mut out,
        &[1.0, 2.0, 3.0, 4.0],
        &[5.0, 6.0, 7.0, 8.0],
        2,
        2,
        2,
    );
    assert_eq!(
        out,
        [19.0, 22.0, 43.0, 50.0],
        "[1 2; 3 4] · [5 6; 7 8] = [19 22; 43 50] (and out starts from zero)"
    );
    for (m, k, n) in [(1, 1, 1), (5, 7, 3), (17, 33, 9)] {
        let a = random(m * k, 1); // (m, k)
        let b = random(k * n, 2); // (k, n)
        let mut want = vec![0.0; m * n];
        ops::matmul_naive(&mut want, &a, &b, m, k, n);
        let mut got = vec![f32::NAN; m * n];
        exercises::matmul_ikj(&mut got, &a, &b, m, k, n);
        for (idx, (g, w)) in got.iter().zip(&want).enumerate() {
            // Same terms, summed in the same p order as the naive loop: only rounding
            // differences of a few ulps are possible, far below 1e-5 for these sizes.
            assert!(
                (g - w).abs() <= 1e-5,
                "({m}x{k})·({k}x{n}): out[{}][{}] is {g}, the naive matmul gives {w}",
                idx / n,
                idx % n
            );
        }
    }
}

#[test]
fn ex4_stable_softmax() {
    let mut x = [0.0, 3f32.ln()];
    exercises::softmax(&mut x);
    assert!(
        (x[0] - 0.25).abs() < 1e-6 && (x[1] - 0.75).abs() < 1e-6,
        "softmax([0, ln 3]) = [1/4, 3/4], got {x:?}"
    );
    let mut big = [1000.0, 1001.0];
    exercises::softmax(&mut big);
    assert!(
        big.iter().all(|v| v.is_finite()),
        "softmax([1000, 1001]) overflowed to {big:?}: subtract the max first"
    );
    assert!(
        (big[0] - 0.268_941_4).abs() < 1e-6 && (big[1] - 0.731_058_6).abs() < 1e-6,
        "softmax([1000, 1001]) = softmax([-1, 0]) = [0.2689, 0.7311], got {big:?}"
    );
    let mut masked = [2.0, f32::NEG_INFINITY, 2.0];
    exercises::softmax(&mut masked);
    assert_eq!(
        masked,
        [0.5, 0.0, 0.5],
        "a masked score (−∞) gets probability 0, the two equal scores 1/2 each"
    );
    let row: Vec<f32> = random(50, 3).iter().map(|v| v * 30.0).collect();
    let (mut got, mut want) = (row.clone(), row);
    exercises::softmax(&mut got);
    ops::softmax_inplace(&mut want);
    let worst = got
        .iter()
        .zip(&want)
        .map(|(g, w)| (g - w).abs())
        .fold(0.0, f32::max);
    assert!(
        worst < 1e-6,
        "on a random row your probabilities differ from ops::softmax_inplace by {worst}"
    );
}

#[test]
fn ex5_rmsnorm() {
    let mut out = [0.0; 2];
    exercises::rmsnorm(&mut out, &[3.0, 4.0], &[1.0, 2.0], 0.0);
    // mean(x²) = 12.5, rms = 3.5355339: [3 / rms · 1, 4 / rms · 2]
    assert!(
        (out[0] - 0.848_528_1).abs() < 1e-6 && (out[1] - 2.262_741_7).abs() < 1e-6,
        "rmsnorm([3, 4], weight [1, 2]) = [0.8485, 2.2627] (rms = √12.5), got {out:?}"
    );
    exercises::rmsnorm(&mut out, &[0.0, 0.0], &[1.0, 1.0], 1e-5);
    assert_eq!(
        out,
        [0.0, 0.0],
        "an all-zero row must stay zero: eps goes inside the square root"
    );
    let x = random(576, 4); // (dim,) — SmolLM2's hidden size
    let w = random(576, 5); // (dim,)
    let (mut got, mut want) = (vec![0.0; 576], vec![0.0; 576]);
    exercises::rmsnorm(&mut got, &x, &w, 1e-5);
    ops::rmsnorm(&mut want, &x, &w, 1e-5);
    // 1e-5 relative (plus a tiny absolute floor): an f32 sum of 576 squares may round
    // differently from the chapter's f64 sum, but only by a few units of 1e-7.
    for (i, (g, r)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g - r).abs() <= 1e-5 * r.abs() + 1e-7,
            "feature {i}: got {g}, ops::rmsnorm gives {r}"
        );
    }
}

#[test]
fn ex6_f16_decode() {
    let cases = [
        (0x3c00, 1.0, "1.0 is exponent 15 (2^0), fraction 0"),
        (0xc000, -2.0, "-2.0 is sign 1, exponent 16 (2^1)"),
        (0x3555, 0.333_251_95, "1/3 rounds to 0x3555 = 0.33325195"),
        (0x7bff, 65504.0, "0x7bff is the largest finite f16, 65504"),
        (
            0x0400,
            6.103_515_6e-5,
            "0x0400 is the smallest normal f16, 2^-14",
        ),
        (
            0x0001,
            5.960_464_5e-8,
            "0x0001 is the smallest subnormal, 2^-24",
        ),
        (
            0x7c00,
            f32::INFINITY,
            "exponent 31 with fraction 0 is +infinity",
        ),
    ];
    for (bits, want, why) in cases {
        assert_eq!(exercises::f16_to_f32(bits), want, "{bits:#06x}: {why}");
    }
    assert!(
        exercises::f16_to_f32(0x8000).is_sign_negative(),
        "0x8000 is -0.0: keep the sign bit on zero"
    );
    assert!(
        exercises::f16_to_f32(0x7e00).is_nan(),
        "exponent 31 with a nonzero fraction is NaN"
    );
    for bits in 0..=u16::MAX {
        let (got, want) = (exercises::f16_to_f32(bits), half::f16_to_f32(bits));
        assert!(
            got == want && got.is_sign_negative() == want.is_sign_negative()
                || got.is_nan() && want.is_nan(),
            "f16 {bits:#06x} should decode to {want:e}, got {got:e}"
        );
    }
}
