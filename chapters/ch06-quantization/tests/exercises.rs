#![cfg(feature = "exercises")]
//! One test per exercise: each checks your function against the chapter's own code, on
//! random blocks and on the cases where a plausible mistake shows.

use ch01_tensors::random::uniform;
use ch06_quantization::blocks::{BlockQ4_0, QK};
use ch06_quantization::exercises::*;
use ch06_quantization::{eval, f16, quantize};

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
fn ex1_decode_an_f16_with_one_multiplication() {
    for bits in 0..=u16::MAX {
        let want = f16::f16_to_f32(bits);
        let got = f16_to_f32_fast(bits);
        if want.is_nan() {
            assert!(
                got.is_nan(),
                "f16 {bits:#06x} is a NaN, you decoded {got:e}"
            );
            continue;
        }
        if got.to_bits() != want.to_bits() {
            let kind = match bits & 0x7c00 {
                0 if bits & 0x3ff == 0 => "a zero (keep its sign: 0x8000 is -0.0)",
                0 => "a subnormal: its 10-bit fraction, as an integer, times 2^-24",
                0x7c00 => "an infinity",
                _ => "a normal half: (bits & 0x7fff) << 13 as f32 bits, times 2^112",
            };
            panic!(
                "f16 {bits:#06x}: you decoded {got:e} (f32 bits {:#010x}), it is {want:e} ({:#010x}); it is {kind}",
                got.to_bits(),
                want.to_bits()
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
fn ex3_how_far_a_q8_0_block_can_be_off() {
    // Blocks at scales from 1e-7 to 1e2: the smallest have scales below f16's normal range.
    let mut cases: Vec<[f32; QK]> = (0..400)
        .map(|i| {
            let v = uniform(QK, 900 + i as u64);
            let scale = 10f32.powi(i as i32 % 10 - 7);
            std::array::from_fn(|j| v[j] * scale)
        })
        .collect();
    cases.push([0.0; QK]);
    for (i, x) in cases.iter().enumerate() {
        let bound = q8_0_error_bound(x);
        let block = quantize::quantize_q8_0(x);
        let mut back = [0.0f32; QK];
        quantize::dequantize_q8_0(&block, &mut back);
        let (j, err) = (0..QK)
            .map(|j| (j, (x[j] - back[j]).abs()))
            .fold((0, 0.0f32), |a, b| if b.1 > a.1 { b } else { a });
        let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        assert!(
            err <= bound * (1.0 + 1e-6),
            "block {i} (largest magnitude {amax:e}, d = {d:e}): element {j} came back {err:e} away, \
             more than your bound {bound:e}{}",
            if d < 2f32.powi(-14) {
                "; d is below f16's smallest normal number (2^-14), where storing it can cost up to 2^-25 \
                 however small it is"
            } else {
                ""
            }
        );
        // Not larger than the chapter's bound either: a bound of infinity would pass the above.
        let e = (d / 2048.0).max(2f32.powi(-25));
        let want = d / 2.0 + 127.0 * e;
        assert!(
            (bound - want).abs() <= want * 1e-5,
            "block {i} (largest magnitude {amax:e}): your bound is {bound:e}, the chapter's d/2 + 127·e(d) is {want:e} \
             with d = {d:e} and e(d) = max(|d|·2^-11, 2^-25) = {e:e}"
        );
    }
}

#[test]
fn ex4_how_far_the_prediction_moved() {
    let close = |got: f64, want: f64| (got - want).abs() <= 1e-9 + 1e-9 * want.abs();
    for seed in 0..50u64 {
        let n = 2 + (seed as usize * 37) % 300;
        let p: Vec<f32> = uniform(n, 3000 + seed).iter().map(|v| v * 8.0).collect();
        // q is p moved a little, as quantization moves logits.
        let q: Vec<f32> = p
            .iter()
            .zip(uniform(n, 4000 + seed))
            .map(|(a, b)| a + b * 0.3)
            .collect();
        let (got, want) = (kl_divergence(&p, &q), eval::kl_divergence(&p, &q));
        assert!(
            close(got, want),
            "{n} logits (seed {seed}): your KL(p ‖ q) is {got}, the chapter's is {want} (the two \
             distributions are close, so their KL is small: compute it in f64 from the logits on, \
             as an f32 softmax loses the digits it needs)"
        );
    }
    let p = [2.0f32, 1.0, 0.5, -1.0];
    let got = kl_divergence(&p, &p);
    assert!(
        got.abs() < 1e-12,
        "KL of a distribution from itself is 0, you got {got}"
    );
    let shifted: Vec<f32> = p.iter().map(|v| v + 1000.0).collect();
    let got = kl_divergence(&p, &shifted);
    assert!(
        got.abs() < 1e-9,
        "adding 1000 to every logit leaves the softmax unchanged, so the KL is 0; you got {got} \
         (exp(1000) overflows: subtract the largest logit before taking exp)"
    );
    let (p, q) = ([1000.0f32, 0.0, -1000.0], [999.0f32, 1.0, -1000.0]);
    let (got, want) = (kl_divergence(&p, &q), eval::kl_divergence(&p, &q));
    assert!(
        close(got, want),
        "logits {p:?} against {q:?}: your KL is {got}, the chapter's is {want} (work in log-probabilities: \
         a probability like e^-2000 is 0 in f64, but its log, -2000, is fine)"
    );
    let got = kl_divergence(&[3.0, 2.0, 1.0], &[1.0, 2.0, 3.0]);
    assert!(
        got > 0.0,
        "KL between different distributions is positive, you got {got}"
    );
}
