//! What a product of a packed group must compute, and with which activations: one token's
//! activation blocks for each packable format ([`PackedToken`]), and the scalar reference
//! every packed kernel matches bit for bit ([`packed8_scalar`]).

use ch06_quantization::blocks::{BlockQ8_0, BlockQ8_1, QK};
use ch06_quantization::f16::f16_to_f32_fast;
use ch06_quantization::matrix::{Packable, Q32};

use super::kquant::{self, BlockQ8K, KQuant, Q8_0Wide};
use super::packed::{GROUP, GroupLayout, Lane};

/// One token's activations for a packed product: Q4_0's Q8_0 blocks with each block's
/// integer sum `Σ a` (the kernels take `8 · Σ a` off each row's `Σ q · a`), Q4_1's Q8_1
/// blocks (which carry `d · Σ a`), Q5_0's wide Q8_0 blocks (which carry `Σ a`), or the
/// K-quants' Q8_K blocks (which carry the sums of every 16).
#[derive(Clone, Copy)]
pub enum PackedToken<'a> {
    Q4_0(&'a [BlockQ8_0], &'a [i32]),
    Q4_1(&'a [BlockQ8_1]),
    Q5_0(&'a [Q8_0Wide]),
    /// Q8_K blocks, for a Q4_K or a Q6_K matrix.
    K(&'a [BlockQ8K], KQuant),
}

impl PackedToken<'_> {
    /// The weights' format these activations go with.
    pub fn format(&self) -> Packable {
        match self {
            PackedToken::Q4_0(..) => Packable::Q32(Q32::Q4_0),
            PackedToken::Q4_1(_) => Packable::Q32(Q32::Q4_1),
            PackedToken::Q5_0(_) => Packable::Q32(Q32::Q5_0),
            PackedToken::K(_, k) => Packable::K(*k),
        }
    }
    /// Activation blocks.
    pub fn blocks(&self) -> usize {
        match self {
            PackedToken::Q4_0(a, s) => a.len().min(s.len()),
            PackedToken::Q4_1(a) => a.len(),
            PackedToken::Q5_0(a) => a.len(),
            PackedToken::K(a, _) => a.len(),
        }
    }
    /// Block `b`'s 32 quants (a 32-value format's).
    fn quants(&self, b: usize) -> &[i8; QK] {
        match self {
            PackedToken::Q4_0(a, _) => &a[b].qs,
            PackedToken::Q4_1(a) => &a[b].qs,
            PackedToken::Q5_0(a) => &a[b].qs,
            PackedToken::K(..) => unreachable!("a K-quant's blocks are 256 quants"),
        }
    }
}

// ANCHOR: packed8_scalar
/// Eight rows of a group (`group`: its blocks) against one or more tokens, `out[t][r]` row
/// `r`'s sum for token `t`: each row's integer sum per block, then the scalar kernel's float
/// step in its order, so every output has the bits of chapter 6's `dot_q4_0_q8_0` and
/// `dot_q4_1_q8_1`, or chapter 8's `dot_q5_0_q8_0`.
pub fn packed8_scalar(group: &[u8], tokens: &[PackedToken], out: &mut [[f32; 8]]) {
    let Some(first) = tokens.first() else { return };
    let format = first.format();
    let (head, bb) = (format.head_bytes(), format.group_block_bytes());
    let f16 = |b: &[u8], at: usize| f16_to_f32_fast(u16::from_le_bytes([b[at], b[at + 1]]));
    for (tok, o) in tokens.iter().zip(out.iter_mut()) {
        assert!(
            tok.format() == format && tok.blocks() * bb == group.len(),
            "a group's blocks, one per activation block, one format"
        );
        *o = [0.0; 8];
        if let PackedToken::K(a, kquant) = tok {
            // each row's block taken out of the group, and chapter 8's dot of it
            let mut row = vec![0u8; format.format().block_bytes()];
            let lanes: Vec<Lane> = (0..GROUP).map(|r| format.lane(r)).collect();
            for (b, blk) in group.chunks_exact(bb).enumerate() {
                for (sum, lane) in o.iter_mut().zip(&lanes) {
                    lane.take(blk, &mut row);
                    *sum += match kquant {
                        KQuant::Q4_K => kquant::dot_q4_k_q8_k(&row, &a[b]),
                        KQuant::Q6_K => kquant::dot_q6_k_q8_k(&row, &a[b]),
                    };
                }
            }
            continue;
        }
        for (b, blk) in group.chunks_exact(bb).enumerate() {
            let qs = tok.quants(b);
            for (r, sum) in o.iter_mut().enumerate() {
                // Q5_0's fifth bits: bit j of row r's qh belongs to element j
                let qh = match tok {
                    PackedToken::Q5_0(_) => {
                        let (at, _) = format.field_at(1, r);
                        u32::from_le_bytes(blk[at..at + 4].try_into().expect("4 bytes"))
                    }
                    PackedToken::Q4_0(..) | PackedToken::Q4_1(_) | PackedToken::K(..) => 0,
                };
                let fifth = |j: usize| (((qh >> j) & 1) << 4) as i32;
                let mut sumi = 0i32;
                for c in 0..4 {
                    for k in 0..4 {
                        let byte = blk[head + 32 * c + 4 * r + k];
                        let j = 4 * c + k; // element j (low nibble) and j + 16 (high)
                        sumi += (i32::from(byte & 0x0f) | fifth(j)) * i32::from(qs[j])
                            + (i32::from(byte >> 4) | fifth(j + 16)) * i32::from(qs[j + QK / 2]);
                    }
                }
                let d = f16(blk, 2 * r);
                *sum += match tok {
                    PackedToken::Q4_0(a, s) => (sumi - 8 * s[b]) as f32 * (d * a[b].scale()),
                    PackedToken::Q4_1(a) => {
                        let m = f16(blk, format.field_at(1, r).0);
                        (d * a[b].scale()) * sumi as f32 + m * a[b].sum()
                    }
                    PackedToken::Q5_0(a) => d * a[b].d * (sumi - 16 * a[b].sum) as f32,
                    PackedToken::K(..) => unreachable!("done above"),
                };
            }
        }
    }
}
// ANCHOR_END: packed8_scalar
