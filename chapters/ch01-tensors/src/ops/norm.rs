//! Row-wise kernels: RMSNorm, which rescales a hidden state, and softmax, which turns
//! scores into probabilities. Both take one row; callers loop over rows.

// ANCHOR: rmsnorm
/// RMSNorm of one row: `out[i] = x[i] / rms(x) · weight[i]`, where
/// `rms(x) = √(mean(x²) + eps)`.
///
/// It rescales the row to unit root-mean-square and then lets a learned `weight` set the
/// scale of each feature. Unlike LayerNorm it does not subtract the mean. `eps` (1e-5 in
/// SmolLM2's config) keeps an all-zero row from dividing by zero. The mean of squares is
/// summed in f64: a row of thousands of squares is exactly where f32 rounding piles up. It
/// is summed four ways at once, each square into the running sum of its place modulo four:
/// with one running sum each addition waits for the one before (the 61 norms of a SmolLM2
/// decode step took 2% of it that way), and four fill a vector register.
///
/// # Panics
/// If `out`, `x` and `weight` differ in length.
pub fn rmsnorm(out: &mut [f32], x: &[f32], weight: &[f32], eps: f32) {
    assert_eq!(out.len(), x.len(), "rmsnorm: out and x differ in length");
    assert_eq!(
        weight.len(),
        x.len(),
        "rmsnorm: weight and x differ in length"
    );
    let (fours, rest) = x.as_chunks::<4>();
    let mut sums = [0.0f64; 4];
    for four in fours {
        for (s, &v) in sums.iter_mut().zip(four) {
            *s += f64::from(v) * f64::from(v);
        }
    }
    let rest: f64 = rest.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
    let sum_sq = (sums[0] + sums[1]) + (sums[2] + sums[3]) + rest;
    let mean_sq = sum_sq / x.len().max(1) as f64;
    let scale = 1.0 / (mean_sq + f64::from(eps)).sqrt();
    for ((o, &v), &w) in out.iter_mut().zip(x).zip(weight) {
        *o = (f64::from(v) * scale) as f32 * w;
    }
}
// ANCHOR_END: rmsnorm

// ANCHOR: softmax
/// Softmax of one row, in place: `x[i] = e^(x[i]) / Σ e^(x[j])`.
///
/// Numerically stable: subtract the row's maximum first. Mathematically nothing changes —
/// `e^(x−c) / Σ e^(x−c)` is the same fraction for any `c` — but in f32, `e^x` overflows to
/// infinity once `x > 88.7`, and `∞ / ∞` is NaN. Attention scores and logits easily get
/// that large. After subtracting the max, every exponent is ≤ 0, so every `e^…` is in
/// (0, 1], the largest is exactly 1, and the sum is between 1 and `len`: no overflow, and
/// no division by zero. An empty row is left alone; a row that is all −∞ (every position
/// masked) has no softmax and comes out NaN.
pub fn softmax_inplace(x: &mut [f32]) {
    softmax_with(x, |x| x.iter_mut().for_each(|v| *v = v.exp()));
}

/// [`softmax_inplace`] with its exponentials taken by `exp`, which must set every value to
/// its `f32::exp`, bit for bit: chapter 7's kernels pass one that does several at a time.
pub fn softmax_with(x: &mut [f32], exp: impl FnOnce(&mut [f32])) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    for v in x.iter_mut() {
        *v -= max;
    }
    exp(x);
    // The sum in a loop of its own, in order: beside a call to `exp`, which may overwrite
    // every vector register, a running sum would go to memory and back around each call,
    // and each addition would wait for that.
    let mut sum = 0.0;
    for &v in x.iter() {
        sum += v;
    }
    for v in x.iter_mut() {
        *v /= sum;
    }
}
// ANCHOR_END: softmax

// ANCHOR: softmax_rows
/// [`softmax_with`] of each row of `n` values in `x` (rows one after the other), bit for
/// bit, with the rows' sums taken side by side, up to four at a time. Each sum is still its
/// own row's values added in order, so it is the same number; but one row's sum is a chain
/// of additions, each waiting for the one before (four cycles or so on a modern core), and
/// four chains that do not wait for each other advance together. Attention's scores for
/// the query heads that share a key head are such rows.
#[inline]
pub fn softmax_rows_with(x: &mut [f32], n: usize, exp: impl FnOnce(&mut [f32])) {
    if n == 0 {
        return;
    }
    assert!(
        x.len().is_multiple_of(n),
        "softmax_rows: {} values are not rows of {n}",
        x.len()
    );
    for row in x.chunks_exact_mut(n) {
        let max = max_by_lanes(row);
        row.iter_mut().for_each(|v| *v -= max);
    }
    exp(x); // value by value: one call for every row
    for rows in x.chunks_mut(4 * n) {
        let sums = match rows.len() / n {
            4 => sums_side_by_side::<4>(rows, n),
            3 => sums_side_by_side::<3>(rows, n),
            2 => sums_side_by_side::<2>(rows, n),
            _ => sums_side_by_side::<1>(rows, n),
        };
        for (row, sum) in rows.chunks_exact_mut(n).zip(sums) {
            row.iter_mut().for_each(|v| *v /= sum);
        }
    }
}

/// The largest value of `row` (NaNs passed over, as `f32::max` does), sixteen running
/// maxima side by side: a maximum is exact in any order, so this is `softmax_with`'s value
/// (but for the sign of a zero, which `x − max` then `e^…` cannot tell).
#[inline]
fn max_by_lanes(row: &[f32]) -> f32 {
    let (sixteens, tail) = row.as_chunks::<16>();
    let mut lanes = [f32::NEG_INFINITY; 16];
    for s in sixteens {
        for (m, &v) in lanes.iter_mut().zip(s) {
            *m = m.max(v);
        }
    }
    lanes
        .iter()
        .chain(tail)
        .copied()
        .fold(f32::NEG_INFINITY, f32::max)
}

/// The sums of the `R` rows of `n` in `x` (in the first `R` of four), each in order from 0,
/// the rows side by side.
#[inline]
fn sums_side_by_side<const R: usize>(x: &[f32], n: usize) -> [f32; 4] {
    let rows: [&[f32]; R] = std::array::from_fn(|r| &x[r * n..(r + 1) * n]);
    let mut sums = [0.0f32; 4];
    for i in 0..n {
        for (sum, row) in sums.iter_mut().zip(&rows) {
            *sum += row[i];
        }
    }
    sums
}
// ANCHOR_END: softmax_rows
