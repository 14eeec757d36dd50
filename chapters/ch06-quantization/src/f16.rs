//! f32 → f16, the direction chapter 1 did not need.
//!
//! Every block format in this chapter stores its scale as an IEEE 754 half (`ggml_half` in
//! llama.cpp). Reading one back is chapter 1's [`f16_to_f32`]; writing one means rounding
//! 23 fraction bits to 10, and to be byte-identical with llama.cpp (which uses the CPU's
//! `vcvtps2ph`, or an equivalent bit trick) the rounding must be the CPU's: to nearest,
//! ties to even.

pub use ch01_tensors::half::f16_to_f32;

// ANCHOR: f16_fast
/// Chapter 1's [`f16_to_f32`] with fewer branches, for the kernels, which decode two to
/// four scales for every 32 weights. Shifting the 15 bits below the sign up by 13 lines
/// f16's exponent and fraction up with f32's; the exponent is then 112 too small (f16's
/// bias is 15, f32's 127), and one multiplication by 2^112 fixes that for normal numbers.
/// Subnormals (exponent 0) take their own path: shifted, they would be f32 subnormals, and
/// many x86 cores (Intel's among them) take a slow microcode assist to multiply those.
/// That is not rare: the per-block scales of small weights (Gemma-3's Q6_K blocks) are often
/// f16 subnormals.
/// Infinity and NaN (exponent 31) take chapter 1's careful path. The test compares all
/// 65 536 inputs with chapter 1's.
#[inline]
pub fn f16_to_f32_fast(bits: u16) -> f32 {
    match bits & 0x7c00 {
        0x7c00 => f16_to_f32(bits), // infinity or NaN
        0 => {
            // fraction · 2^-24, from an integer and a normal power of two
            let magnitude = f32::from(bits & 0x3ff) * f32::from_bits((127 - 24) << 23);
            f32::from_bits(magnitude.to_bits() | (u32::from(bits & 0x8000) << 16))
        }
        _ => {
            let magnitude =
                f32::from_bits(u32::from(bits & 0x7fff) << 13) * f32::from_bits((127 + 112) << 23);
            f32::from_bits(magnitude.to_bits() | (u32::from(bits & 0x8000) << 16))
        }
    }
}
// ANCHOR_END: f16_fast

// ANCHOR: f32_to_f16
/// The nearest f16 to `x` (ties to the even one), as its 16 bits. Too large a value becomes
/// ±infinity, too small a one ±0 or a subnormal; NaN stays NaN.
pub fn f32_to_f16(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32; // biased by 127
    let frac = bits & 0x7f_ffff; // 23 bits
    if exp == 0xff {
        // Infinity keeps a zero fraction; a NaN keeps its top payload bits and is made quiet.
        let nan = if frac != 0 {
            0x200 | (frac >> 13) as u16
        } else {
            0
        };
        return sign | 0x7c00 | nan;
    }
    let e = exp - 127 + 15; // f16's biased exponent, if x is a normal f16
    if e >= 0x1f {
        return sign | 0x7c00; // beyond 65504 (after rounding): infinity
    }
    // The significand with its implicit leading 1 (24 bits; f32 subnormals are far below f16's
    // range and round to 0 below), and how far right it must move to leave 10 fraction bits
    // (13 for a normal f16; more for a subnormal, whose exponent is pinned at 2^-14).
    let (significand, shift) = if e > 0 {
        (frac | 0x80_0000, 13)
    } else {
        (frac | 0x80_0000, (14 - e) as u32)
    };
    if shift > 24 {
        return sign; // below half the smallest subnormal: ±0
    }
    let kept = significand >> shift;
    let rest = significand & ((1 << shift) - 1);
    let half = 1 << (shift - 1);
    let round_up = rest > half || (rest == half && kept & 1 == 1);
    // For a normal number `kept` still has the implicit 1 at bit 10: drop it and put the
    // exponent above. Adding the rounding carry last lets it ripple into the exponent
    // (1.1111111111 × 2^e rounds up to 1.0 × 2^(e+1)), even up to infinity.
    let magnitude = if e > 0 {
        ((e as u32) << 10) | (kept & 0x3ff)
    } else {
        kept // a subnormal: exponent field 0 (a carry out of it gives the smallest normal)
    };
    sign | (magnitude + u32::from(round_up)) as u16
}
// ANCHOR_END: f32_to_f16

