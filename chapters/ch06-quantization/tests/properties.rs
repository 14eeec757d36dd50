//! Properties every format must have, on random blocks (proptest) and edge cases.
//!
//! The bounds are the ones the book derives. A scale `d` is stored as an f16, which is off
//! from the f32 it was computed as by at most `e(d) = max(|d|·2^-11, 2^-25)`: a relative
//! 2^-11 for normal f16 values, but an absolute 2^-25 (half the smallest subnormal step) for
//! scales below 2^-14 ≈ 6.1e-5, where f16 runs out of exponent. Then:
//!
//! - Q8_0: `|x − x̂| ≤ d/2 + 127·e(d)`, with `d = max|x| / 127`;
//! - Q4_0: `|x − x̂| ≤ |d| + 8·e(d)`, with `|d| = max|x| / 8` (the one level the
//!   negative side has and the positive side lacks can cost a whole step);
//! - Q4_1: `|x − x̂| ≤ d/2 + 15·e(d) + e(min)`, with `d = (max − min) / 15`.
//!
//! Each bound gets a relative 1e-6 of slack for f32 arithmetic.

use ch06_quantization::blocks::{BlockQ4_0, BlockQ4_1, QK};
use ch06_quantization::quantize::*;
use ch06_quantization::{Format, QMatrix, ScaleRule};
use proptest::prelude::*;

const EPS16: f32 = 1.0 / 2048.0; // 2^-11: f16's relative rounding

/// How far a value can move when it is stored as an f16 (see the module comment).
fn e(v: f32) -> f32 {
    (v.abs() * EPS16).max(2f32.powi(-25))
}

/// Blocks of 32 values, at scales from 1e-4 to 1e3, optionally shifted off zero.
fn blocks() -> impl Strategy<Value = [f32; QK]> {
    (
        prop::array::uniform32(-1.0f32..1.0),
        -4i32..4,
        prop_oneof![Just(0.0f32), -2.0f32..2.0],
    )
        .prop_map(|(u, exp, shift)| {
            let scale = 10f32.powi(exp);
            std::array::from_fn(|j| (u[j] + shift) * scale)
        })
}

fn q8_0_round_trip(x: &[f32; QK]) -> [f32; QK] {
    let mut y = [0.0; QK];
    dequantize_q8_0(&quantize_q8_0(x), &mut y);
    y
}

fn q4_0_round_trip(x: &[f32; QK]) -> ([u8; 18], [f32; QK]) {
    let mut b = [0u8; 18];
    quantize_q4_0(x, &mut b);
    let mut y = [0.0; QK];
    dequantize_q4_0(BlockQ4_0(&b), &mut y);
    (b, y)
}

fn q4_1_round_trip(x: &[f32; QK]) -> ([u8; 20], [f32; QK]) {
    let mut b = [0u8; 20];
    quantize_q4_1(x, &mut b);
    let mut y = [0.0; QK];
    dequantize_q4_1(BlockQ4_1(&b), &mut y);
    (b, y)
}

