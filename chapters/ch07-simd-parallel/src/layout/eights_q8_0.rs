//! Eight tokens against one Q8_0 row, for a batch of a few sequences (chapter 10's decode
//! steps) meeting an 8-bit matrix such as Gemma-3's tied embedding, its LM head: 262 144
//! rows, more multiply-adds a token than all of its layers.
//!
//! The layout of the eight tokens is [`Eights`]'s (a token per 32-bit lane, four quants a
//! step). Unlike the 4- and 5-bit formats, a Q8_0 weight is signed, and `vpmaddubsw` wants
//! one unsigned operand: the kernel takes the weight's magnitude as that operand and moves
//! its sign onto the activations (chapter 7's sign trick), four quants at a time, reading
//! the row's bytes as they lie in the file. Two products of a step fit in 16 bits
//! (`2 · 128 · 127 < 2^15`, activations never being −128), but two steps do not, so each
//! step is widened at once.

use ch06_quantization::blocks::BlockQ8_0;
use ch06_quantization::f16::f16_to_f32_fast as f16;

use crate::layout::eights::Eights;

/// The scalar twin of the eight-token Q8_0 kernel: `w` a row of whole Q8_0 blocks (34 bytes
/// each, as in the file) against eight tokens' activations, each token's sum exactly chapter
/// 6's `dot_q8_0_q8_0`: the same integer dot per block, `dot · (d_w · d_a)`, added in block
/// order. (The activations' `offset` is Q4_0's and is not used.)
pub fn dot8_q8_0(w: &[u8], a: &Eights) -> [f32; 8] {
    assert_eq!(
        w.len(),
        a.qs.len() * BlockQ8_0::BYTES,
        "one activation block per weight block"
    );
    let mut acc = [0.0f32; 8];
    for (b, wb) in w.chunks_exact(BlockQ8_0::BYTES).enumerate() {
        let d = f16(u16::from_le_bytes([wb[0], wb[1]]));
        for (t, acc) in acc.iter_mut().enumerate() {
            let dot: i32 = (0..32)
                .map(|j| {
                    i32::from(wb[2 + j] as i8) * i32::from(a.qs[b][32 * (j / 4) + 4 * t + j % 4])
                })
                .sum();
            *acc += dot as f32 * (d * a.d[b][t]);
        }
    }
    acc
}
