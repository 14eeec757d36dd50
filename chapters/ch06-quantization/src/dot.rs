//! Dot products of a quantized weight row with a quantized activation row.
//!
//! The obvious way to multiply by quantized weights is to dequantize them to f32 and call
//! an f32 dot ([`dot_dequantized`]). llama.cpp's way quantizes the *activation* row too,
//! once per matrix product, to 8 bits in blocks of 32 that line up with the weight blocks.
//! Then inside a block everything is integers, and each block costs one float multiply-add:
//!
//! ```text
//! Σ_j w_j·a_j  =  Σ_blocks  Σ_{j in block} (d_w·q_j) · (d_a·p_j)
//!              =  Σ_blocks  (d_w·d_a) · Σ_j q_j·p_j          ← 32 integer products, one float
//! ```
//!
//! Q4_1 has an offset: `w_j = d_w·q_j + m`. Its block sum gains a term
//! `m · Σ_j a_j`, the sum of the activation block, and that is why its partner format Q8_1
//! stores `s = d_a · Σ p_j`: the sum is computed once, when the activation row is
//! quantized, instead of once per weight row that meets it (192 to 1 536 times in SmolLM2).

use crate::blocks::{BlockQ4_0, BlockQ4_1, BlockQ8_0, BlockQ8_1, QK};

// ANCHOR: dot_q8_0
/// `Σ w·a` for a Q8_0 weight row (its raw bytes) and a Q8_0 activation row.
pub fn dot_q8_0_q8_0(w: &[u8], a: &[BlockQ8_0]) -> f32 {
    let (blocks, rest) = w.as_chunks::<{ BlockQ8_0::BYTES }>();
    assert!(
        rest.is_empty() && blocks.len() == a.len(),
        "row lengths differ"
    );
    let mut sum = 0.0f32;
    for (wb, ab) in blocks.iter().zip(a) {
        let wb = BlockQ8_0::from_bytes(wb);
        let mut sumi = 0i32; // at most 32 · 127 · 127 = 516 128: no overflow
        for (&q, &p) in wb.qs.iter().zip(&ab.qs) {
            sumi += i32::from(q) * i32::from(p);
        }
        sum += sumi as f32 * (wb.scale() * ab.scale());
    }
    sum
}
// ANCHOR_END: dot_q8_0

// ANCHOR: dot_q4_0
/// `Σ w·a` for a Q4_0 weight row and a Q8_0 activation row: the same, with each 4-bit
/// quant re-centred (`q − 8`) before it is multiplied.
pub fn dot_q4_0_q8_0(w: &[u8], a: &[BlockQ8_0]) -> f32 {
    let (blocks, rest) = w.as_chunks::<{ BlockQ4_0::BYTES }>();
    assert!(
        rest.is_empty() && blocks.len() == a.len(),
        "row lengths differ"
    );
    let mut sum = 0.0f32;
    for (wb, ab) in blocks.iter().zip(a) {
        let wb = BlockQ4_0(wb);
        let mut sumi = 0i32;
        for (j, &byte) in wb.0[2..].iter().enumerate() {
            // byte j holds element j (low nibble) and element j + 16 (high nibble)
            let (lo, hi) = (i32::from(byte & 0x0f) - 8, i32::from(byte >> 4) - 8);
            sumi += lo * i32::from(ab.qs[j]) + hi * i32::from(ab.qs[j + QK / 2]);
        }
        sum += sumi as f32 * (wb.scale() * ab.scale());
    }
    sum
}
// ANCHOR_END: dot_q4_0

// ANCHOR: dot_q4_1
/// `Σ w·a` for a Q4_1 weight row and a Q8_1 activation row:
/// `Σ_j (d·q_j + m)·a_j = d·d_a·Σ q_j·p_j + m·Σ a_j`, and `Σ a_j` is the stored `s`.
pub fn dot_q4_1_q8_1(w: &[u8], a: &[BlockQ8_1]) -> f32 {
    let (blocks, rest) = w.as_chunks::<{ BlockQ4_1::BYTES }>();
    assert!(
        rest.is_empty() && blocks.len() == a.len(),
        "row lengths differ"
    );
    let mut sum = 0.0f32;
    for (wb, ab) in blocks.iter().zip(a) {
        let wb = BlockQ4_1(wb);
        let mut sumi = 0i32;
        for (j, &byte) in wb.0[4..].iter().enumerate() {
            let (lo, hi) = (i32::from(byte & 0x0f), i32::from(byte >> 4));
            sumi += lo * i32::from(ab.qs[j]) + hi * i32::from(ab.qs[j + QK / 2]);
        }
        sum += (wb.scale() * ab.scale()) * sumi as f32 + wb.min() * ab.sum();
    }
    sum
}
// ANCHOR_END: dot_q4_1

