//! The slice kernels: the fast matmuls agree with the naive one, and the row-wise ops
//! match values computed by hand.

use approx::{assert_abs_diff_eq, assert_relative_eq};
use ch01_tensors::Tensor;
use ch01_tensors::ops::{self, PANEL_K, TILE_COLS, TILE_ROWS};

/// Deterministic values in [-1, 1) from a 64-bit LCG (no dev-dependency needed).
fn random(len: usize, seed: u64) -> Vec<f32> {
    ch01_tensors::random::uniform(len, seed)
}

/// Asserts two (m, n) products agree to within the rounding error of a k-term f32 sum.
///
/// Summing k products in a different order changes the result by at most about
/// k · ε · Σ|a_ip · b_pj| (the standard bound for recursive summation, ε = f32::EPSILON),
/// so that is the tolerance for element [i][j]: generous for rounding, but an indexing
/// bug (a wrong or missing term) is off by a whole product, far more than this.
fn assert_products_agree(
    got: &[f32],
    want: &[f32],
    a: &[f32],
    b: &[f32],
    (m, k, n): (usize, usize, usize),
    what: &str,
) {
    for i in 0..m {
        for j in 0..n {
            let mass: f32 = (0..k).map(|p| (a[i * k + p] * b[p * n + j]).abs()).sum();
            let tol = (k as f32 * f32::EPSILON * mass).max(f32::MIN_POSITIVE);
            let (g, w) = (got[i * n + j], want[i * n + j]);
            assert!(
                (g - w).abs() <= tol,
                "{what} ({m}x{k}·{k}x{n}): out[{i}][{j}] = {g}, naive gives {w}"
            );
        }
    }
}

#[test]
fn naive_matmul_matches_a_hand_computed_product() {
    // [1 2; 3 4] · [5 6; 7 8] = [19 22; 43 50]
    let mut out = [0.0; 4];
    ops::matmul_naive(
        &mut out,
        &[1.0, 2.0, 3.0, 4.0],
        &[5.0, 6.0, 7.0, 8.0],
        2,
        2,
        2,
    );
    assert_eq!(out, [19.0, 22.0, 43.0, 50.0]);
}

#[test]
fn ikj_and_blocked_match_naive_on_awkward_sizes() {
    // Sizes that are not multiples of the tiles, k longer than one panel, and degenerate ones.
    let sizes = [
        (1, 1, 1),
        (3, 5, 7),
        (TILE_ROWS + 1, PANEL_K + 3, TILE_COLS + 1),
        (17, 2 * PANEL_K + 1, 33),
        (64, 64, 64),
        (2, 1, 100),
        (100, 3, 1),
    ];
    for (seed, &(m, k, n)) in sizes.iter().enumerate() {
        let a = random(m * k, 2 * seed as u64); // (m, k)
        let b = random(k * n, 2 * seed as u64 + 1); // (k, n)
        let mut want = vec![0.0; m * n]; // (m, n)
        ops::matmul_naive(&mut want, &a, &b, m, k, n);
        let mut got = vec![f32::NAN; m * n]; // NaN: proves every element is written
        ops::matmul_ikj(&mut got, &a, &b, m, k, n);
        assert_products_agree(&got, &want, &a, &b, (m, k, n), "i-k-j");
        got.fill(f32::NAN);
        ops::matmul_blocked(&mut got, &a, &b, m, k, n);
        assert_products_agree(&got, &want, &a, &b, (m, k, n), "blocked");
    }
}

#[test]
fn matmul_with_k_zero_is_all_zeros() {
    let mut out = vec![f32::NAN; 6];
    ops::matmul_blocked(&mut out, &[], &[], 2, 0, 3);
    assert_eq!(out, vec![0.0; 6], "an empty sum is 0");
}

