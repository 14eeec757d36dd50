#![cfg(feature = "exercises")]
//! One test per exercise: each checks your function against the chapter's own code, bit for
//! bit, on random blocks and on the cases where a plausible mistake shows.

use ch01_tensors::random::uniform;
use ch06_quantization::blocks::{BlockQ4_0, BlockQ8_1, QK};
use ch06_quantization::exercises::*;
use ch06_quantization::{dot, f16, quantize};

fn blocks(n: usize, seed: u64) -> Vec<[f32; QK]> {
    (0..n)
        .map(|i| {
            let v = uniform(QK, seed + i as u64);
            let scale = 10f32.powi(i as i32 % 7 - 4);
            std::array::from_fn(|j| v[j] * scale)
        })
        .collect()
}

#[test]
fn ex1_quantize_a_q8_0_block() {
    let mut cases = blocks(200, 1);
    cases.push([0.0; QK]);
    cases.push(std::array::from_fn(|j| {
        if j == 0 { 127.0 } else { j as f32 - 0.5 }
    })); // halves: d = 1
    cases.push(std::array::from_fn(|j| -(j as f32) * 0.37));
    for (i, x) in cases.iter().enumerate() {
        let want = quantize::quantize_q8_0(x);
        let (d, q) = quantize_q8_0_block(x);
        assert!(
            d == want.d,
            "block {i}: your scale is f16 {d:#06x}, llama.cpp's rule gives {:#06x} (d = max|x| / 127, stored with f32_to_f16)",
            want.d
        );
        if let Some(j) = (0..QK).find(|&j| q[j] != want.qs[j]) {
            panic!(
                "block {i}, element {j}: x = {} quantized to {}, llama.cpp's rule gives {} (round(x · (1/d)), halves away from zero)",
                x[j], q[j], want.qs[j]
            );
        }
    }
}

#[test]
fn ex2_unpack_a_q4_0_block() {
    for (i, x) in blocks(100, 50).iter().enumerate() {
        let mut block = [0u8; 18];
        quantize::quantize_q4_0(x, &mut block);
        let mut want = [0.0f32; QK];
        quantize::dequantize_q4_0(BlockQ4_0(&block), &mut want);
        let got = unpack_q4_0(&block);
        if let Some(j) = (0..QK).find(|&j| got[j].to_bits() != want[j].to_bits()) {
            let byte = block[2 + j % 16];
            panic!(
                "block {i}, element {j}: you unpacked {}, the block holds {} (element {j} is the {} nibble of byte {}: {byte:#04x}; \
                 elements j and j + 16 share byte j)",
                got[j],
                want[j],
                if j < 16 { "LOW" } else { "HIGH" },
                2 + j % 16
            );
        }
    }
}

#[test]
fn ex3_the_q4_1_q8_1_dot() {
    for seed in 0..40u64 {
        let nb = 1 + seed as usize % 6;
        let w = uniform(nb * QK, 100 + seed);
        let x = uniform(nb * QK, 200 + seed);
        // Offset the weights so every block's minimum matters.
        let w: Vec<f32> = w.iter().map(|v| v + 0.5 + seed as f32 * 0.1).collect();
        let mut row = vec![0u8; nb * 20];
        for (b, out) in w
            .as_chunks::<QK>()
            .0
            .iter()
            .zip(row.as_chunks_mut::<20>().0)
        {
            quantize::quantize_q4_1(b, out);
        }
        let a: Vec<BlockQ8_1> = x
            .as_chunks::<QK>()
            .0
            .iter()
            .map(quantize::quantize_q8_1)
            .collect();
        let want = dot::dot_q4_1_q8_1(&row, &a);
        let got = dot_q4_1_q8_1(&row, &a);
        let without_min: f32 = {
            let mut s = 0.0f32;
            for (wb, ab) in row.as_chunks::<20>().0.iter().zip(&a) {
                let d = f16::f16_to_f32(u16::from_le_bytes([wb[0], wb[1]]));
                let mut sumi = 0i32;
                for j in 0..16 {
                    sumi += i32::from(wb[4 + j] & 15) * i32::from(ab.qs[j])
                        + i32::from(wb[4 + j] >> 4) * i32::from(ab.qs[j + 16]);
                }
                s += (d * ab.scale()) * sumi as f32;
            }
            s
        };
        assert!(
            got.to_bits() != without_min.to_bits() || want.to_bits() == without_min.to_bits(),
            "row {seed}: your dot is {got}, which is the sum without the m·s terms: each block's minimum m times the \
             activation block's stored sum s is missing (the chapter's dot is {want})"
        );
        assert!(
            got.to_bits() == want.to_bits(),
            "row {seed} ({nb} blocks): your dot is {got}, the chapter's is {want}; compute each block's integer sum in i32, \
             then add (d·d_a)·sumi + m·s to an f32 running sum, block by block"
        );
    }
}

#[test]
fn ex4_f32_to_f16() {
    let mut tried = 0;
    for bits in 0..=u16::MAX {
        let v = f16::f16_to_f32(bits);
        if v.is_nan() {
            continue;
        }
        let next = f16::f16_to_f32(bits.wrapping_add(1));
        let mut xs = vec![
            v,
            f32::from_bits(v.to_bits().wrapping_add(1)),
            f32::from_bits(v.to_bits().wrapping_sub(1)),
        ];
        if next.is_finite() && (bits & 0x7fff) < 0x7bff {
            xs.push(((f64::from(v) + f64::from(next)) / 2.0) as f32); // the midpoint: ties to even
        }
        for x in xs {
            let want = f16::f32_to_f16(x);
            let got = f32_to_f16(x);
            assert!(
                got == want,
                "f32_to_f16({x:e}) (f32 bits {:#010x}) = {got:#06x}, the nearest f16 (ties to even) is {want:#06x}",
                x.to_bits()
            );
            tried += 1;
        }
    }
    for x in [
        1e10f32,
        -1e10,
        f32::INFINITY,
        f32::NEG_INFINITY,
        65520.0,
        1e-30,
        -0.0,
        0.0,
    ] {
        assert!(
            f32_to_f16(x) == f16::f32_to_f16(x),
            "f32_to_f16({x:e}): overflow, underflow and signed zero"
        );
    }
    let nan = f32_to_f16(f32::NAN);
    assert!(
        nan & 0x7c00 == 0x7c00 && nan & 0x3ff != 0,
        "NaN must stay a NaN (exponent all ones, fraction not zero), got {nan:#06x}"
    );
    assert!(tried > 200_000);
}