fn amax(x: &[f32; QK]) -> f32 {
    x.iter().fold(0.0f32, |m, v| m.max(v.abs()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn q8_0_error_is_within_half_a_step(x in blocks()) {
        let d = amax(&x) / 127.0;
        let bound = (d / 2.0 + 127.0 * e(d)) * (1.0 + 1e-6);
        for (j, (a, b)) in x.iter().zip(&q8_0_round_trip(&x)).enumerate() {
            prop_assert!((a - b).abs() <= bound, "value {j}: {a} came back as {b}, more than {bound} away (d = {d})");
        }
    }

    #[test]
    fn q4_0_error_is_within_one_step(x in blocks()) {
        let d = amax(&x) / 8.0;
        let bound = (d + 8.0 * e(d)) * (1.0 + 1e-6);
        let (_, y) = q4_0_round_trip(&x);
        for (j, (a, b)) in x.iter().zip(&y).enumerate() {
            prop_assert!((a - b).abs() <= bound, "value {j}: {a} came back as {b}, more than {bound} away (|d| = {d})");
        }
    }

    #[test]
    fn q4_1_error_is_within_half_a_step(x in blocks()) {
        let min = x.iter().copied().fold(f32::MAX, f32::min);
        let max = x.iter().copied().fold(f32::MIN, f32::max);
        let d = (max - min) / 15.0;
        let bound = (d / 2.0 + 15.0 * e(d) + e(min)) * (1.0 + 1e-6) + max.abs() * 1e-6;
        let (_, y) = q4_1_round_trip(&x);
        for (j, (a, b)) in x.iter().zip(&y).enumerate() {
            prop_assert!((a - b).abs() <= bound, "value {j}: {a} came back as {b}, more than {bound} away (d = {d}, min = {min})");
        }
    }

    /// Quantizing what a block dequantizes to gives the block back: quantization is
    /// idempotent, which is also why SmolLM2's f32 weights (dequantized from its Q4_1 file)
    /// quantize back to the shipped bytes.
    #[test]
    fn quantize_dequantize_quantize_is_a_fixed_point(x in blocks()) {
        let first = quantize_q8_0(&x);
        let mut y = [0.0; QK];
        dequantize_q8_0(&first, &mut y);
        prop_assert_eq!(quantize_q8_0(&y), first, "Q8_0 block changed when re-quantized");
        let (b40, y40) = q4_0_round_trip(&x);
        prop_assert_eq!(q4_0_round_trip(&y40).0, b40, "Q4_0 block changed when re-quantized");
        let (b41, y41) = q4_1_round_trip(&x);
        // A minimum of −0 (a tiny negative rounded to f16) dequantizes to values whose zeros
        // carry no sign, so it comes back as +0: the same block, the same numbers.
        let plus_zero = |mut b: [u8; 20]| {
            if b[2..4] == [0x00, 0x80] {
                b[3] = 0;
            }
            b
        };
        prop_assert_eq!(
            plus_zero(q4_1_round_trip(&y41).0),
            plus_zero(b41),
            "Q4_1 block changed when re-quantized"
        );
    }

    /// The integer dot product against the f32 dot of the dequantized weights with the
    /// unquantized activations: the difference is the activations' rounding, at most half a
    /// Q8 step per value: `Σ_j |w_j| · (d_a/2 + 127·d_a·2^-11)` summed over blocks, plus the
    /// f16 rounding of Q8_1's stored sum for Q4_1 (`|m| · |s| · 2^-11` a block).
    #[test]
    fn integer_dot_is_the_dequantized_dot_within_the_activation_error(
        w in prop::collection::vec(-1.0f32..1.0, 4 * QK),
        x in prop::collection::vec(-1.0f32..1.0, 4 * QK),
    ) {
        for format in [Format::Int8, Format::Q8_0, Format::Q4_0, Format::Q4_1] {
            let m = QMatrix::quantize(&w, 1, 4 * QK, format, ScaleRule::Absmax).unwrap();
            let mut wd = vec![0.0f32; 4 * QK];
            m.dequantize_row(0, &mut wd);
            let exact: f64 = wd.iter().zip(&x).map(|(a, b)| f64::from(*a) * f64::from(*b)).sum();
            let mut bound = 0.0f64;
            for (wb, xb) in wd.chunks(QK).zip(x.chunks(QK)) {
                let da = f64::from(xb.iter().fold(0.0f32, |m, v| m.max(v.abs()))) / 127.0;
                let wsum: f64 = wb.iter().map(|v| f64::from(v.abs())).sum();
                bound += wsum * (da / 2.0 + 127.0 * da / 2048.0);
                if format == Format::Q4_1 {
                    let wmin = wb.iter().fold(f32::MAX, |m, &v| m.min(v)).abs();
                    let xsum: f64 = xb.iter().map(|v| f64::from(v.abs())).sum();
                    bound += f64::from(wmin) * xsum * 1.01 / 2048.0;
                }
            }
            let mut out = [0.0f32];
            m.matmul(&mut out, &x, 1);
            let diff = (f64::from(out[0]) - exact).abs();
            prop_assert!(diff <= bound * 1.001 + 1e-5, "{}: integer dot {} vs dequantized dot {exact}: {diff} > bound {bound}", format.name(), out[0]);
        }
    }
}
