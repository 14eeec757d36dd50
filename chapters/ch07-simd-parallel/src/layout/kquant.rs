//! The other block formats in Gemma-3's file: Q5_0, and llama.cpp's "K-quants" Q4_K and Q6_K,
//! with the 8-bit activation format the K-quants multiply against, Q8_K.
//!
//! Chapter 6's formats put 32 weights under one f16 scale. The K-quants group 256 weights
//! into a *super-block* with one f16 scale (and, for Q4_K, one f16 min), and give each
//! sub-block of 32 (Q4_K) or 16 (Q6_K) its own small integer scale, so the fine scales cost
//! 6 or 8 bits instead of 16:
//!
//! ```text
//! Q4_K (144 bytes / 256 weights = 4.5 bits):  d f16 | dmin f16 | 12 bytes: 8 × (6-bit scale, 6-bit min) | 128 bytes of nibbles
//!   weight = d · scale_s · q − dmin · min_s          q in 0..=15, s = sub-block of 32
//! Q6_K (210 bytes / 256 weights = 6.56 bits): 128 bytes low nibbles | 64 bytes of 2-bit highs | 16 × i8 scale | d f16
//!   weight = d · scale_g · (q − 32)                  q in 0..=63, g = group of 16
//! Q5_0 (22 bytes / 32 weights = 5.5 bits):    d f16 | 4 bytes: the 32 fifth bits | 16 bytes of nibbles
//!   weight = d · (q − 16)                            q in 0..=31
//! Q8_K (292 bytes / 256 values):               d f32 | 256 × i8 | 16 × i16 sums of each 16 quants
//! ```
//!
//! The layouts and the rules are llama.cpp's (`ggml-common.h`, `ggml-quants.c`); the code is
//! this book's. Every dot product is an integer sum per (sub-)block, converted to f32 once,
//! so the SIMD kernels of [`crate::kernels::products`] give the same bits.

use ch06_quantization::blocks::BlockQ8_0;
use ch06_quantization::f16::f16_to_f32_fast as f16;

/// Which of the two K-quants a row holds: chapter 6's narrow type, next to its `Format`.
pub use ch06_quantization::matrix::KQuant;

/// Values in a K-quant super-block.
pub const QK_K: usize = 256;

/// Bytes per block of each format.
pub const Q4_K_BYTES: usize = 144;
pub const Q6_K_BYTES: usize = 210;
pub const Q5_0_BYTES: usize = 22;

fn half(b: &[u8], i: usize) -> f32 {
    f16(u16::from_le_bytes([b[i], b[i + 1]]))
}

// ANCHOR: q8_k
/// A super-block of activations: 256 int8 and one f32 scale, with the sum of every 16
/// quants precomputed (the Q4_K dot needs them for its mins).
#[derive(Clone, Debug)]
#[repr(C)]
pub struct BlockQ8K {
    pub d: f32,
    pub qs: [i8; QK_K],
    pub bsums: [i16; QK_K / 16],
}

