//! Solutions to the chapter 3 exercises: the same file as `src/exercises.rs` with the
//! bodies filled in. Compiled in place of the stubs with `--features solutions`.

use crate::attention::Heads;

/// Exercise 1: the causal mask.
///
/// Build the additive causal mask for `seq` tokens: a row-major `(seq, seq)` matrix where
/// row `i` (the query) and column `j` (the key) hold `0.0` when token `i` may look at
/// token `j`, that is when `j <= i`, and `f32::NEG_INFINITY` when `j` is in its future.
/// Added to the attention scores before the softmax, the `−∞` entries become weight 0.
///
/// Hint: two nested loops over `i` and `j`; start from `vec![0.0; seq * seq]` and write
/// `−∞` above the diagonal. Element `(i, j)` lives at index `i * seq + j`.
pub fn causal_mask(seq: usize) -> Vec<f32> {
    let mut m = vec![0.0f32; seq * seq]; // (seq, seq)
    for i in 0..seq {
        for j in i + 1..seq {
            m[i * seq + j] = f32::NEG_INFINITY;
        }
    }
    m
}

/// Exercise 2: the sliding-window mask.
///
/// Gemma-3's local layers let a token see only the last `window` positions, itself
/// included. Return whether the query at position `q_pos` may look at the key at
/// `k_pos`: never a future key, and never one `window` or more positions back.
/// With `window = 3`, the query at position 5 sees keys 3, 4 and 5.
///
/// Hint: two conditions, both needed: `k_pos <= q_pos`, and the distance `q_pos - k_pos`
/// is smaller than `window`. Check the first before subtracting (these are `usize`).
pub fn sliding_window_allowed(q_pos: usize, k_pos: usize, window: usize) -> bool {
    k_pos <= q_pos && q_pos - k_pos < window
}

/// Exercise 3: RoPE on one vector.
///
/// Rotate one head vector `x` (length `d`, even) to position `pos` with the split-halves
/// pairing Hugging Face uses: pair `i` (for `i` in `0..d/2`) is `(x[i], x[i + d/2])`, and
/// it turns by the angle `pos · θ^(−2i/d)`, with `θ = theta`. Rotating the point `(a, b)`
/// by an angle `φ` gives `(a·cos φ − b·sin φ, a·sin φ + b·cos φ)`. Work in place, without
/// a precomputed table.
///
/// Hint: compute the angle in f64 (`(theta as f64).powf(-2.0 * i as f64 / d as f64) *
/// pos as f64`) and read both coordinates of a pair before writing either.
pub fn rope_split_halves(x: &mut [f32], pos: usize, theta: f32) {
    let d = x.len();
    let half = d / 2;
    for i in 0..half {
        let angle = (theta as f64).powf(-2.0 * i as f64 / d as f64) * pos as f64;
        let (cos, sin) = (angle.cos() as f32, angle.sin() as f32);
        let (a, b) = (x[i], x[i + half]);
        x[i] = a * cos - b * sin;
        x[i + half] = a * sin + b * cos;
    }
}

/// Exercise 4: one decode step of grouped-query attention.
///
/// A single new token attends over `seq_k` cached tokens, all visible (it is the newest).
/// `q` is `(n_heads * head_dim)`, `k` and `v` are `(seq_k, n_kv_heads * head_dim)`, and
/// `out` is `(n_heads * head_dim)`. Query head `h` reads KV head
/// `h / (n_heads / n_kv_heads)`: with SmolLM2's 9 query heads over 3 KV heads, heads 0–2
/// read KV head 0, heads 3–5 KV head 1, heads 6–8 KV head 2. Do not copy K or V.
/// For each head: scores `s_j = q_h · k_j / √head_dim`, weights `softmax(s)`, and
/// `out_h = Σ_j w_j · v_j`.
///
/// Hint: the slice of KV head `g` in row `j` of `k` starts at
/// `j * n_kv_heads * head_dim + g * head_dim`. `ch01_tensors::ops::dot` and
/// `ch01_tensors::ops::softmax_inplace` do the arithmetic.
pub fn decode_step(out: &mut [f32], q: &[f32], k: &[f32], v: &[f32], heads: Heads) {
    let (d, kv_dim) = (heads.head_dim, heads.n_kv_heads * heads.head_dim);
    let seq_k = k.len() / kv_dim;
    let group = heads.n_heads / heads.n_kv_heads;
    let scale = 1.0 / (d as f32).sqrt();
    let mut w = vec![0.0f32; seq_k]; // (seq_k)
    for h in 0..heads.n_heads {
        let g = h / group; // the KV head this query head shares
        let q_h = &q[h * d..(h + 1) * d]; // (head_dim)
        for (j, w_j) in w.iter_mut().enumerate() {
            let k_j = &k[j * kv_dim + g * d..j * kv_dim + (g + 1) * d]; // (head_dim)
            *w_j = ch01_tensors::ops::dot(q_h, k_j) * scale;
        }
        ch01_tensors::ops::softmax_inplace(&mut w);
        let o = &mut out[h * d..(h + 1) * d]; // (head_dim)
        o.fill(0.0);
        for (j, &w_j) in w.iter().enumerate() {
            let v_j = &v[j * kv_dim + g * d..j * kv_dim + (g + 1) * d]; // (head_dim)
            for (o_c, &v_c) in o.iter_mut().zip(v_j) {
                *o_c += w_j * v_c;
            }
        }
    }
}

/// Exercise 5: online softmax.
///
/// Return `(m, l)` for the scores `x` in a single pass: `m` the maximum and
/// `l = Σ exp(x_j − m)`, the denominator of the stable softmax. Keep a running max and a
/// running sum; when a new score `s` beats the running max, the sum so far was measured
/// against the old max and must be multiplied by `exp(m_old − s)` first. Must not
/// overflow for scores like 1000.0. For an empty `x`, return `(f32::NEG_INFINITY, 0.0)`.
///
/// Hint: start from `m = f32::NEG_INFINITY, l = 0.0`; `exp(−∞) = 0`, so the first score
/// needs no special case.
pub fn online_max_sum(x: &[f32]) -> (f32, f32) {
    let (mut m, mut l) = (f32::NEG_INFINITY, 0.0f32);
    for &s in x {
        if s > m {
            l *= (m - s).exp(); // the old sum, re-measured against the new max
            m = s;
        }
        l += (s - m).exp();
    }
    (m, l)
}