#[test]
fn matmul_transb_equals_matmul_with_b_transposed() {
    let (m, k, n) = (5, 37, 11);
    let a = random(m * k, 10); // (m, k)
    let w = random(n * k, 11); // (n, k): the nn.Linear layout
    let wt = Tensor::from_vec(w.clone(), &[n, k])
        .unwrap()
        .transpose(0, 1)
        .contiguous()
        .to_vec(); // (k, n)
    let mut want = vec![0.0; m * n];
    ops::matmul_naive(&mut want, &a, &wt, m, k, n);
    let mut got = vec![0.0; m * n];
    ops::matmul_transb(&mut got, &a, &w, m, k, n);
    // Same terms, same order (p = 0..k) in both: the results are bit-identical.
    assert_eq!(got, want);
}

#[test]
fn matvec_equals_matmul_with_one_column() {
    let (rows, cols) = (13, 29);
    let w = random(rows * cols, 20); // (rows, cols)
    let x = random(cols, 21); // (cols,) — also a (cols, 1) matrix
    let mut want = vec![0.0; rows];
    ops::matmul_naive(&mut want, &w, &x, rows, cols, 1);
    let mut got = vec![0.0; rows];
    ops::matvec(&mut got, &w, &x);
    assert_eq!(
        got, want,
        "one dot product per row, summed in the same order"
    );
}

#[test]
fn dot_add_mul_by_hand() {
    assert_eq!(ops::dot(&[1.0, 2.0, 3.0], &[4.0, -5.0, 6.0]), 12.0);
    assert_eq!(ops::dot(&[], &[]), 0.0);
    let mut x = [1.0, 2.0, 3.0];
    ops::add_inplace(&mut x, &[10.0, 20.0, 30.0]);
    assert_eq!(x, [11.0, 22.0, 33.0]);
    ops::mul_inplace(&mut x, &[2.0, 0.5, -1.0]);
    assert_eq!(x, [22.0, 11.0, -33.0]);
}

#[test]
fn rmsnorm_by_hand() {
    // x = [3, 4]: mean(x²) = (9 + 16) / 2 = 12.5, rms = √12.5 = 3.5355339.
    // With weight [1, 2] and eps = 0: [3 / 3.5355339, 2 · 4 / 3.5355339] = [0.8485281, 2.2627417].
    let mut out = [0.0; 2];
    ops::rmsnorm(&mut out, &[3.0, 4.0], &[1.0, 2.0], 0.0);
    // 1e-6 relative: the f32 inputs are exact and the f64 sum is exact; only the final
    // rounding to f32 (about 6e-8 relative) separates the result from the true value.
    assert_relative_eq!(out[0], 0.848_528_1, max_relative = 1e-6);
    assert_relative_eq!(out[1], 2.262_741_7, max_relative = 1e-6);
    // eps keeps an all-zero row finite (0 / √eps = 0, not 0 / 0 = NaN).
    ops::rmsnorm(&mut out, &[0.0, 0.0], &[1.0, 1.0], 1e-5);
    assert_eq!(out, [0.0, 0.0]);
    // Scaling x does not change the normalized row (up to eps).
    let mut scaled = [0.0; 2];
    ops::rmsnorm(&mut scaled, &[300.0, 400.0], &[1.0, 2.0], 0.0);
    ops::rmsnorm(&mut out, &[3.0, 4.0], &[1.0, 2.0], 0.0);
    assert_relative_eq!(scaled[..], out[..], max_relative = 1e-6);
}

#[test]
fn softmax_by_hand() {
    // [0, ln 3]: e^0 = 1, e^(ln 3) = 3, so [1/4, 3/4].
    let mut x = [0.0, 3f32.ln()];
    ops::softmax_inplace(&mut x);
    // 1e-6: one exp, one sum and one division, each within an ulp or so (ε ≈ 1.2e-7).
    assert_abs_diff_eq!(x[..], [0.25, 0.75][..], epsilon = 1e-6);
    // [1, 2, 3] → [e^-2, e^-1, 1] / (e^-2 + e^-1 + 1) = [0.09003057, 0.24472847, 0.66524096]
    let mut y = [1.0, 2.0, 3.0];
    ops::softmax_inplace(&mut y);
    assert_abs_diff_eq!(
        y[..],
        [0.090_030_57, 0.244_728_47, 0.665_240_96][..],
        epsilon = 1e-6
    );
    assert_abs_diff_eq!(y.iter().sum::<f32>(), 1.0, epsilon = 1e-6);
}

