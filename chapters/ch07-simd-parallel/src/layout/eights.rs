//! Eight tokens against one weight row, for a prefill of 32-value blocks (Q4_0, Q4_1 and
//! Q5_0) on a CPU without VNNI (and, for Q4_0, on every SIMD level): the layouts the AVX2 kernel reads, and its scalar twin.
//!
//! The interleaved kernels of [`crate::layout::quads::ActQuads`] put (block, token) pairs in the
//! lanes, so every step must first shuffle each block's weights into its lanes. Here a
//! 256-bit register's eight lanes are eight *tokens* of one block: the weight block's four
//! quants of a step are the same for every lane, one broadcast load from a row unpacked
//! beforehand ([`Rows32`]), and the activations are laid out so that a step's eight
//! tokens are 32 consecutive bytes ([`Eights`]). A step is then a load, a broadcast and
//! one `vpmaddubsw`; after a block's eight steps each lane holds its token's exact integer
//! dot, and the block's term is added to each token's sum in block order, eight tokens at
//! once. The unpacking is done once per row for all the tokens of a thread's band.
//!
//! ```text
//! Eights, per block:  step 0: t0 q0..4 │ t1 q0..4 │ … │ t7 q0..4   (32 bytes)
//!                      step 1: t0 q4..8 │ t1 q4..8 │ … │ t7 q4..8
//!                      …       (8 steps: 256 bytes), then d, 16·Σq and s of each token
//! Rows32, per block:   q0 q1 … q31 (unsigned bytes) and d (and m) as f32
//! ```

use ch06_quantization::blocks::{BlockQ8_0, BlockQ8_1};
use ch06_quantization::f16::f16_to_f32_fast as f16;
use ch06_quantization::matrix::Q32;

use crate::layout::kquant::Q8_0Wide;

// ANCHOR: eights
/// Eight tokens' Q8_0 (or Q8_1) activations for every block of a row, interleaved: per
/// block, eight steps of 32 bytes, step `s` holding quants `4s..4s + 4` of each token.
pub struct Eights {
    /// `(blocks, 8 steps, 8 tokens, 4 bytes)`.
    pub qs: Vec<[i8; 256]>,
    /// `(blocks, 8 tokens)`: each block's scale.
    pub d: Vec<[f32; 8]>,
    /// `(blocks, 8 tokens)`: `o · Σ qs`, where `o` is the weight format's offset that the
    /// kernel takes out at the end (16 for Q5_0, 8 for Q4_0; 0 for Q4_1).
    pub offset: Vec<[i32; 8]>,
    /// `(blocks, 8 tokens)`: Q8_1's `s = d · Σ qs` (for Q4_1's minimum); 0 for Q8_0.
    pub s: Vec<[f32; 8]>,
}
// ANCHOR_END: eights

// ANCHOR: eights_build
impl Eights {
    /// Eight tokens' Q8_0 activations for Q4_0 weights (chapter 6's blocks).
    pub fn from_q8_0_blocks(a: [&[BlockQ8_0]; 8]) -> Eights {
        Eights::build(a[0].len(), |t, i| {
            let b = &a[t][i];
            let sum: i32 = b.qs.iter().map(|&q| i32::from(q)).sum();
            (&b.qs, f16(b.d), 8 * sum, 0.0)
        })
    }

    /// [`Eights::from_q8_0_blocks`] with each block's `Σ qs` given (`sums`, one a block, as
    /// a packed Q4_0 matrix's activations keep them): the same interleaving.
    pub fn from_q8_0_sums(a: [&[BlockQ8_0]; 8], sums: [&[i32]; 8]) -> Eights {
        Eights::build(a[0].len(), |t, i| {
            (&a[t][i].qs, f16(a[t][i].d), 8 * sums[t][i], 0.0)
        })
    }

    /// Eight tokens' Q8_0 activations (Q5_0's).
    pub fn from_q8_0(a: [&[Q8_0Wide]; 8]) -> Eights {
        Eights::build(a[0].len(), |t, i| {
            let b = &a[t][i];
            (&b.qs, b.d, 16 * b.sum, 0.0)
        })
    }

    /// Eight tokens' Q8_1 activations (Q4_1's).
    pub fn from_q8_1(a: [&[BlockQ8_1]; 8]) -> Eights {
        Eights::build(a[0].len(), |t, i| {
            let b = &a[t][i];
            (&b.qs, f16(b.d), 0, f16(b.s))
        })
    }

