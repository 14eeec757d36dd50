//! The kernels for the formats of [`crate::kquant`]: a whole row's dot product, scalar or
//! AVX2, chosen once like chapter 7's.
//!
//! Each kernel adds the blocks' f32 contributions in block order, and each block's
//! contribution is computed from exact integer sums with the same float operations as the
//! scalar code, so every level returns the same bits.

use ch06_quantization::blocks::BlockQ8_0;
use ch07_simd_parallel::Isa;

use crate::kquant::{self, BlockQ8K, Q4_K_BYTES, Q5_0_BYTES, Q6_K_BYTES};

/// Row dot products for the K-quant formats and Q5_0.
pub trait KKernels: Sync {
    fn name(&self) -> &'static str;
    /// A Q4_K row (whole blocks of 144 bytes) with its Q8_K activations.
    fn dot_q4_k(&self, w: &[u8], a: &[BlockQ8K]) -> f32;
    /// A Q6_K row (blocks of 210 bytes) with its Q8_K activations.
    fn dot_q6_k(&self, w: &[u8], a: &[BlockQ8K]) -> f32;
    /// A Q5_0 row (blocks of 22 bytes) with its Q8_0 activations.
    fn dot_q5_0(&self, w: &[u8], a: &[BlockQ8_0]) -> f32;
}

/// The plain-Rust kernels of [`crate::kquant`].
pub struct ScalarK;

impl KKernels for ScalarK {
    fn name(&self) -> &'static str {
        "scalar"
    }
    fn dot_q4_k(&self, w: &[u8], a: &[BlockQ8K]) -> f32 {
        w.chunks_exact(Q4_K_BYTES)
            .zip(a)
            .fold(0.0, |acc, (b, a)| acc + kquant::dot_q4_k_q8_k(b, a))
    }
    fn dot_q6_k(&self, w: &[u8], a: &[BlockQ8K]) -> f32 {
        w.chunks_exact(Q6_K_BYTES)
            .zip(a)
            .fold(0.0, |acc, (b, a)| acc + kquant::dot_q6_k_q8_k(b, a))
    }
    fn dot_q5_0(&self, w: &[u8], a: &[BlockQ8_0]) -> f32 {
        w.chunks_exact(Q5_0_BYTES)
            .zip(a)
            .fold(0.0, |acc, (b, a)| acc + kquant::dot_q5_0_q8_0(b, a))
    }
}

/// The kernels for an instruction-set level (AVX2 serves AVX-512 too).
pub fn for_isa(isa: Isa) -> &'static dyn KKernels {
    #[cfg(target_arch = "x86_64")]
    if isa != Isa::Scalar && is_x86_feature_detected!("avx2") {
        return &avx2::Avx2K;
    }
    let _ = isa;
    &ScalarK
}

#[cfg(target_arch = "x86_64")]
pub mod avx2 {
    //! AVX2 versions: `vpmaddubsw` needs one unsigned operand, and the K-quants' 4- and
    //! 6-bit quants are unsigned before their offset, so the weights go in unsigned and the
    //! offsets are taken out with the activations' sums.
    use super::*;
    use std::arch::x86_64::*;

    pub struct Avx2K;

    impl KKernels for Avx2K {
        fn name(&self) -> &'static str {
            "avx2"
        }
        fn dot_q4_k(&self, w: &[u8], a: &[BlockQ8K]) -> f32 {
            // SAFETY: for_isa only hands this out when the CPU has AVX2.
            unsafe { dot_q4_k(w, a) }
        }
        fn dot_q6_k(&self, w: &[u8], a: &[BlockQ8K]) -> f32 {
            // SAFETY: as above.
            unsafe { dot_q6_k(w, a) }
        }
        fn dot_q5_0(&self, w: &[u8], a: &[BlockQ8_0]) -> f32 {
            // SAFETY: as above.
            unsafe { dot_q5_0(w, a) }
        }
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn hsum(v: __m256i) -> i32 {
        let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
        _mm_cvtsi128_si32(s)
    }