/// `x` rounded through f16 and back: what a stored scale really is.
pub fn round_f16(x: f32) -> f32 {
    f16_to_f32(f32_to_f16(x))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_finite_f16_survives_the_round_trip() {
        for bits in 0..=u16::MAX {
            let exp = (bits >> 10) & 0x1f;
            if exp == 0x1f && bits & 0x3ff != 0 {
                continue; // NaNs: checked below
            }
            assert_eq!(f32_to_f16(f16_to_f32(bits)), bits, "f16 bits {bits:#06x}");
        }
        assert!(f16_to_f32(f32_to_f16(f32::NAN)).is_nan());
    }

    #[test]
    fn fast_decoding_equals_chapter_1s() {
        for bits in 0..=u16::MAX {
            let (a, b) = (f16_to_f32_fast(bits), f16_to_f32(bits));
            assert!(
                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                "f16 bits {bits:#06x}: {a} vs {b}"
            );
        }
    }

    #[test]
    fn halfway_values_round_to_even() {
        // Between two neighbouring f16 values a and b, the midpoint goes to the one whose last
        // fraction bit is 0; anything past the midpoint goes to the nearer one.
        for bits in [
            0x0001u16, 0x03ff, 0x0400, 0x3c00, 0x3c01, 0x7bfe, 0x8400, 0xbc01,
        ] {
            let (a, b) = (f16_to_f32(bits), f16_to_f32(bits + 1));
            let mid = (a as f64 + b as f64) / 2.0;
            let mid32 = mid as f32;
            assert_eq!(mid32 as f64, mid, "midpoint is exact in f32");
            let even = if bits & 1 == 0 { bits } else { bits + 1 };
            assert_eq!(f32_to_f16(mid32), even, "midpoint after {bits:#06x}");
            let above = f32::from_bits(mid32.to_bits() + 1);
            let below = f32::from_bits(mid32.to_bits() - 1);
            // (magnitudes grow with the bits for both signs)
            assert_eq!(
                f32_to_f16(above),
                bits + 1,
                "just past the midpoint after {bits:#06x}"
            );
            assert_eq!(
                f32_to_f16(below),
                bits,
                "just before the midpoint after {bits:#06x}"
            );
        }
    }

    #[test]
    fn extremes() {
        assert_eq!(f32_to_f16(65504.0), 0x7bff);
        assert_eq!(
            f32_to_f16(65520.0),
            0x7c00,
            "the midpoint to 65536 rounds to infinity"
        );
        assert_eq!(f32_to_f16(65519.99), 0x7bff);
        assert_eq!(f32_to_f16(-1e9), 0xfc00);
        assert_eq!(f32_to_f16(f32::INFINITY), 0x7c00);
        assert_eq!(f32_to_f16(2f32.powi(-24)), 0x0001, "smallest subnormal");
        assert_eq!(
            f32_to_f16(2f32.powi(-25)),
            0x0000,
            "half of it ties to even: zero"
        );
        assert_eq!(f32_to_f16(2f32.powi(-25) * 1.01), 0x0001);
        assert_eq!(f32_to_f16(-0.0), 0x8000);
        assert_eq!(f32_to_f16(1e-30), 0x0000);
        assert_eq!(f32_to_f16(2f32.powi(-14)), 0x0400, "smallest normal");
        assert_eq!(
            f32_to_f16(2f32.powi(-14) - 2f32.powi(-25)),
            0x0400,
            "a subnormal rounding up into the normals"
        );
    }
}