    /// From `block(t, i)`: token `t`'s block `i` as (quants, d, offset, s).
    fn build<'a>(
        blocks: usize,
        block: impl Fn(usize, usize) -> (&'a [i8; 32], f32, i32, f32),
    ) -> Eights {
        let mut out = Eights {
            qs: vec![[0; 256]; blocks],
            d: vec![[0.0; 8]; blocks],
            offset: vec![[0; 8]; blocks],
            s: vec![[0.0; 8]; blocks],
        };
        for i in 0..blocks {
            for t in 0..8 {
                let (qs, d, offset, s) = block(t, i);
                (out.d[i][t], out.offset[i][t], out.s[i][t]) = (d, offset, s);
                for step in 0..8 {
                    let at = 32 * step + 4 * t;
                    out.qs[i][at..at + 4].copy_from_slice(&qs[4 * step..4 * step + 4]);
                }
            }
        }
        out
    }
}
// ANCHOR_END: eights_build

/// Rows of a matrix unpacked for an eight-token kernel: one `B` per block, row after row
/// ([`Block32`] here, [`crate::layout::eights_k::BlockK`] for the K-quants).
pub struct Rows<B> {
    /// Blocks per row.
    pub blocks: usize,
    /// `(rows, blocks)`.
    pub data: Vec<B>,
}

impl<B> Default for Rows<B> {
    fn default() -> Self {
        Rows {
            blocks: 0,
            data: Vec::new(),
        }
    }
}

impl<B> Rows<B> {
    /// Unpacks `rows` (each whole blocks of `bytes`), replacing what was here, each block
    /// by `block` (a scalar unpacker or its SIMD twin).
    pub fn unpack(&mut self, bytes: usize, rows: &[&[u8]], block: impl Fn(&[u8]) -> B) {
        self.data.clear();
        for w in rows {
            let blocks = w.chunks_exact(bytes);
            self.blocks = blocks.len();
            self.data.extend(blocks.map(&block));
        }
    }

    /// Row `i`'s blocks.
    pub fn row(&self, i: usize) -> &[B] {
        &self.data[i * self.blocks..(i + 1) * self.blocks]
    }
}

/// A Q4_0, Q5_0 or Q4_1 block unpacked: its 32 quants as unsigned bytes in element order
/// (Q5_0's in 0..32, before its offset of 16 is taken out; Q4_0's in 0..16, before its
/// offset of 8; Q4_1's in 0..16), its scale `d` and, for Q4_1, its minimum `m` (0 for the
/// others), as f32: 40 bytes.
#[derive(Clone, Copy)]
pub struct Block32 {
    pub q: [u8; 32],
    pub d: f32,
    pub m: f32,
}

/// Rows of Q4_0, Q5_0 or Q4_1 unpacked.
pub type Rows32 = Rows<Block32>;

/// One block of `format` unpacked.
pub fn unpack_block(format: Q32, b: &[u8]) -> Block32 {
    let (nib, qh, m) = match format {
        Q32::Q4_0 => (&b[2..18], 0, 0.0),
        Q32::Q5_0 => (&b[6..22], u32::from_le_bytes([b[2], b[3], b[4], b[5]]), 0.0),
        Q32::Q4_1 => (&b[4..20], 0, f16(u16::from_le_bytes([b[2], b[3]]))),
    };
    let q = std::array::from_fn(|j| {
        let n = if j < 16 {
            nib[j] & 0x0f
        } else {
            nib[j - 16] >> 4
        };
        n | ((((qh >> j) & 1) as u8) << 4)
    });
    let d = f16(u16::from_le_bytes([b[0], b[1]]));
    Block32 { q, d, m }
}

/// The scalar twin of the eight-token kernel: one unpacked row against eight tokens, each
/// token's sum exactly the scalar kernel's (chapter 6's `dot_q4_0_q8_0` and `dot_q4_1_q8_1`,
/// this chapter's `dot_q5_0_q8_0` block by block): the same integer dot per block, the same float
/// operations, added in block order.
pub fn dot8_row32(format: Q32, row: &[Block32], a: &Eights) -> [f32; 8] {
    assert_eq!(
        row.len(),
        a.qs.len(),
        "one activation block per weight block"
    );
    let mut acc = [0.0f32; 8];
    for (b, Block32 { q, d, m }) in row.iter().enumerate() {
        for (t, acc) in acc.iter_mut().enumerate() {
            let dot: i32 = (0..32)
                .map(|j| i32::from(q[j]) * i32::from(a.qs[b][32 * (j / 4) + 4 * t + j % 4]))
                .sum();
            *acc += match format {
                Q32::Q4_0 | Q32::Q5_0 => d * a.d[b][t] * (dot - a.offset[b][t]) as f32,
                Q32::Q4_1 => (d * a.d[b][t]) * dot as f32 + m * a.s[b][t],
            };
        }
    }
    acc
}