/// Round to nearest, ties to even, for |x| < 2^22, as llama.cpp's `nearest_int` does it:
/// adding 1.5 · 2^23 leaves the rounded integer in the low fraction bits (the FPU rounds
/// the sum to even). It is `x.round_ties_even() as i32` without a call into libm, which
/// this crate's baseline x86-64 target cannot inline.
fn nearest_int(x: f32) -> i32 {
    debug_assert!(x.abs() < 4_194_304.0);
    let v = x + 12_582_912.0;
    (v.to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
}

/// llama.cpp's rule: the value of largest magnitude maps to −127 exactly (the scale is
/// signed), every other to `round(−127 · x / max)`; a block of zeros has scale 0.
pub fn quantize_q8_k(x: &[f32; QK_K]) -> BlockQ8K {
    let mut b = BlockQ8K {
        d: 0.0,
        qs: [0; QK_K],
        bsums: [0; QK_K / 16],
    };
    // The largest magnitude (a maximum is the same in any order, so the compiler may take
    // it several lanes at a time), then the first value that has it: its sign is the scale's.
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let Some(&max) = x.iter().find(|v| v.abs() == amax).filter(|_| amax > 0.0) else {
        return b; // a block of zeros
    };
    let iscale = -127.0 / max;
    for (q, &v) in b.qs.iter_mut().zip(x) {
        *q = nearest_int(iscale * v).min(127) as i8;
    }
    for (s, g) in b.bsums.iter_mut().zip(b.qs.chunks_exact(16)) {
        *s = g.iter().map(|&q| i16::from(q)).sum();
    }
    b.d = 1.0 / iscale;
    b
}
// ANCHOR_END: q8_k

/// A row of activations (a whole number of super-blocks) as Q8_K blocks.
pub fn quantize_q8_k_row(x: &[f32]) -> Vec<BlockQ8K> {
    x.chunks_exact(QK_K)
        .map(|c| quantize_q8_k(c.try_into().expect("256 values")))
        .collect()
}

// ANCHOR: scale_min
/// Q4_K's eight (scale, min) pairs, 6 bits each, packed into 12 bytes: pairs 0–3 in the
/// low 6 bits of bytes 0–3 (scales) and 4–7 (mins); pairs 4–7 in the nibbles of bytes 8–11,
/// with their top two bits in the spare top bits of bytes 0–7.
#[inline]
pub fn scale_min_k4(j: usize, s: &[u8]) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        (
            (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4),
            (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
        )
    }
}
// ANCHOR_END: scale_min

// ANCHOR: q4_k
/// The 4-bit quant `l` (0..256) of a Q4_K block: each 64 values use 32 bytes, the first 32
/// values their low nibbles, the next 32 their high nibbles.
pub(crate) fn q4_k_quant(qs: &[u8], l: usize) -> u8 {
    let (chunk, within) = (l / 64, l % 64);
    let byte = qs[chunk * 32 + within % 32];
    if within < 32 { byte & 0x0f } else { byte >> 4 }
}

/// One Q4_K block back to 256 f32.
pub fn dequantize_q4_k(b: &[u8], out: &mut [f32; QK_K]) {
    let (d, dmin) = (half(b, 0), half(b, 2));
    let (scales, qs) = (&b[4..16], &b[16..144]);
    for (l, o) in out.iter_mut().enumerate() {
        let (sc, m) = scale_min_k4(l / 32, scales);
        *o = d * f32::from(sc) * f32::from(q4_k_quant(qs, l)) - dmin * f32::from(m);
    }
}

/// `Σ w·a` over one Q4_K block and one Q8_K block: per sub-block of 32, an integer sum
/// times its scale; the mins meet the precomputed sums of the activations.
pub fn dot_q4_k_q8_k(b: &[u8], a: &BlockQ8K) -> f32 {
    let (d, dmin) = (half(b, 0), half(b, 2));
    let (scales, qs) = (&b[4..16], &b[16..144]);
    let (mut sum_q, mut sum_m) = (0i32, 0i32);
    for s in 0..8 {
        let (sc, m) = scale_min_k4(s, scales);
        let dot: i32 = (s * 32..(s + 1) * 32)
            .map(|l| i32::from(q4_k_quant(qs, l)) * i32::from(a.qs[l]))
            .sum();
        sum_q += i32::from(sc) * dot;
        sum_m += i32::from(m) * (i32::from(a.bsums[2 * s]) + i32::from(a.bsums[2 * s + 1]));
    }
    d * a.d * sum_q as f32 - dmin * a.d * sum_m as f32
}
// ANCHOR_END: q4_k

// ANCHOR: q6_k
/// The 6-bit quant `l` (0..256) of a Q6_K block, in 0..64: each 128 values use 64 bytes of
/// `ql` and 32 of `qh`; value `l` of a half takes a nibble of `ql[l % 64]` (low for the first
/// 64, high for the next) and two bits of `qh[l % 32]` (bits `2·(l / 32)`).
pub(crate) fn q6_k_quant(ql: &[u8], qh: &[u8], l: usize) -> i32 {
    let (half, w) = (l / 128, l % 128);
    let (ql, qh) = (&ql[half * 64..], &qh[half * 32..]);
    let low = if w < 64 {
        ql[w] & 0x0f
    } else {
        ql[w - 64] >> 4
    };
    let high = (qh[w % 32] >> (2 * (w / 32))) & 3;
    i32::from(low | (high << 4))
}

