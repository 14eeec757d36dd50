//! Elementwise kernels on slices: residual adds, gating multiplies, SiLU.

/// `x[i] += y[i]` — a residual connection adds a block's output back onto its input.
///
/// # Panics
/// If the lengths differ.
pub fn add_inplace(x: &mut [f32], y: &[f32]) {
    assert_eq!(
        x.len(),
        y.len(),
        "add_inplace of slices with different lengths"
    );
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// `x[i] *= y[i]` — the gate in a SwiGLU feed-forward block.
///
/// # Panics
/// If the lengths differ.
pub fn mul_inplace(x: &mut [f32], y: &[f32]) {
    assert_eq!(
        x.len(),
        y.len(),
        "mul_inplace of slices with different lengths"
    );
    for (a, b) in x.iter_mut().zip(y) {
        *a *= b;
    }
}

// ANCHOR: silu
/// SiLU (also called swish): `x · σ(x) = x / (1 + e^(−x))`. Close to `x` for large
/// positive `x`, close to 0 for large negative `x`, smooth in between.
/// For very negative `x`, `e^(−x)` overflows to infinity and `x / ∞` is −0: the right limit.
pub fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}
// ANCHOR_END: silu

/// `x[i] = silu(x[i])`.
pub fn silu_inplace(x: &mut [f32]) {
    for v in x {
        *v = silu(*v);
    }
}
