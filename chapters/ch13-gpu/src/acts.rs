//! The input vector of a product, quantized on the host to the block format its weights
//! meet on the CPU (chapter 6's `Format::spec` activation column: Q8_0 for Q4_0, Q5_0 and
//! Q8_0, Q8_1 for Q4_1, Q8_K for the K-quants), then laid out for the shader as whole words.
//!
//! Quantizing with chapter 6's own functions means the GPU multiplies exactly the blocks the
//! CPU engine does: each block's integer dot is the same, and only the order in which the
//! f32 block sums are added differs (the bound in `tests/matvec.rs`).

use ch06_quantization::blocks::QK;
use ch06_quantization::matrix::ActFormat;
use ch06_quantization::quantize::{quantize_q8_0, quantize_q8_1};
use ch07_simd_parallel::layout::kquant::{QK_K, quantize_q8_k};

use crate::gpu::{Error, Result};

/// Words per activation block in the shader's `ActBlock`: `d`, `s`, 8 words of quants.
pub const BLOCK_WORDS: usize = 10;

// ANCHOR: act_block
/// One block as the shader's `struct ActBlock { d: f32, s: f32, qs: array<u32, 8> }` reads
/// it: the scale and the sum as f32 (Q8_1's f16s widened exactly; for Q8_0 and Q8_K the sum
/// of the quants, an integer), the 32 i8 quants four to a word, element `4i + k` in byte `k`
/// of word `i`.
fn push_block(out: &mut Vec<u32>, d: f32, s: f32, qs: &[i8; QK]) {
    out.push(d.to_bits());
    out.push(s.to_bits());
    for four in qs.chunks_exact(4) {
        out.push(u32::from_le_bytes([
            four[0] as u8,
            four[1] as u8,
            four[2] as u8,
            four[3] as u8,
        ]));
    }
}
// ANCHOR_END: act_block

/// `x` quantized to `format`, [`BLOCK_WORDS`] words per block of 32.
pub fn quantize(format: ActFormat, x: &[f32]) -> Result<Vec<u32>> {
    let whole = match format {
        ActFormat::Q8_0 | ActFormat::Q8_1 => QK,
        ActFormat::Q8_K => QK_K,
    };
    if !x.len().is_multiple_of(whole) {
        return Err(Error::Input(format!(
            "a vector of {} values is not whole blocks of {whole}",
            x.len()
        )));
    }
    let mut out = Vec::with_capacity(x.len() / QK * BLOCK_WORDS);
    match format {
        ActFormat::Q8_0 => {
            for b in x.as_chunks::<QK>().0 {
                let q = quantize_q8_0(b);
                // no sum in the CPU's block: Σq for the products (`s`), exact in an f32
                let sum: i32 = q.qs.iter().map(|&v| i32::from(v)).sum();
                push_block(&mut out, q.scale(), sum as f32, &q.qs);
            }
        }
        ActFormat::Q8_1 => {
            for b in x.as_chunks::<QK>().0 {
                let q = quantize_q8_1(b);
                push_block(&mut out, q.scale(), q.sum(), &q.qs);
            }
        }
        ActFormat::Q8_K => push_q8_k(&mut out, x),
    }
    Ok(out)
}

// ANCHOR: q8_k
/// Q8_K's super-blocks, quantized by the CPU engine's own function (chapter 7's
/// `quantize_q8_k`: one f32 scale per 256 values, and the sum of every 16 quants), written
/// as eight blocks of 32 each: `d` is the super-block's scale (an f32 already, so exact),
/// `s` the block's sum of quants `bsums[2j] + bsums[2j + 1]` (an integer of at most
/// 32 · 127 in magnitude, exact in an f32), which Q4_K's minimums multiply.
fn push_q8_k(out: &mut Vec<u32>, x: &[f32]) {
    for sb in x.as_chunks::<QK_K>().0 {
        let q = quantize_q8_k(sb);
        for (j, qs) in q.qs.as_chunks::<QK>().0.iter().enumerate() {
            let sum = i32::from(q.bsums[2 * j]) + i32::from(q.bsums[2 * j + 1]);
            push_block(out, q.d, sum as f32, qs);
        }
    }
}
// ANCHOR_END: q8_k
