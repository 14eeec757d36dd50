//! Reference solutions for chapter 6's exercises.
#![allow(unused_variables)]

use crate::blocks::BlockQ8_1;

/// Exercise 1: quantize a Q8_0 block.
///
/// Return the block's scale as f16 bits and its 32 quants, exactly as llama.cpp does:
/// `d = max|x| / 127`, `id = 1/d` (0 when `d` is 0), `q_j = round(x_j · id)`, rounding
/// halves away from zero. Store `d` with `crate::f16::f32_to_f16`.
pub fn quantize_q8_0_block(x: &[f32; 32]) -> (u16, [i8; 32]) {
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut q = [0i8; 32];
    for (q, &v) in q.iter_mut().zip(x) {
        *q = (v * id).round() as i8;
    }
    (crate::f16::f32_to_f16(d), q)
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

/// Exercise 3: the Q4_1 × Q8_1 dot product.
///
/// `Σ_blocks (d·d_a)·Σ_j q_j·p_j + m·s`, block by block.
pub fn dot_q4_1_q8_1(w: &[u8], a: &[BlockQ8_1]) -> f32 {
    let half = |b: &[u8], i: usize| crate::f16::f16_to_f32(u16::from_le_bytes([b[i], b[i + 1]]));
    let mut sum = 0.0f32;
    for (wb, ab) in w.chunks_exact(20).zip(a) {
        let (d, m) = (half(wb, 0), half(wb, 2));
        let mut sumi = 0i32;
        for (j, &byte) in wb[4..].iter().enumerate() {
            sumi += i32::from(byte & 0x0f) * i32::from(ab.qs[j]);
            sumi += i32::from(byte >> 4) * i32::from(ab.qs[j + 16]);
        }
        sum += (d * ab.scale()) * sumi as f32 + m * ab.sum();
    }
    sum
}

/// Exercise 4: f32 to f16, rounding to nearest, ties to even.
pub fn f32_to_f16(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32;
    let frac = bits & 0x7f_ffff;
    if exp == 0xff {
        return sign
            | 0x7c00
            | if frac != 0 {
                0x200 | (frac >> 13) as u16
            } else {
                0
            };
    }
    let e = exp - 112; // rebias: 127 - 15
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    let significand = frac | 0x80_0000;
    let shift = if e > 0 { 13 } else { (14 - e) as u32 };
    if shift > 24 {
        return sign;
    }
    let kept = significand >> shift;
    let rest = significand & ((1 << shift) - 1);
    let half = 1 << (shift - 1);
    let up = u32::from(rest > half || (rest == half && kept & 1 == 1));
    let magnitude = if e > 0 {
        ((e as u32) << 10) | (kept & 0x3ff)
    } else {
        kept
    };
    sign | (magnitude + up) as u16
}