/// One Q6_K block back to 256 f32.
pub fn dequantize_q6_k(b: &[u8], out: &mut [f32; QK_K]) {
    let (ql, qh, sc, d) = (&b[..128], &b[128..192], &b[192..208], half(b, 208));
    for (l, o) in out.iter_mut().enumerate() {
        *o = d * f32::from(sc[l / 16] as i8) * (q6_k_quant(ql, qh, l) - 32) as f32;
    }
}

/// `Σ w·a` over one Q6_K block and one Q8_K block: per group of 16, an integer sum times
/// its signed 8-bit scale.
pub fn dot_q6_k_q8_k(b: &[u8], a: &BlockQ8K) -> f32 {
    let (ql, qh, sc, d) = (&b[..128], &b[128..192], &b[192..208], half(b, 208));
    let mut sum = 0i32;
    for (g, &scale) in sc.iter().enumerate() {
        let dot: i32 = (g * 16..(g + 1) * 16)
            .map(|l| (q6_k_quant(ql, qh, l) - 32) * i32::from(a.qs[l]))
            .sum();
        sum += i32::from(scale as i8) * dot;
    }
    d * a.d * sum as f32
}
// ANCHOR_END: q6_k

/// A Q8_0 block with its f16 scale widened to f32: done once per token when the
/// activations are quantized, instead of once for every row that meets them. `sum` is
/// `Σ qs`, for kernels that multiply Q5_0's quants before taking their offset of 16 out.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Q8_0Wide {
    pub d: f32,
    pub qs: [i8; 32],
    pub sum: i32,
}

impl Q8_0Wide {
    pub fn new(d: f32, qs: [i8; 32]) -> Q8_0Wide {
        let sum = qs.iter().map(|&q| i32::from(q)).sum();
        Q8_0Wide { d, qs, sum }
    }
}

impl From<&BlockQ8_0> for Q8_0Wide {
    fn from(b: &BlockQ8_0) -> Q8_0Wide {
        Q8_0Wide::new(f16(b.d), b.qs)
    }
}

// ANCHOR: q5_0
/// The 5-bit quant `j` (0..32) of a Q5_0 block, in −16..16: a nibble as in Q4_0 (low
/// nibbles first), and bit `j` of the 32-bit `qh` on top.
fn q5_0_quant(b: &[u8], j: usize) -> i32 {
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    let nib = if j < 16 {
        b[6 + j] & 0x0f
    } else {
        b[6 + j - 16] >> 4
    };
    i32::from(nib | (((qh >> j) & 1) as u8) << 4) - 16
}

/// One Q5_0 block back to 32 f32.
pub fn dequantize_q5_0(b: &[u8], out: &mut [f32; 32]) {
    let d = half(b, 0);
    for (j, o) in out.iter_mut().enumerate() {
        *o = d * q5_0_quant(b, j) as f32;
    }
}

/// `Σ w·a` over one Q5_0 block and one Q8_0 block.
pub fn dot_q5_0_q8_0(b: &[u8], a: &Q8_0Wide) -> f32 {
    let dot: i32 = (0..32).map(|j| q5_0_quant(b, j) * i32::from(a.qs[j])).sum();
    half(b, 0) * a.d * dot as f32
}
// ANCHOR_END: q5_0

#[cfg(test)]
mod tests {
    use super::*;