    /// 32 unsigned bytes × 32 signed bytes → 8 × i32 partial sums.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn madd_u8_i8(u: __m256i, s: __m256i) -> __m256i {
        _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))
    }

    #[inline]
    fn f16(b: &[u8], i: usize) -> f32 {
        ch06_quantization::f16::f16_to_f32_fast(u16::from_le_bytes([b[i], b[i + 1]]))
    }

    // ANCHOR: avx2_q4_k
    #[target_feature(enable = "avx2")]
    unsafe fn dot_q4_k(w: &[u8], a: &[BlockQ8K]) -> f32 {
        let low = _mm256_set1_epi8(0x0f);
        let mut acc = 0.0f32;
        for (b, a) in w.chunks_exact(Q4_K_BYTES).zip(a) {
            let (d, dmin) = (f16(b, 0), f16(b, 2));
            let scales = &b[4..16];
            let (mut sum_q, mut sum_m) = (0i32, 0i32);
            for c in 0..4 {
                // 32 bytes: sub-block 2c in the low nibbles, 2c + 1 in the high ones.
                // SAFETY: bytes 16 + 32c .. 48 + 32c of a 144-byte block; 64 activations at 64c.
                let (q, a0, a1) = unsafe {
                    (
                        _mm256_loadu_si256(b.as_ptr().add(16 + 32 * c).cast()),
                        _mm256_loadu_si256(a.qs.as_ptr().add(64 * c).cast()),
                        _mm256_loadu_si256(a.qs.as_ptr().add(64 * c + 32).cast()),
                    )
                };
                let lo = _mm256_and_si256(q, low);
                let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q), low);
                let (sc0, m0) = kquant::scale_min_k4(2 * c, scales);
                let (sc1, m1) = kquant::scale_min_k4(2 * c + 1, scales);
                sum_q += i32::from(sc0) * hsum(madd_u8_i8(lo, a0));
                sum_q += i32::from(sc1) * hsum(madd_u8_i8(hi, a1));
                let s = |g: usize| i32::from(a.bsums[g]);
                sum_m += i32::from(m0) * (s(4 * c) + s(4 * c + 1));
                sum_m += i32::from(m1) * (s(4 * c + 2) + s(4 * c + 3));
            }
            acc += d * a.d * sum_q as f32 - dmin * a.d * sum_m as f32;
        }
        acc
    }
    // ANCHOR_END: avx2_q4_k

    #[target_feature(enable = "avx2")]
    unsafe fn dot_q6_k(w: &[u8], a: &[BlockQ8K]) -> f32 {
        let low = _mm256_set1_epi8(0x0f);
        let three = _mm256_set1_epi8(3);
        let mut acc = 0.0f32;
        for (b, a) in w.chunks_exact(Q6_K_BYTES).zip(a) {
            let sc = &b[192..208];
            let d = f16(b, 208);
            let mut sum = 0i32;
            for h in 0..2 {
                // SAFETY: ql bytes 64h..64h+64, qh bytes 128+32h..+32 of a 210-byte block.
                let (ql0, ql1, qh) = unsafe {
                    (
                        _mm256_loadu_si256(b.as_ptr().add(64 * h).cast()),
                        _mm256_loadu_si256(b.as_ptr().add(64 * h + 32).cast()),
                        _mm256_loadu_si256(b.as_ptr().add(128 + 32 * h).cast()),
                    )
                };
                // The four runs of 32 values of this half, unsigned 0..64.
                let runs = [
                    _mm256_or_si256(_mm256_and_si256(ql0, low), _mm256_slli_epi16::<4>(_mm256_and_si256(qh, three))),
                    _mm256_or_si256(
                        _mm256_and_si256(ql1, low),
                        _mm256_slli_epi16::<4>(_mm256_and_si256(_mm256_srli_epi16::<2>(qh), three)),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16::<4>(ql0), low),
                        _mm256_slli_epi16::<4>(_mm256_and_si256(_mm256_srli_epi16::<4>(qh), three)),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16::<4>(ql1), low),
                        _mm256_slli_epi16::<4>(_mm256_and_si256(_mm256_srli_epi16::<6>(qh), three)),
                    ),
                ];
                for (r, q) in runs.into_iter().enumerate() {
                    let base = 128 * h + 32 * r;
                    // SAFETY: 32 activations at base < 256.
                    let av = unsafe { _mm256_loadu_si256(a.qs.as_ptr().add(base).cast()) };
                    // Σ (q − 32)·a = Σ q·a − 32·Σ a, per group of 16 (one scale each).
                    let p = madd_u8_i8(q, av); // 8 lanes: lanes 0-3 are values 0-15 ... per 128-bit half
                    let lo16 = {
                        let x = _mm256_castsi256_si128(p);
                        let x = _mm_add_epi32(x, _mm_shuffle_epi32::<0b01_00_11_10>(x));
                        let x = _mm_add_epi32(x, _mm_shuffle_epi32::<0b10_11_00_01>(x));
                        _mm_cvtsi128_si32(x)
                    };
                    let hi16 = {
                        let x = _mm256_extracti128_si256::<1>(p);
                        let x = _mm_add_epi32(x, _mm_shuffle_epi32::<0b01_00_11_10>(x));
                        let x = _mm_add_epi32(x, _mm_shuffle_epi32::<0b10_11_00_01>(x));
                        _mm_cvtsi128_si32(x)
                    };
                    let g = base / 16;
                    let s0 = i32::from(sc[g] as i8);
                    let s1 = i32::from(sc[g + 1] as i8);
                    sum += s0 * (lo16 - 32 * i32::from(a.bsums[g]));
                    sum += s1 * (hi16 - 32 * i32::from(a.bsums[g + 1]));
                }
            }
            acc += d * a.d * sum as f32;
        }
        acc
    }

    #[target_feature(enable = "avx2")]
    unsafe fn dot_q5_0(w: &[u8], a: &[BlockQ8_0]) -> f32 {
        let low = _mm_set1_epi8(0x0f);
        // Byte k of the 32 gets bit k of qh: spread qh's bytes, then test one bit per lane.
        let spread = _mm256_setr_epi8(
            0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3,
            3, 3,
        );
        let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
        let sixteen = _mm256_set1_epi8(16);
        let mut acc = 0.0f32;
        for (b, a) in w.chunks_exact(Q5_0_BYTES).zip(a) {
            let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
            // SAFETY: 16 nibble bytes at 6..22 of a 22-byte block; 32 activations.
            let (nib, av) = unsafe {
                (
                    _mm_loadu_si128(b.as_ptr().add(6).cast()),
                    _mm256_loadu_si256(a.qs.as_ptr().cast()),
                )
            };
            let q = _mm256_set_m128i(
                _mm_and_si128(_mm_srli_epi16::<4>(nib), low),
                _mm_and_si128(nib, low),
            );
            let h = _mm256_shuffle_epi8(_mm256_set1_epi32(qh as i32), spread);
            let h = _mm256_cmpeq_epi8(_mm256_and_si256(h, bit), bit); // 0xff where the bit is set
            let q = _mm256_or_si256(q, _mm256_and_si256(h, sixteen)); // unsigned 0..32
            // Σ (q − 16)·a = Σ q·a − 16·Σ a.
            let dot = hsum(madd_u8_i8(q, av));
            let sum_a = hsum(madd_u8_i8(_mm256_set1_epi8(1), av));
            let isum = dot - 16 * sum_a;
            acc += f16(b, 0) * ch06_quantization::f16::f16_to_f32_fast(a.d) * isum as f32;
        }
        acc
    }
}
