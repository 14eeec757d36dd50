//! Chapter 3's RoPE table, filled a block of positions at a time as a run reaches them.
//!
//! A table for every position a model allows is large next to a small model: Gemma-3's two
//! tables for 8 192 positions of 128 pairs are 17 MB of cos and sin, and a 32-token prompt
//! reads 32 of their rows. llama.cpp keeps no table; it computes each rotation's angles as
//! it goes. We keep chapter 3's table, but cut it into blocks of [`BLOCK`] positions and
//! compute a block the first time a position in it is rotated: a run holds the blocks of
//! the positions it reached, each computed once, and the context limit stays what the file
//! says, since any block can still be filled.
//!
//! A block is chapter 3's [`RopeTable`] for positions `0..BLOCK`, with its angles computed
//! at `start + p` instead of `p` (the same f64 product, rounded once to f32), so a rotation
//! here is chapter 3's `rotate`, bit for bit. The blocks are [`OnceLock`]s, so a model
//! shared by threads (chapter 10's batches, chapter 11's server) fills each block once.
//!
//! Some families stretch the angles ([`RopeScaling`]): Llama 3 divides each pair's
//! frequency by a factor from the file, Phi-3 too and also scales cos and sin. Without
//! scaling every number is the one chapter 3 computes.

use std::sync::OnceLock;

use ch03_attention::{Error, Pairing, RopeTable};

/// Positions per block: Gemma-3's head of 256 makes a block 256 KB of cos and sin.
pub const BLOCK: usize = 256;

// ANCHOR: scaling
/// How a model stretches RoPE's angles, as llama.cpp's `ggml_rope_ext` takes it: the angle
/// of pair `i` at position `p` is `freq_scale · p · θ^(−2i/d) / factors[i]`, and its cos and
/// sin are multiplied by `mscale`.
#[derive(Clone, Debug, PartialEq)]
pub struct RopeScaling {
    /// Linear scaling: `1 / rope.scaling.factor` (1: none).
    pub freq_scale: f32,
    /// One factor per pair (`head_dim / 2`): Llama 3's `rope_freqs`, Phi-3's
    /// `rope_factors_long` or `_short`.
    pub factors: Option<Vec<f32>>,
    /// Phi-3's `rope.scaling.attn_factor` (1: none).
    pub mscale: f32,
}

impl RopeScaling {
    pub const NONE: RopeScaling = RopeScaling {
        freq_scale: 1.0,
        factors: None,
        mscale: 1.0,
    };

    /// Pair `i`'s frequency, `θ^(−2i/d)` (chapter 3's), stretched.
    pub fn frequency(&self, i: usize, head_dim: usize, theta: f32) -> f64 {
        let ff = self.factors.as_ref().map_or(1.0, |f| f64::from(f[i]));
        RopeTable::frequency_of(i, head_dim, theta) * f64::from(self.freq_scale) / ff
    }
}
// ANCHOR_END: scaling

/// RoPE for positions `0..max_pos`, computed a block at a time on first use.
#[derive(Debug)]
pub struct LazyRope {
    /// Coordinates per head, `d` (even).
    pub head_dim: usize,
    /// Positions `0..max_pos` can be rotated.
    pub max_pos: usize,
    /// The base `θ`.
    pub theta: f32,
    pub scaling: RopeScaling,
    blocks: Vec<OnceLock<RopeTable>>, // (max_pos / BLOCK, rounded up)
}

impl LazyRope {
    /// The rotations of `head_dim`-wide heads at positions `0..max_pos`, none computed yet.
    /// Checks `head_dim` and `theta` as chapter 3's table does.
    pub fn new(head_dim: usize, max_pos: usize, theta: f32) -> Result<LazyRope, Error> {
        LazyRope::scaled(head_dim, max_pos, theta, RopeScaling::NONE)
    }

    /// [`LazyRope::new`] with the angles stretched by `scaling`; its factors (if any) must be
    /// one a pair, each finite and positive, as its scales.
    pub fn scaled(
        head_dim: usize,
        max_pos: usize,
        theta: f32,
        scaling: RopeScaling,
    ) -> Result<LazyRope, Error> {
        RopeTable::new(head_dim, 0, theta)?; // an empty table: only the checks
        let bad = |what: String| Err(Error::Config(format!("RoPE scaling: {what}")));
        if let Some(f) = &scaling.factors {
            if f.len() != head_dim / 2 {
                return bad(format!("{} factors for {} pairs", f.len(), head_dim / 2));
            }
            if let Some(x) = f.iter().find(|x| !(x.is_finite() && **x > 0.0)) {
                return bad(format!("a factor of {x}"));
            }
        }
        for x in [scaling.freq_scale, scaling.mscale] {
            if !(x.is_finite() && x > 0.0) {
                return bad(format!("a scale of {x}"));
            }
        }
        Ok(LazyRope {
            head_dim,
            max_pos,
            theta,
            scaling,
            blocks: (0..max_pos.div_ceil(BLOCK))
                .map(|_| OnceLock::new())
                .collect(),
        })
    }

    /// Block `b`: chapter 3's table, for positions `b·BLOCK ..`.
    fn block(&self, b: usize) -> &RopeTable {
        self.blocks[b].get_or_init(|| {
            let half = self.head_dim / 2;
            let start = b * BLOCK;
            let mut cos = vec![0.0f32; BLOCK * half]; // (BLOCK, half)
            let mut sin = vec![0.0f32; BLOCK * half]; // (BLOCK, half)
            let freqs: Vec<f64> = (0..half)
                .map(|i| self.scaling.frequency(i, self.head_dim, self.theta))
                .collect(); // (half)
            let m = self.scaling.mscale;
            for p in 0..BLOCK {
                for (i, freq) in freqs.iter().enumerate() {
                    let angle = (start + p) as f64 * freq;
                    cos[p * half + i] = angle.cos() as f32 * m;
                    sin[p * half + i] = angle.sin() as f32 * m;
                }
            }
            RopeTable {
                head_dim: self.head_dim,
                max_pos: BLOCK,
                theta: self.theta,
                cos,
                sin,
            }
        })
    }

