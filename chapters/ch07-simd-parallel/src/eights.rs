//! Eight tokens at once: a token per 32-bit lane.
//!
//! Chapter 6's dot product ends every 32-weight block with a horizontal add: SIMD leaves the
//! block's products spread over the lanes of a register, and chapter 6's arithmetic wants one
//! integer per block. With eight tokens to multiply by the same weights (a prefill), the
//! lanes can be given a better job. Lay out eight tokens' activations so that a 32-bit lane
//! holds four consecutive quants of one token, and broadcast four quants of the weight row to
//! every lane: one `vpmaddubsw` and one `vpmaddwd` then add four products *of each token*
//! into that token's lane. Eight such steps cover a block, and lane `t` holds token `t`'s
//! integer block dot. Nothing is summed across lanes, and each token's float arithmetic is
//! chapter 6's, in chapter 6's order, so every result is `dot_q4_1_q8_1`'s, bit for bit.
//!
//! ```text
//! Eights, per block: step k (0..8) holds quants 4k..4k+4 of token 0, of token 1, …, of
//!                    token 7: 8 steps × 8 tokens × 4 bytes = 256 bytes; then each token's
//!                    scale d and sum s
//! ```
//!
//! Chapter 8 uses this layout for every format its prefill multiplies (Q4_0, Q5_0, Q4_1,
//! Q8_0 and, with more steps per block, the K-quants).

use ch06_quantization::blocks::{BlockQ4_1, BlockQ8_1, QK};

/// Tokens a register serves: eight 32-bit lanes of a 256-bit register.
pub const TOKENS: usize = 8;

/// Steps per block: four quants of the row per step.
pub const STEPS: usize = QK / 4;

// ANCHOR: eights
/// Eight tokens' Q8_1 activations, interleaved so that one 32-bit lane follows one token.
pub struct Eights {
    /// `(blocks, step, token, 4 quants)`: step `k` of a block holds quants `4k..4k + 4` of
    /// each of the eight tokens, one token after another.
    pub qs: Vec<[[[i8; 4]; TOKENS]; STEPS]>,
    /// `(blocks, token)`: each token's block scale `d`.
    pub d: Vec<[f32; TOKENS]>,
    /// `(blocks, token)`: each token's block sum `s = d · Σ q`, which Q4_1's minimum multiplies.
    pub s: Vec<[f32; TOKENS]>,
}
// ANCHOR_END: eights

impl Eights {
    // ANCHOR: eights_new
    /// Interleaves eight tokens' rows of Q8_1 blocks (all the same length).
    pub fn new(tokens: [&[BlockQ8_1]; TOKENS]) -> Eights {
        let blocks = tokens[0].len();
        assert!(
            tokens.iter().all(|t| t.len() == blocks),
            "the eight tokens' rows differ in length"
        );
        let mut e = Eights {
            qs: vec![[[[0; 4]; TOKENS]; STEPS]; blocks],
            d: vec![[0.0; TOKENS]; blocks],
            s: vec![[0.0; TOKENS]; blocks],
        };
        for b in 0..blocks {
            for (t, row) in tokens.iter().enumerate() {
                let block = &row[b];
                for k in 0..STEPS {
                    e.qs[b][k][t].copy_from_slice(&block.qs[4 * k..4 * k + 4]);
                }
                e.d[b][t] = block.scale();
                e.s[b][t] = block.sum();
            }
        }
        e
    }
    // ANCHOR_END: eights_new

    /// Blocks per token.
    pub fn blocks(&self) -> usize {
        self.qs.len()
    }
}

/// A Q4_1 block's 32 quants in element order: byte `j` holds element `j` in its low nibble
/// and element `j + 16` in its high one.
pub fn unpack_q4_1(block: &[u8; BlockQ4_1::BYTES]) -> [u8; QK] {
    std::array::from_fn(|i| {
        let byte = block[4 + i % 16];
        if i < 16 { byte & 0x0f } else { byte >> 4 }
    })
}

// ANCHOR: dot8_scalar
/// Eight tokens against one Q4_1 row, the plain way the SIMD kernel follows: per block, per
/// step, each token's four products go to that token's sum; then chapter 6's float step.
/// `out[t]` is `dot_q4_1_q8_1(w, token t's row)`, bit for bit.
pub fn dot8_q4_1(w: &[u8], a: &Eights) -> [f32; TOKENS] {
    let (blocks, rest) = w.as_chunks::<{ BlockQ4_1::BYTES }>();
    assert!(
        rest.is_empty() && blocks.len() == a.blocks(),
        "row lengths differ"
    );
    let mut sum = [0.0f32; TOKENS];
    for (b, wb) in blocks.iter().enumerate() {
        let q = unpack_q4_1(wb);
        let mut lanes = [0i32; TOKENS]; // one integer per token: no horizontal add
        for (k, step) in a.qs[b].iter().enumerate() {
            for (lane, quads) in lanes.iter_mut().zip(step) {
                for i in 0..4 {
                    *lane += i32::from(q[4 * k + i]) * i32::from(quads[i]);
                }
            }
        }
        let block = BlockQ4_1(wb);
        for t in 0..TOKENS {
            sum[t] += (block.scale() * a.d[b][t]) * lanes[t] as f32 + block.min() * a.s[b][t];
        }
    }
    sum
}
// ANCHOR_END: dot8_scalar

/// [`dot8_q4_1`] on this CPU's best kernel: AVX2 where the CPU has it (chapter 7's
/// dispatch, `LLM_BOOK_ISA` included), else the scalar twin.
pub fn dot8_q4_1_best(w: &[u8], a: &Eights) -> [f32; TOKENS] {
    #[cfg(target_arch = "x86_64")]
    if crate::Isa::from_env().is_ok_and(|isa| isa != crate::Isa::Scalar) {
        // SAFETY: the level is at least AVX2 only if the CPU has AVX2, FMA and F16C
        // (`Isa::from_env` checks a forced level against the CPU).
        return unsafe { crate::kernels::avx2_eights_q4_1::dot8_q4_1(w, a) };
    }
    dot8_q4_1(w, a)
}
