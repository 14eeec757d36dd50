//! Rotary position embeddings (RoPE).
//!
//! Attention on its own has no idea of order: `q·k` is the same wherever the two tokens
//! sit. RoPE fixes that by rotating every query and key by an angle proportional to its
//! position, before the dot product. The head vector is cut into `head_dim / 2` pairs of
//! coordinates, and pair `i` spins at its own frequency `θ^(−2i/d)`: pair 0 turns one
//! radian per token, the last pair barely moves. Because a rotation by `m·ω` followed by
//! the inverse of a rotation by `n·ω` is a rotation by `(m−n)·ω`, the score between a
//! query at position `m` and a key at `n` depends only on `m − n`: relative position,
//! for free, with no learned parameters.
//!
//! Which two coordinates form "pair i" is a convention, and two are in use (see
//! [`Pairing`]); they describe the same model once the Q/K weight rows are permuted
//! ([`halves_to_adjacent`], [`permute_qk_rows`]).

use crate::Error;

// ANCHOR: pairing
/// Which two coordinates of a head vector RoPE rotates together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pairing {
    /// Pair `i` is `(x[2i], x[2i+1])`: the paper's and Meta's original layout, llama.cpp's
    /// "normal" rope, used with the (row-permuted) Q/K weights of GGUF Llama files.
    Adjacent,
    /// Pair `i` is `(x[i], x[i + d/2])`: Hugging Face's `rotate_half`, llama.cpp's "neox"
    /// rope, used with the weights as they ship in Hugging Face safetensors.
    SplitHalves,
}
// ANCHOR_END: pairing

impl Pairing {
    /// The indices `(a, b)` of pair `i` in a head vector of `head_dim` coordinates.
    pub fn pair(self, i: usize, head_dim: usize) -> (usize, usize) {
        match self {
            Pairing::Adjacent => (2 * i, 2 * i + 1),
            Pairing::SplitHalves => (i, i + head_dim / 2),
        }
    }
}

// ANCHOR: table
/// Precomputed `cos` and `sin` of every (position, pair) angle.
///
/// The angle of pair `i` at position `p` is `p · θ^(−2i/d)`. Computing `cos`/`sin` is
/// far slower than the rotation itself, so a model builds the table once.
#[derive(Clone, Debug)]
pub struct RopeTable {
    /// Coordinates per head, `d` (even).
    pub head_dim: usize,
    /// Positions `0..max_pos` are in the table.
    pub max_pos: usize,
    /// The base `θ` (10 000 for Llama 2, 100 000 for SmolLM2, 1 000 000 for Gemma-3's global layers).
    pub theta: f32,
    /// `cos(p · θ^(−2i/d))`, shape `(max_pos, head_dim / 2)`.
    pub cos: Vec<f32>,
    /// `sin(p · θ^(−2i/d))`, shape `(max_pos, head_dim / 2)`.
    pub sin: Vec<f32>,
}

impl RopeTable {
    /// Builds the table. Angles are computed in f64 and rounded once to f32, so the table
    /// is as exact as an f32 table can be even at position 100 000.
    pub fn new(head_dim: usize, max_pos: usize, theta: f32) -> Result<RopeTable, Error> {
        if head_dim == 0 || !head_dim.is_multiple_of(2) {
            return Err(Error::Config(format!(
                "RoPE needs an even head_dim, got {head_dim}"
            )));
        }
        if !(theta > 1.0 && theta.is_finite()) {
            return Err(Error::Config(format!(
                "RoPE base θ must be > 1, got {theta}"
            )));
        }
        let half = head_dim / 2;
        let mut cos = vec![0.0f32; max_pos * half]; // (max_pos, half)
        let mut sin = vec![0.0f32; max_pos * half]; // (max_pos, half)
        for p in 0..max_pos {
            for i in 0..half {
                let angle = p as f64 * Self::frequency_of(i, head_dim, theta);
                cos[p * half + i] = angle.cos() as f32;
                sin[p * half + i] = angle.sin() as f32;
            }
        }
        Ok(RopeTable {
            head_dim,
            max_pos,
            theta,
            cos,
            sin,
        })
    }

