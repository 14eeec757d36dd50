//! Four tokens' activations interleaved for the AVX-512 VNNI prefill kernels of
//! `kernels/avx512_quads_q4_1_q5_0_q4_k.rs` (`LLM_BOOK_PREFILL=quads`): one 32-bit lane follows one (block, token)
//! pair, so a block's integer dot is never summed across lanes. The eight-token layout of
//! [`crate::layout::eights`] is the default; this one stays for comparison.

use ch06_quantization::blocks::BlockQ8_1;
use ch06_quantization::f16::f16_to_f32_fast as f16;

use super::kquant::*;

// ANCHOR: quads
/// Four tokens' Q8_0 (or Q8_1) activations interleaved for a prefill kernel that keeps one
/// (block, token) pair in each 32-bit lane: for every group of four blocks and every step
/// `s` of the eight four-byte steps of a block, 64 bytes holding, for each block `b` of the
/// group and each token `t`, the four quants `4s..4s + 4` of token `t`'s block `b`, in the
/// order (b, t). One `vpdpbusd` per step then adds four products to each of sixteen block
/// sums at once, and after eight steps every lane holds a whole block's integer dot product
/// without a horizontal add. Built once per matrix product, shared by every weight row.
pub struct ActQuads {
    /// `(groups, 8 steps, 4 blocks, 4 tokens, 4 bytes)`.
    pub qs: Vec<[i8; 512]>,
    /// `(groups, 4 blocks, 4 tokens)`: each block's scale.
    pub d: Vec<[f32; 16]>,
    /// `(groups, 4 blocks, 4 tokens)`: `16 · Σ qs` of each block (Q5_0's offset, taken out).
    pub sum16: Vec<[i32; 16]>,
    /// `(groups, 4 blocks, 4 tokens)`: Q8_1's `s = d · Σ qs` (for Q4_1's minimum); 0 for Q8_0.
    pub s: Vec<[f32; 16]>,
}
// ANCHOR_END: quads

// ANCHOR: quads_build
impl ActQuads {
    /// The whole groups of four blocks of four tokens' activations (the blocks after the last
    /// whole group are left to the caller).
    pub fn new(a: [&[Q8_0Wide]; 4]) -> ActQuads {
        ActQuads::build(a[0].len(), |t, i| {
            let b = &a[t][i];
            (&b.qs, b.d, 16 * b.sum, 0.0)
        })
    }

    /// The same for Q8_1 activations (Q4_1's).
    pub fn from_q8_1(a: [&[BlockQ8_1]; 4]) -> ActQuads {
        ActQuads::build(a[0].len(), |t, i| {
            let b = &a[t][i];
            (&b.qs, f16(b.d), 0, f16(b.s))
        })
    }

    /// From `block(t, i)`: token `t`'s block `i` as (quants, d, sum16, s).
    fn build<'a>(
        blocks: usize,
        block: impl Fn(usize, usize) -> (&'a [i8; 32], f32, i32, f32),
    ) -> ActQuads {
        let groups = blocks / 4;
        let mut out = ActQuads {
            qs: vec![[0; 512]; groups],
            d: vec![[0.0; 16]; groups],
            sum16: vec![[0; 16]; groups],
            s: vec![[0.0; 16]; groups],
        };
        for g in 0..groups {
            for b in 0..4 {
                for t in 0..4 {
                    let (qs, d, sum16, s) = block(t, 4 * g + b);
                    let lane = 4 * b + t;
                    (out.d[g][lane], out.sum16[g][lane], out.s[g][lane]) = (d, sum16, s);
                    for step in 0..8 {
                        let at = 64 * step + 4 * lane;
                        out.qs[g][at..at + 4].copy_from_slice(&qs[4 * step..4 * step + 4]);
                    }
                }
            }
        }
        out
    }
}
// ANCHOR_END: quads_build

/// Four tokens' Q8_K activations interleaved as [`ActQuads`] does for Q8_0, for Q4_K rows:
/// for every group of four super-blocks, every sub-block `s` of 32 and every four-byte step
/// `k` of it, 64 bytes holding quants `32s + 4k .. + 4` of each (block, token) pair.
pub struct KQuads {
    /// `(groups, 8 sub-blocks, 8 steps, 4 blocks, 4 tokens, 4 bytes)`.
    pub qs: Vec<[i8; 4096]>,
    /// `(groups, 4 blocks, 4 tokens)`: each super-block's scale.
    pub d: Vec<[f32; 16]>,
    /// `(groups, 8 sub-blocks, 4 blocks, 4 tokens)`: the sum of each sub-block's 32 quants
    /// (for Q4_K's mins).
    pub sums: Vec<[[i32; 16]; 8]>,
}

impl KQuads {
    /// The whole groups of four super-blocks of four tokens' activations.
    pub fn new(a: [&[BlockQ8K]; 4]) -> KQuads {
        let groups = a[0].len() / 4;
        let mut out = KQuads {
            qs: vec![[0; 4096]; groups],
            d: vec![[0.0; 16]; groups],
            sums: vec![[[0; 16]; 8]; groups],
        };
        for g in 0..groups {
            for b in 0..4 {
                for (t, a) in a.iter().enumerate() {
                    let blk = &a[4 * g + b];
                    let lane = 4 * b + t;
                    out.d[g][lane] = blk.d;
                    for sub in 0..8 {
                        out.sums[g][sub][lane] =
                            i32::from(blk.bsums[2 * sub]) + i32::from(blk.bsums[2 * sub + 1]);
                        for k in 0..8 {
                            let at = ((sub * 8 + k) * 16 + lane) * 4;
                            let from = 32 * sub + 4 * k;
                            out.qs[g][at..at + 4].copy_from_slice(&blk.qs[from..from + 4]);
                        }
                    }
                }
            }
        }
        out
    }
}
