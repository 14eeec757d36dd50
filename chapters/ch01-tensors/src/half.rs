//! Decoding 16-bit floats, by hand: IEEE 754 half precision (f16) and bfloat16 (bf16).
//!
//! Model files often store weights in 16 bits to halve their size. Both formats keep
//! the f32 idea — a sign, a biased exponent, a fraction — with fewer bits:
//!
//! ```text
//!         sign  exponent        fraction (mantissa)
//! f32      1    8 bits, bias 127   23 bits
//! f16      1    5 bits, bias 15    10 bits      range ±65504, ~3 decimal digits
//! bf16     1    8 bits, bias 127    7 bits      f32's range, ~2 decimal digits
//! ```
//!
//! bf16 is literally the top 16 bits of an f32, so decoding it is a shift. f16 has a
//! different exponent width and bias, so each field is moved across separately, with
//! three special cases: zero and subnormals (exponent field 0), infinity and NaN
//! (exponent field all ones).

// ANCHOR: f16_to_f32
/// Decodes an IEEE 754 binary16 value (`s eeeee mmmmmmmmmm`) to f32. Exact: every f16
/// value is representable in f32.
///
/// - exponent 1..=30 (normal): value = (−1)^s × 2^(e−15) × (1 + m/1024). Rebias the
///   exponent (e − 15 + 127) and move the 10 fraction bits to the top of f32's 23.
/// - exponent 0, m = 0: ±0.
/// - exponent 0, m ≠ 0 (subnormal): value = (−1)^s × 2^(−14) × m/1024, no implicit 1.
///   These are normal numbers in f32, so shift `m` left until its leading 1 reaches
///   the implicit-bit position, lowering the exponent by one per shift.
/// - exponent 31: infinity (m = 0) or NaN (m ≠ 0). A NaN keeps its payload bits and
///   comes out quiet (top fraction bit set), as the CPU's own conversion does.
pub fn f16_to_f32(bits: u16) -> f32 {
    let sign = u32::from(bits >> 15) << 31; // bit 15 -> bit 31
    let exp = u32::from((bits >> 10) & 0x1f); // 5 bits
    let mant = u32::from(bits & 0x3ff); // 10 bits
    let f32_bits = match (exp, mant) {
        (0, 0) => sign, // ±0
        (0, _) => {
            // Subnormal m × 2^-24. Normalize: find the leading 1 of the 10-bit fraction.
            let shift = mant.leading_zeros() - 21; // 1..=10 shifts put the top 1 at bit 10
            let m = (mant << shift) & 0x3ff; // drop the now-implicit leading 1
            let e = 127 - 15 + 1 - shift; // 2^(-14) scaled down by 2^shift
            sign | (e << 23) | (m << 13)
        }
        (0x1f, 0) => sign | (0xff << 23), // ±infinity
        (0x1f, _) => sign | (0xff << 23) | (1 << 22) | (mant << 13), // quiet NaN, same payload
        _ => sign | ((exp + 127 - 15) << 23) | (mant << 13),
    };
    f32::from_bits(f32_bits)
}
// ANCHOR_END: f16_to_f32

// ANCHOR: bf16_to_f32
/// Decodes a bfloat16 value to f32: bf16 is the top half of an f32 (same sign, same
/// 8-bit exponent, the first 7 of the 23 fraction bits), so put the bits back on top
/// and fill the bottom with zeros. Zero, subnormals, infinities and NaNs all carry over.
pub fn bf16_to_f32(bits: u16) -> f32 {
    f32::from_bits(u32::from(bits) << 16)
}
// ANCHOR_END: bf16_to_f32

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of an f16 bit pattern straight from the IEEE 754 definition, computed in
    /// f64 with powi — no bit manipulation, so it shares no logic with `f16_to_f32`.
    /// Every f16 value is exact in both f32 and f64, so the comparison can be exact.
    fn f16_reference(bits: u16) -> f64 {
        let s = if bits >> 15 == 1 { -1.0 } else { 1.0 };
        let e = i32::from((bits >> 10) & 0x1f);
        let m = f64::from(bits & 0x3ff);
        match e {
            0 => s * 2f64.powi(-14) * (m / 1024.0),
            31 if m == 0.0 => s * f64::INFINITY,
            31 => f64::NAN,
            _ => s * 2f64.powi(e - 15) * (1.0 + m / 1024.0),
        }
    }

    #[test]
    fn f16_all_65536_patterns_match_the_definition() {
        for bits in 0..=u16::MAX {
            let got = f16_to_f32(bits);
            let want = f16_reference(bits);
            if want.is_nan() {
                assert!(got.is_nan(), "{bits:#06x} should be NaN, got {got}");
            } else {
                assert_eq!(f64::from(got), want, "f16 {bits:#06x}");
                // The sign bit survives even on zero: 0x8000 is -0.0.
                assert_eq!(
                    got.is_sign_negative(),
                    bits >> 15 == 1,
                    "sign of {bits:#06x}"
                );
            }
        }
    }

    /// A second, independent referee: the CPU's own F16C conversion instruction, when
    /// the machine has it. It compares bit patterns, so NaN payloads and signs are checked too.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn f16_all_patterns_match_the_cpu_when_it_has_f16c() {
        if !std::arch::is_x86_feature_detected!("f16c") {
            return; // the definition-based test above still covers every pattern
        }
        #[target_feature(enable = "f16c")]
        fn cvt(bits: u16) -> f32 {
            use std::arch::x86_64::{_mm_cvtph_ps, _mm_cvtsi32_si128, _mm_cvtss_f32};
            _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(bits))))
        }
        for bits in 0..=u16::MAX {
            // SAFETY: f16c support was detected above.
            let want = unsafe { cvt(bits) };
            assert_eq!(
                f16_to_f32(bits).to_bits(),
                want.to_bits(),
                "f16 {bits:#06x}"
            );
        }
    }

    #[test]
    fn f16_landmarks() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x7bff), 65504.0); // largest finite f16
        assert_eq!(f16_to_f32(0x0400), 2f32.powi(-14)); // smallest normal
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24)); // smallest subnormal
        assert_eq!(f16_to_f32(0x7c00), f32::INFINITY);
        assert_eq!(f16_to_f32(0xfc00), f32::NEG_INFINITY);
        assert!(f16_to_f32(0x7e00).is_nan());
    }

    #[test]
    fn bf16_is_the_top_half_of_f32() {
        for bits in 0..=u16::MAX {
            let got = bf16_to_f32(bits);
            // Reference: take an f32 whose low half is zero, compare the top half.
            assert_eq!(got.to_bits() >> 16, u32::from(bits));
            assert_eq!(got.to_bits() & 0xffff, 0);
        }
        assert_eq!(bf16_to_f32(0x3f80), 1.0);
        assert_eq!(bf16_to_f32(0xc040), -3.0);
        assert_eq!(bf16_to_f32(0x7f80), f32::INFINITY);
        assert!(bf16_to_f32(0x7fc0).is_nan());
        // 1/3 ≈ 0.333: bf16 keeps 8 significant bits, so 0x3eab is 171/512 = 0.333984375.
        assert_eq!(bf16_to_f32(0x3eab), 171.0 / 512.0);
    }
}