#[test]
fn softmax_of_large_scores_does_not_overflow() {
    // e^1000 is infinity in f32; the naive formula gives ∞/∞ = NaN. Shifted by the max,
    // this is softmax([-1, 0]) = [1/(1+e), e/(1+e)] = [0.26894142, 0.73105858].
    let mut x = [1000.0, 1001.0];
    ops::softmax_inplace(&mut x);
    assert!(
        x.iter().all(|v| v.is_finite()),
        "softmax([1000, 1001]) overflowed: {x:?}"
    );
    assert_abs_diff_eq!(x[..], [0.268_941_42, 0.731_058_6][..], epsilon = 1e-6);
    // Very negative scores do not underflow to 0/0 either.
    let mut y = [-1000.0, -1001.0];
    ops::softmax_inplace(&mut y);
    assert_abs_diff_eq!(y[..], [0.731_058_6, 0.268_941_42][..], epsilon = 1e-6);
    // A masked position (−∞) gets probability exactly 0.
    let mut z = [2.0, f32::NEG_INFINITY, 2.0];
    ops::softmax_inplace(&mut z);
    assert_eq!(z, [0.5, 0.0, 0.5]);
}

#[test]
fn softmax_of_rows_side_by_side_is_each_rows_softmax() {
    // every count of rows to nine (two passes of four and a rest), scores at several scales
    // with a masked one here and there: each row the bits of its own softmax_inplace
    for n in [1, 2, 7, 64, 301] {
        for rows in 1..=9 {
            let mut x: Vec<f32> = random(rows * n, (100 * n + rows) as u64)
                .into_iter()
                .enumerate()
                .map(|(i, v)| match i % 37 {
                    5 => f32::NEG_INFINITY,
                    _ => v * [1.0, 30.0, 1e-3][i % 3],
                })
                .collect();
            if rows > 1 {
                // a row whose largest values are zeros of both signs
                x[n..2 * n].iter_mut().for_each(|v| *v = -v.abs());
                x[n + n / 2] = -0.0;
                x[n + n / 3] = 0.0;
            }
            let mut want = x.clone();
            want.chunks_exact_mut(n).for_each(ops::softmax_inplace);
            ops::softmax_rows_with(&mut x, n, |x| x.iter_mut().for_each(|v| *v = v.exp()));
            for (i, (g, w)) in x.iter().zip(&want).enumerate() {
                assert_eq!(
                    g.to_bits(),
                    w.to_bits(),
                    "{rows} rows of {n}: value {i} is {g}, its row's own softmax gives {w}"
                );
            }
        }
    }
}

#[test]
fn silu_by_hand() {
    // silu(x) = x / (1 + e^-x): silu(1) = 1 / (1 + 1/e) = 0.7310586, silu(-1) = -0.26894143
    assert_eq!(ops::silu(0.0), 0.0);
    assert_abs_diff_eq!(ops::silu(1.0), 0.731_058_6, epsilon = 1e-6);
    assert_abs_diff_eq!(ops::silu(-1.0), -0.268_941_43, epsilon = 1e-6);
    assert_eq!(ops::silu(100.0), 100.0, "e^-100 vanishes next to 1");
    let far = ops::silu(-200.0); // e^200 overflows to ∞, and -200/∞ = -0: no NaN
    assert!(far == 0.0 && !far.is_nan());
    let mut v = [1.0, -1.0];
    ops::silu_inplace(&mut v);
    assert_eq!(v, [ops::silu(1.0), ops::silu(-1.0)]);
}