// ANCHOR: dot_int8
/// `Σ w·a` for an INT8 weight row (one scale for the whole row, `scale`) and a Q8_0
/// activation row: integer sums per activation block, then the row's scale once.
pub fn dot_int8_q8_0(w: &[u8], scale: f32, a: &[BlockQ8_0]) -> f32 {
    assert_eq!(w.len(), a.len() * QK, "row lengths differ");
    let mut sum = 0.0f32;
    for (wq, ab) in w.chunks_exact(QK).zip(a) {
        let mut sumi = 0i32;
        for (&q, &p) in wq.iter().zip(&ab.qs) {
            sumi += i32::from(q as i8) * i32::from(p);
        }
        sum += sumi as f32 * ab.scale();
    }
    sum * scale
}
// ANCHOR_END: dot_int8

/// The obvious way, for comparison: dequantize the weight row to f32 (`w`, as the matrix's
/// [`crate::QMatrix::dequantize_row`] gives it) and take an f32 dot with the unquantized
/// activations. No activation error, but every weight is expanded to 4 bytes first.
pub fn dot_dequantized(w: &[f32], x: &[f32]) -> f32 {
    ch01_tensors::ops::dot(w, x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quantize::*;

    fn row(n: usize, seed: u64) -> Vec<f32> {
        ch01_tensors::random::uniform(n, seed)
    }

    /// Each integer dot equals the f32 dot of the two dequantized rows, up to float rounding:
    /// the integer part is exact, only the per-block float products are rounded.
    #[test]
    fn integer_dots_equal_the_dot_of_the_dequantized_rows() {
        let (w, x) = (row(4 * QK, 1), row(4 * QK, 2));
        let blocks = |v: &[f32]| -> Vec<[f32; QK]> {
            v.chunks_exact(QK).map(|c| c.try_into().unwrap()).collect()
        };
        let a8: Vec<BlockQ8_0> = blocks(&x).iter().map(quantize_q8_0).collect();
        let a81: Vec<BlockQ8_1> = blocks(&x).iter().map(quantize_q8_1).collect();
        let mut xa = Vec::new(); // the activation as the integer dot sees it
        for b in &a8 {
            let mut o = [0.0; QK];
            dequantize_q8_0(b, &mut o);
            xa.extend_from_slice(&o);
        }
        // Q4_0
        let mut w40 = vec![0u8; 4 * 18];
        let mut w40f = Vec::new();
        for (b, out) in blocks(&w).iter().zip(w40.chunks_exact_mut(18)) {
            let out: &mut [u8; 18] = out.try_into().unwrap();
            quantize_q4_0(b, out);
            let mut o = [0.0; QK];
            dequantize_q4_0(BlockQ4_0(out), &mut o);
            w40f.extend_from_slice(&o);
        }
        let exact: f64 = w40f
            .iter()
            .zip(&xa)
            .map(|(a, b)| f64::from(*a) * f64::from(*b))
            .sum();
        assert!((f64::from(dot_q4_0_q8_0(&w40, &a8)) - exact).abs() < 1e-4);
        // Q4_1: the activation sum `s` is rounded to f16, so the bound is looser: the
        // offset term m·s carries s's rounding, |m| · |s| · 2^-11 per block.
        let mut w41 = vec![0u8; 4 * 20];
        let mut w41f = Vec::new();
        for (b, out) in blocks(&w).iter().zip(w41.chunks_exact_mut(20)) {
            let out: &mut [u8; 20] = out.try_into().unwrap();
            quantize_q4_1(b, out);
            let mut o = [0.0; QK];
            dequantize_q4_1(BlockQ4_1(out), &mut o);
            w41f.extend_from_slice(&o);
        }
        let exact: f64 = w41f
            .iter()
            .zip(&xa)
            .map(|(a, b)| f64::from(*a) * f64::from(*b))
            .sum();
        assert!((f64::from(dot_q4_1_q8_1(&w41, &a81)) - exact).abs() < 4.0 * 16.0 * 2f64.powi(-11));
    }
}
