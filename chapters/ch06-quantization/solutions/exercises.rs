//! Reference solutions for chapter 6's exercises.
#![allow(unused_variables)]

/// Exercise 1: decode an f16 with one multiplication.
pub fn f16_to_f32_fast(bits: u16) -> f32 {
    let sign = u32::from(bits & 0x8000) << 16;
    let magnitude = match bits & 0x7c00 {
        0x7c00 => return crate::f16::f16_to_f32(bits), // infinity or NaN
        // A subnormal: its fraction, an integer, times 2^-24.
        0 => f32::from(bits & 0x3ff) * f32::from_bits((127 - 24) << 23),
        // A normal half: exponent and fraction in f32's places, then 2^112 for the bias.
        _ => f32::from_bits(u32::from(bits & 0x7fff) << 13) * f32::from_bits((127 + 112) << 23),
    };
    f32::from_bits(magnitude.to_bits() | sign)
}

/// Exercise 2: unpack a Q4_0 block.
///
/// Return the 32 values `d · (q − 8)` in element order.
pub fn unpack_q4_0(block: &[u8; 18]) -> [f32; 32] {
    let d = crate::f16::f16_to_f32(u16::from_le_bytes([block[0], block[1]]));
    let mut out = [0.0f32; 32];
    for (j, &b) in block[2..].iter().enumerate() {
        out[j] = (f32::from(b & 0x0f) - 8.0) * d;
        out[j + 16] = (f32::from(b >> 4) - 8.0) * d;
    }
    out
}

/// Exercise 3: how far a Q8_0 block can be off.
pub fn q8_0_error_bound(x: &[f32; 32]) -> f32 {
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    // What storing v as an f16 can cost: relative 2^-11, but never less than 2^-25.
    let e = |v: f32| (v.abs() / 2048.0).max(2f32.powi(-25));
    d / 2.0 + 127.0 * e(d)
}

/// Exercise 4: how far the quantized model's prediction moved.
pub fn kl_divergence(p_logits: &[f32], q_logits: &[f32]) -> f64 {
    let (log_p, log_q) = (log_softmax(p_logits), log_softmax(q_logits));
    log_p
        .iter()
        .zip(&log_q)
        .map(|(lp, lq)| lp.exp() * (lp - lq))
        .sum()
}

/// `l_i − log Σ_j exp(l_j)`, with the largest logit taken out first so no `exp` overflows.
fn log_softmax(logits: &[f32]) -> Vec<f64> {
    let max = f64::from(logits.iter().copied().fold(f32::NEG_INFINITY, f32::max));
    let sum: f64 = logits.iter().map(|&l| (f64::from(l) - max).exp()).sum();
    let log_total = max + sum.ln();
    logits.iter().map(|&l| f64::from(l) - log_total).collect()
}
