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