    fn random_block(len: usize, seed: u64) -> Vec<u8> {
        let mut s = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (0..len)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (s >> 33) as u8
            })
            .collect()
    }

    /// Sets the f16 at `i` to a small finite value (random bytes can make NaN scales).
    fn tame(b: &mut [u8], i: usize, v: f32) {
        b[i..i + 2].copy_from_slice(&ch06_quantization::f16::f32_to_f16(v).to_le_bytes());
    }

    fn acts(seed: u64) -> [f32; QK_K] {
        let r = random_block(QK_K, seed);
        std::array::from_fn(|i| (r[i] as f32 - 128.0) / 37.0)
    }

    #[test]
    fn integer_dots_equal_dequantized_dots() {
        for seed in 0..50 {
            let x = acts(seed);
            let a = quantize_q8_k(&x);
            let deq_a: Vec<f32> = a.qs.iter().map(|&q| f32::from(q) * a.d).collect();
            let mut b = random_block(Q4_K_BYTES, seed + 100);
            tame(&mut b, 0, 0.01);
            tame(&mut b, 2, 0.003);
            let mut w = [0.0; QK_K];
            dequantize_q4_k(&b, &mut w);
            let want: f64 = w.iter().zip(&deq_a).map(|(x, y)| f64::from(x * y)).sum();
            let got = dot_q4_k_q8_k(&b, &a);
            assert!(
                (f64::from(got) - want).abs() < 1e-3 * want.abs().max(1.0),
                "q4_k {got} {want}"
            );

            let mut b = random_block(Q6_K_BYTES, seed + 200);
            tame(&mut b, 208, 0.002);
            dequantize_q6_k(&b, &mut w);
            let want: f64 = w.iter().zip(&deq_a).map(|(x, y)| f64::from(x * y)).sum();
            let got = dot_q6_k_q8_k(&b, &a);
            assert!(
                (f64::from(got) - want).abs() < 1e-3 * want.abs().max(1.0),
                "q6_k {got} {want}"
            );
        }
    }

    /// The scale as llama.cpp's loop finds it, one value after another: the first value of
    /// the largest magnitude.
    fn scale_in_order(x: &[f32; QK_K]) -> f32 {
        let (mut max, mut amax) = (0.0f32, 0.0f32);
        for &v in x {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        if amax == 0.0 {
            0.0
        } else {
            1.0 / (-127.0 / max)
        }
    }

    #[test]
    fn the_scale_is_the_first_value_of_the_largest_magnitude() {
        let mut cases: Vec<[f32; QK_K]> = (0..20).map(acts).collect();
        cases.push([0.0; QK_K]);
        cases.push(std::array::from_fn(|i| if i == 7 { -0.0 } else { 0.0 }));
        // ties of magnitude, either sign first; a NaN passed over
        for (first, second) in [(-3.0, 3.0), (3.0, -3.0), (f32::NAN, 2.0)] {
            let mut x = acts(99);
            (x[40], x[200]) = (first, second);
            cases.push(x);
        }
        for (c, x) in cases.iter().enumerate() {
            let b = quantize_q8_k(x);
            assert_eq!(
                b.d.to_bits(),
                scale_in_order(x).to_bits(),
                "case {c}: the scale is not the first largest value's"
            );
            let sums: Vec<i16> =
                b.qs.chunks_exact(16)
                    .map(|g| g.iter().map(|&q| i16::from(q)).sum())
                    .collect();
            assert_eq!(b.bsums[..], sums[..], "case {c}: the sums of sixteen");
        }
    }

    #[test]
    fn nearest_int_rounds_ties_to_even() {
        for i in -300_000..300_000 {
            let x = i as f32 / 1000.0;
            assert_eq!(nearest_int(x), x.round_ties_even() as i32, "{x}");
        }
        for x in [
            0.5f32,
            1.5,
            2.5,
            -0.5,
            -1.5,
            -2.5,
            126.5,
            -127.5,
            0.499_999_97,
        ] {
            assert_eq!(nearest_int(x), x.round_ties_even() as i32, "{x}");
        }
    }

    #[test]
    fn q8_k_maps_the_largest_magnitude_to_minus_127() {
        let mut x = acts(7);
        x[3] = 9.0;
        let a = quantize_q8_k(&x);
        assert_eq!(a.qs[3], -127);
        assert!((a.d * -127.0 - 9.0).abs() < 1e-6);
        assert_eq!(
            a.bsums[0],
            a.qs[..16].iter().map(|&q| i16::from(q)).sum::<i16>()
        );
        assert_eq!(quantize_q8_k(&[0.0; QK_K]).d, 0.0);
    }
}
