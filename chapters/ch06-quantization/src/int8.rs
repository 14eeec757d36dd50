//! INT8 per output channel: the simplest quantization that works.
//!
//! One scale for a whole row of the weight matrix, `s = max|w| / 127`, and one i8 per
//! weight. A row is one output channel, so every output is computed with a single scale,
//! which is why this is the classic layout for int8 inference. Its weakness is the same
//! fact: one outlier anywhere in a row of 576 or 1536 weights coarsens all the others.

// ANCHOR: int8_row
/// Quantizes `w` into `q` (`w.len()` i8, stored as bytes) and returns the row's scale.
pub fn quantize_row(w: &[f32], q: &mut [u8]) -> f32 {
    assert_eq!(w.len(), q.len(), "one i8 per weight");
    let amax = w.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let scale = amax / 127.0;
    let inv = if scale != 0.0 { 1.0 / scale } else { 0.0 };
    for (o, &x) in q.iter_mut().zip(w) {
        *o = (x * inv).round() as i8 as u8;
    }
    scale
}

/// The row back: `w ≈ scale · q`.
pub fn dequantize_row(q: &[u8], scale: f32, out: &mut [f32]) {
    for (o, &b) in out.iter_mut().zip(q) {
        *o = f32::from(b as i8) * scale;
    }
}
// ANCHOR_END: int8_row

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_outlier_coarsens_the_whole_row() {
        let mut w = vec![0.01f32; 64];
        let mut q = vec![0u8; 64];
        let fine = quantize_row(&w, &mut q);
        assert_eq!(q[0] as i8, 127);
        w[7] = 2.0; // one large weight
        let coarse = quantize_row(&w, &mut q);
        assert!(coarse > 100.0 * fine);
        assert_eq!(
            q[0] as i8, 1,
            "0.01 is now 0.63 steps: it rounds to 1, an error of 57%"
        );
        let mut back = vec![0.0; 64];
        dequantize_row(&q, coarse, &mut back);
        assert_eq!(back[7], 2.0);
    }
}
