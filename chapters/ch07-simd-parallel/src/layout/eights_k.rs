//! The eight-token layouts of [`crate::layout::eights`] for the K-quants (Q4_K and Q6_K), and the
//! kernels' scalar twins: a super-block's 256 quants unpacked to bytes once per band, and
//! eight tokens' Q8_K activations interleaved so that one 32-bit lane follows one token.
//!
//! ```text
//! EightsK, per super-block: 64 steps of 32 bytes: step k holds quants 4k..4k + 4 of each
//!                         of the eight tokens; then d, and each token's sums of every
//!                         sub-block of 32 (Q4_K's mins) and every group of 16 (Q6_K's offset)
//! RowsK, per super-block: q0 … q255 unsigned (Q4_K 0..16, Q6_K 0..64); 16 scale bytes
//!                         (Q4_K: 8 scales, 8 mins; Q6_K: 16 signed scales); d (and dmin)
//! ```

use crate::layout::eights::Rows;
use crate::layout::kquant::{self, BlockQ8K, QK_K};
use ch06_quantization::f16::f16_to_f32_fast as f16;

/// Eight tokens' Q8_K activations for every super-block of a row, interleaved.
pub struct EightsK {
    /// `(blocks, 64 steps, 8 tokens, 4 bytes)`.
    pub qs: Vec<[i8; 2048]>,
    /// `(blocks, 8 tokens)`: each super-block's scale.
    pub d: Vec<[f32; 8]>,
    /// `(blocks, 8 sub-blocks, 8 tokens)`: the sum of each sub-block's 32 quants.
    pub sums: Vec<[[i32; 8]; 8]>,
    /// `(blocks, 16 groups, 8 tokens)`: the sum of each group's 16 quants.
    pub sums16: Vec<[[i32; 8]; 16]>,
}

impl EightsK {
    /// Eight tokens' activations, whole rows of super-blocks.
    pub fn new(a: [&[BlockQ8K]; 8]) -> EightsK {
        let blocks = a[0].len();
        let mut out = EightsK {
            qs: vec![[0; 2048]; blocks],
            d: vec![[0.0; 8]; blocks],
            sums: vec![[[0; 8]; 8]; blocks],
            sums16: vec![[[0; 8]; 16]; blocks],
        };
        for i in 0..blocks {
            for (t, a) in a.iter().enumerate() {
                let b = &a[i];
                out.d[i][t] = b.d;
                for s in 0..8 {
                    out.sums[i][s][t] = i32::from(b.bsums[2 * s]) + i32::from(b.bsums[2 * s + 1]);
                }
                for (g, q) in b.qs.chunks_exact(16).enumerate() {
                    out.sums16[i][g][t] = q.iter().map(|&q| i32::from(q)).sum();
                }
                for k in 0..QK_K / 4 {
                    let at = 32 * k + 4 * t;
                    out.qs[i][at..at + 4].copy_from_slice(&b.qs[4 * k..4 * k + 4]);
                }
            }
        }
        out
    }
}

/// A Q4_K or Q6_K super-block unpacked: its 256 quants in element order, its 16 scale
/// bytes (Q4_K: eight 6-bit scales, then eight mins; Q6_K: sixteen i8 scales), and `d`
/// and (Q4_K) `dmin` as f32: 280 bytes.
#[derive(Clone, Copy)]
pub struct BlockK {
    pub q: [u8; QK_K],
    pub sm: [u8; 16],
    pub d: [f32; 2],
}

/// Q4_K or Q6_K rows unpacked.
pub type RowsK = Rows<BlockK>;

/// One Q4_K block unpacked (the rules of [`kquant::dequantize_q4_k`]).
pub fn unpack_q4_k(b: &[u8]) -> BlockK {
    let q = std::array::from_fn(|l| kquant::q4_k_quant(&b[16..144], l));
    let mut sm = [0u8; 16];
    for j in 0..8 {
        (sm[j], sm[8 + j]) = kquant::scale_min_k4(j, &b[4..16]);
    }
    let half = |i: usize| f16(u16::from_le_bytes([b[i], b[i + 1]]));
    BlockK {
        q,
        sm,
        d: [half(0), half(2)],
    }
}

/// The scalar twin of the eight-token Q4_K kernel: row `i` of `rows` against eight tokens,
/// each token's sum exactly [`kquant::dot_q4_k_q8_k`]'s, block by block, in block order.
pub fn dot8_q4_k(rows: &RowsK, i: usize, a: &EightsK) -> [f32; 8] {
    let row = rows.row(i);
    assert_eq!(
        row.len(),
        a.qs.len(),
        "one activation block per weight block"
    );
    let mut acc = [0.0f32; 8];
    for (b, BlockK { q, sm, d }) in row.iter().enumerate() {
        for (t, acc) in acc.iter_mut().enumerate() {
            let (mut sum_q, mut sum_m) = (0i32, 0i32);
            for s in 0..8 {
                let dot: i32 = (32 * s..32 * s + 32)
                    .map(|l| i32::from(q[l]) * i32::from(a.qs[b][32 * (l / 4) + 4 * t + l % 4]))
                    .sum();
                sum_q += i32::from(sm[s]) * dot;
                sum_m += i32::from(sm[8 + s]) * a.sums[b][s][t];
            }
            let (ad, [dw, dmin]) = (a.d[b][t], *d);
            *acc += dw * ad * sum_q as f32 - dmin * ad * sum_m as f32;
        }
    }
    acc
}

/// One Q6_K block unpacked (the rules of [`kquant::dequantize_q6_k`]): quants 0..64, before
/// the offset of 32 is taken out.
pub fn unpack_q6_k(b: &[u8]) -> BlockK {
    let q = std::array::from_fn(|l| kquant::q6_k_quant(&b[..128], &b[128..192], l) as u8);
    let sm = b[192..208].try_into().expect("16 scales");
    let d = [f16(u16::from_le_bytes([b[208], b[209]])), 0.0];
    BlockK { q, sm, d }
}

/// The scalar twin of the eight-token Q6_K kernel: each token's sum exactly
/// [`kquant::dot_q6_k_q8_k`]'s, as `Σ sc·Σq·a − 32 · Σ sc·Σa` per block (the same integer).
pub fn dot8_q6_k(rows: &RowsK, i: usize, a: &EightsK) -> [f32; 8] {
    let row = rows.row(i);
    assert_eq!(
        row.len(),
        a.qs.len(),
        "one activation block per weight block"
    );
    let mut acc = [0.0f32; 8];
    for (b, BlockK { q, sm, d }) in row.iter().enumerate() {
        for (t, acc) in acc.iter_mut().enumerate() {
            let mut sum = 0i32;
            for (g, &scale) in sm.iter().enumerate() {
                let dot: i32 = (16 * g..16 * g + 16)
                    .map(|l| i32::from(q[l]) * i32::from(a.qs[b][32 * (l / 4) + 4 * t + l % 4]))
                    .sum();
                sum += i32::from(scale as i8) * (dot - 32 * a.sums16[b][g][t]);
            }
            *acc += d[0] * a.d[b][t] * sum as f32;
        }
    }
    acc
}