    /// Radians per position of pair `i`: `θ^(−2i/d)`.
    pub fn frequency_of(i: usize, head_dim: usize, theta: f32) -> f64 {
        (theta as f64).powf(-2.0 * i as f64 / head_dim as f64)
    }
}
// ANCHOR_END: table

impl RopeTable {
    // ANCHOR: rotate
    /// Rotates one head vector `x` (`head_dim`) to position `pos`, in place.
    pub fn rotate(&self, x: &mut [f32], pos: usize, pairing: Pairing) {
        let d = self.head_dim;
        assert_eq!(x.len(), d, "rotate takes one head vector of {d} values");
        assert!(
            pos < self.max_pos,
            "position {pos} is past the table ({})",
            self.max_pos
        );
        let half = d / 2;
        let cos = &self.cos[pos * half..(pos + 1) * half]; // (half)
        let sin = &self.sin[pos * half..(pos + 1) * half]; // (half)
        for i in 0..half {
            let (a, b) = pairing.pair(i, d);
            let (xa, xb) = (x[a], x[b]);
            // The 2-D rotation of the point (xa, xb) by the angle of pair i.
            x[a] = xa * cos[i] - xb * sin[i];
            x[b] = xa * sin[i] + xb * cos[i];
        }
    }
    // ANCHOR_END: rotate

    // ANCHOR: apply
    /// Rotates every head of every row of `x` (`(seq, n_heads * head_dim)`, the layout of
    /// a Q or K projection) in place; row `t` is the token at position `pos0 + t`.
    pub fn apply(&self, x: &mut [f32], n_heads: usize, pos0: usize, pairing: Pairing) {
        let row_len = n_heads * self.head_dim;
        assert_eq!(
            x.len() % row_len,
            0,
            "x is not (seq, {n_heads} * {})",
            self.head_dim
        );
        for (t, row) in x.chunks_exact_mut(row_len).enumerate() {
            for head in row.chunks_exact_mut(self.head_dim) {
                self.rotate(head, pos0 + t, pairing);
            }
        }
    }
    // ANCHOR_END: apply
}

// ANCHOR: permute
/// Reorders each `head_dim` chunk of `x` from split-halves order to adjacent-pairs order:
/// `out[2i] = x[i]`, `out[2i+1] = x[i + d/2]`. Pair `i` of one layout lands on pair `i` of
/// the other, so `rotate(Adjacent)` of the permuted vector equals the permuted
/// `rotate(SplitHalves)`, and since both q and k are permuted alike, every `q·k` is unchanged.
pub fn halves_to_adjacent(x: &[f32], head_dim: usize) -> Vec<f32> {
    assert_eq!(x.len() % head_dim, 0, "x is not a whole number of heads");
    let half = head_dim / 2;
    let mut out = vec![0.0f32; x.len()];
    for (src, dst) in x.chunks_exact(head_dim).zip(out.chunks_exact_mut(head_dim)) {
        for i in 0..half {
            dst[2 * i] = src[i];
            dst[2 * i + 1] = src[i + half];
        }
    }
    out
}

/// The same permutation applied to the rows of a Q or K projection weight
/// `w` (`(n_heads * head_dim, cols)`), which is what a Hugging Face → GGUF converter does
/// so that llama.cpp can use adjacent-pairs RoPE on the result.
pub fn permute_qk_rows(w: &[f32], n_heads: usize, head_dim: usize, cols: usize) -> Vec<f32> {
    assert_eq!(
        w.len(),
        n_heads * head_dim * cols,
        "w is not ({n_heads} * {head_dim}, {cols})"
    );
    let half = head_dim / 2;
    let mut out = vec![0.0f32; w.len()]; // (n_heads * head_dim, cols)
    for h in 0..n_heads {
        for i in 0..half {
            for (new, old) in [(2 * i, i), (2 * i + 1, i + half)] {
                let src = (h * head_dim + old) * cols;
                let dst = (h * head_dim + new) * cols;
                out[dst..dst + cols].copy_from_slice(&w[src..src + cols]);
            }
        }
    }
    out
}
// ANCHOR_END: permute