    /// Chapter 3's [`RopeTable::apply`]: rotates every head of every row of `x`
    /// (`(seq, n_heads * head_dim)`) in place, row `t` to position `pos0 + t`.
    pub fn apply(&self, x: &mut [f32], n_heads: usize, pos0: usize, pairing: Pairing) {
        let row_len = n_heads * self.head_dim;
        assert_eq!(
            x.len() % row_len,
            0,
            "x is not (seq, {n_heads} * {})",
            self.head_dim
        );
        for (t, row) in x.chunks_exact_mut(row_len).enumerate() {
            let pos = pos0 + t;
            assert!(
                pos < self.max_pos,
                "position {pos} is past the model's {} positions",
                self.max_pos
            );
            let block = self.block(pos / BLOCK);
            for head in row.chunks_exact_mut(self.head_dim) {
                block.rotate(head, pos % BLOCK, pairing);
            }
        }
    }

    /// Blocks computed so far.
    pub fn blocks_filled(&self) -> usize {
        self.blocks.iter().filter(|b| b.get().is_some()).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every position of a lazily filled table rotates exactly as chapter 3's whole table
    /// does, across block edges and in the last, partial block; and only the blocks used
    /// are computed.
    #[test]
    fn rotations_match_chapter_3s_whole_table_bit_for_bit() {
        let (d, max_pos, theta) = (16, 3 * BLOCK + 10, 1_000_000.0);
        let whole = RopeTable::new(d, max_pos, theta).unwrap();
        let lazy = LazyRope::new(d, max_pos, theta).unwrap();
        let x: Vec<f32> = (0..2 * d).map(|i| (i as f32 * 0.37).sin()).collect();
        for pos0 in [0, 5, BLOCK - 1, BLOCK, 2 * BLOCK + 100, max_pos - 2] {
            for pairing in [Pairing::Adjacent, Pairing::SplitHalves] {
                let (mut a, mut b) = (x.clone(), x.clone());
                whole.apply(&mut a, 1, pos0, pairing);
                lazy.apply(&mut b, 1, pos0, pairing);
                let same = a.iter().zip(&b).all(|(p, q)| p.to_bits() == q.to_bits());
                assert!(
                    same,
                    "positions {pos0}..{} ({pairing:?}) rotate differently from chapter 3's table",
                    pos0 + 2
                );
            }
        }
        assert_eq!(lazy.blocks_filled(), 4, "the four blocks used, no more");
        let unused = LazyRope::new(d, max_pos, theta).unwrap();
        assert_eq!(
            unused.blocks_filled(),
            0,
            "nothing is computed before it is used"
        );
    }

    /// Llama 3's `rope_freqs` divides each pair's frequency by its factor: with every factor
    /// 2, position 2p turns each pair as far as position p did without (bit for bit: halving
    /// is exact). Phi-3's `attn_factor` scales cos and sin: every rotated pair grows by it.
    #[test]
    fn factors_slow_the_rotation_and_attn_factor_scales_it() {
        let (d, theta) = (16, 10_000.0);
        let plain = LazyRope::new(d, 64, theta).unwrap();
        let twos = RopeScaling {
            factors: Some(vec![2.0; d / 2]),
            ..RopeScaling::NONE
        };
        let slowed = LazyRope::scaled(d, 64, theta, twos).unwrap();
        let x: Vec<f32> = (0..d).map(|i| (i as f32 * 0.61).cos()).collect();
        for p in [1, 5, 20] {
            let (mut a, mut b) = (x.clone(), x.clone());
            plain.apply(&mut a, 1, p, Pairing::SplitHalves);
            slowed.apply(&mut b, 1, 2 * p, Pairing::SplitHalves);
            assert_eq!(
                a,
                b,
                "factors of 2: position {} should turn as position {p}",
                2 * p
            );
        }
        let m = 1.25;
        let louder = RopeScaling {
            mscale: m,
            ..RopeScaling::NONE
        };
        let louder = LazyRope::scaled(d, 64, theta, louder).unwrap();
        let (mut a, mut b) = (x.clone(), x.clone());
        plain.apply(&mut a, 1, 7, Pairing::SplitHalves);
        louder.apply(&mut b, 1, 7, Pairing::SplitHalves);
        for (i, (p, q)) in a.iter().zip(&b).enumerate() {
            assert!(
                (q - m * p).abs() < 1e-5,
                "attn_factor {m}: coordinate {i} should be {m} × {p}, is {q}"
            );
        }
    }

    #[test]
    fn factors_that_do_not_fit_are_refused() {
        let with = |f: Vec<f32>| RopeScaling {
            factors: Some(f),
            ..RopeScaling::NONE
        };
        assert!(
            LazyRope::scaled(16, 8, 1e4, with(vec![1.0; 7])).is_err(),
            "7 factors for 8 pairs"
        );
        assert!(
            LazyRope::scaled(16, 8, 1e4, with(vec![0.0; 8])).is_err(),
            "a factor of 0"
        );
        assert!(
            LazyRope::scaled(16, 8, 1e4, with(vec![f32::NAN; 8])).is_err(),
            "a NaN factor"
        );
    }

    #[test]
    fn bad_heads_and_bases_are_refused_as_in_chapter_3() {
        assert!(LazyRope::new(63, 8, 10_000.0).is_err(), "an odd head_dim");
        assert!(LazyRope::new(64, 8, 1.0).is_err(), "a base of 1");
    }
}
