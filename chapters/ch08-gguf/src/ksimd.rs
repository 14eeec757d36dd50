//! The kernels for the formats of [`crate::kquant`]: a whole row's dot product, scalar or
//! AVX2, chosen once like chapter 7's.
//!
//! Each kernel adds the blocks' f32 contributions in block order, and each block's
//! contribution is computed from exact integer sums with the same float operations as the
//! scalar code, so every level returns the same bits.

use ch07_simd_parallel::Isa;

use crate::kquant::{self, BlockQ8K, Q4_K_BYTES, Q5_0_BYTES, Q6_K_BYTES, Q8_0Wide};

/// Row dot products for the K-quant formats and Q5_0.
pub trait KKernels: Sync {
    fn name(&self) -> &'static str;
    /// A Q4_K row (whole blocks of 144 bytes) with its Q8_K activations.
    fn dot_q4_k(&self, w: &[u8], a: &[BlockQ8K]) -> f32;
    /// A Q6_K row (blocks of 210 bytes) with its Q8_K activations.
    fn dot_q6_k(&self, w: &[u8], a: &[BlockQ8K]) -> f32;
    /// A Q5_0 row (blocks of 22 bytes) with its Q8_0 activations.
    fn dot_q5_0(&self, w: &[u8], a: &[Q8_0Wide]) -> f32;
    /// One row with four tokens' activations: four `dot_q4_k` results, bit for bit. SIMD
    /// kernels unpack each weight block once for the four.
    fn dot4_q4_k(&self, w: &[u8], a: [&[BlockQ8K]; 4]) -> [f32; 4] {
        a.map(|a| self.dot_q4_k(w, a))
    }
    fn dot4_q6_k(&self, w: &[u8], a: [&[BlockQ8K]; 4]) -> [f32; 4] {
        a.map(|a| self.dot_q6_k(w, a))
    }
    fn dot4_q5_0(&self, w: &[u8], a: [&[Q8_0Wide]; 4]) -> [f32; 4] {
        a.map(|a| self.dot_q5_0(w, a))
    }
    /// Four rows with one token's activations (a decode step): four `dot_*` results.
    fn rows4_q4_k(&self, w: [&[u8]; 4], a: &[BlockQ8K]) -> [f32; 4] {
        w.map(|w| self.dot_q4_k(w, a))
    }
    fn rows4_q6_k(&self, w: [&[u8]; 4], a: &[BlockQ8K]) -> [f32; 4] {
        w.map(|w| self.dot_q6_k(w, a))
    }
    fn rows4_q5_0(&self, w: [&[u8]; 4], a: &[Q8_0Wide]) -> [f32; 4] {
        w.map(|w| self.dot_q5_0(w, a))
    }
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
    fn dot_q5_0(&self, w: &[u8], a: &[Q8_0Wide]) -> f32 {
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
    //! AVX2 versions. `vpmaddubsw` needs one unsigned operand: the K-quants' 4- and 6-bit
    //! quants are unsigned before their offset, so they go in as they are and the offset is
    //! taken out with the activations' precomputed sums; Q5_0's quants are made signed and
    //! chapter 7's sign trick moves the sign onto them, leaving the activations unsigned. The sub-block scales ride in `vpmaddwd`'s second operand,
    //! so a whole super-block needs one horizontal sum per token, not one per sub-block.
    use super::*;
    use std::arch::x86_64::*;

    pub struct Avx2K;

    impl KKernels for Avx2K {
        fn name(&self) -> &'static str {
            "avx2"
        }
        fn dot_q4_k(&self, w: &[u8], a: &[BlockQ8K]) -> f32 {
            // SAFETY: for_isa only hands this out when the CPU has AVX2.
            (unsafe { q4_k::<1, 1>([w], [a]) })[0][0]
        }
        fn dot_q6_k(&self, w: &[u8], a: &[BlockQ8K]) -> f32 {
            // SAFETY: as above.
            (unsafe { q6_k::<1, 1>([w], [a]) })[0][0]
        }
        fn dot_q5_0(&self, w: &[u8], a: &[Q8_0Wide]) -> f32 {
            // SAFETY: as above.
            (unsafe { q5_0::<1, 1>([w], [a]) })[0][0]
        }
        fn dot4_q4_k(&self, w: &[u8], a: [&[BlockQ8K]; 4]) -> [f32; 4] {
            // SAFETY: as above.
            (unsafe { q4_k::<1, 4>([w], a) })[0]
        }
        fn dot4_q6_k(&self, w: &[u8], a: [&[BlockQ8K]; 4]) -> [f32; 4] {
            // SAFETY: as above.
            (unsafe { q6_k::<1, 4>([w], a) })[0]
        }
        fn dot4_q5_0(&self, w: &[u8], a: [&[Q8_0Wide]; 4]) -> [f32; 4] {
            // SAFETY: as above.
            (unsafe { q5_0::<1, 4>([w], a) })[0]
        }
        fn rows4_q4_k(&self, w: [&[u8]; 4], a: &[BlockQ8K]) -> [f32; 4] {
            // SAFETY: as above.
            (unsafe { q4_k::<4, 1>(w, [a]) }).map(|r| r[0])
        }
        fn rows4_q6_k(&self, w: [&[u8]; 4], a: &[BlockQ8K]) -> [f32; 4] {
            // SAFETY: as above.
            (unsafe { q6_k::<4, 1>(w, [a]) }).map(|r| r[0])
        }
        fn rows4_q5_0(&self, w: [&[u8]; 4], a: &[Q8_0Wide]) -> [f32; 4] {
            // SAFETY: as above.
            (unsafe { q5_0::<4, 1>(w, [a]) }).map(|r| r[0])
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

    /// The lane sums of `N` vectors: for four, three `vphaddd` and one add reduce them all
    /// at once instead of four separate horizontal sums.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn hsums<const N: usize>(v: &[__m256i; N]) -> [i32; N] {
        if N == 4 {
            let h = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
            let s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h));
            let mut out = [0i32; 4];
            // SAFETY: four i32 into four i32.
            unsafe { _mm_storeu_si128(out.as_mut_ptr().cast(), s) };
            std::array::from_fn(|t| out[t])
        } else {
            std::array::from_fn(|t| hsum(v[t]))
        }
    }

    /// `Σ_g scale_g · bsum_g` over the 16 groups of a Q6_K block: sixteen i8 × i16
    /// products in one `vpmaddwd`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn scaled_sums(sc: &[u8], bsums: &[i16; 16]) -> i32 {
        assert!(sc.len() >= 16);
        // SAFETY: 16 bytes of scales (checked) and 16 i16 sums.
        let (s, b) = unsafe {
            (
                _mm256_cvtepi8_epi16(_mm_loadu_si128(sc.as_ptr().cast())),
                _mm256_loadu_si256(bsums.as_ptr().cast()),
            )
        };
        hsum(_mm256_madd_epi16(s, b))
    }

    #[inline]
    fn f16(b: &[u8], i: usize) -> f32 {
        ch06_quantization::f16::f16_to_f32_fast(u16::from_le_bytes([b[i], b[i + 1]]))
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn load(p: &[i8], at: usize) -> __m256i {
        assert!(at + 32 <= p.len());
        // SAFETY: 32 bytes at `at`, checked above.
        unsafe { _mm256_loadu_si256(p.as_ptr().add(at).cast()) }
    }

    /// The sums of an `R × T` grid of lane vectors: four at once when there are four.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn grid_sums<const R: usize, const T: usize>(v: &[[__m256i; T]; R]) -> [[i32; T]; R] {
        if R * T == 4 {
            let flat: [__m256i; 4] = std::array::from_fn(|i| v[i / T][i % T]);
            let s = hsums(&flat);
            std::array::from_fn(|r| std::array::from_fn(|t| s[r * T + t]))
        } else {
            std::array::from_fn(|r| std::array::from_fn(|t| hsum(v[r][t])))
        }
    }

    // ANCHOR: avx2_q4_k
    /// `R` Q4_K rows against `T` tokens (1 × 1, 1 × 4 for a prefill, 4 × 1 for a decode step):
    /// each weight block is unpacked once for its `T` tokens.
    #[target_feature(enable = "avx2")]
    unsafe fn q4_k<const R: usize, const T: usize>(
        w: [&[u8]; R],
        a: [&[BlockQ8K]; T],
    ) -> [[f32; T]; R] {
        let low = _mm256_set1_epi8(0x0f);
        let mut acc = [[0.0f32; T]; R];
        let blocks = w[0].len() / Q4_K_BYTES;
        for i in 0..blocks {
            let mut sums = [[_mm256_setzero_si256(); T]; R];
            let mut sm = [[(0u8, 0u8); 8]; R];
            for r in 0..R {
                let b = &w[r][i * Q4_K_BYTES..(i + 1) * Q4_K_BYTES];
                for (j, p) in sm[r].iter_mut().enumerate() {
                    *p = kquant::scale_min_k4(j, &b[4..16]);
                }
                for c in 0..4 {
                    // 32 bytes: sub-block 2c in the low nibbles, 2c + 1 in the high ones.
                    // SAFETY: bytes 16 + 32c .. 48 + 32c of a 144-byte block.
                    let q = unsafe { _mm256_loadu_si256(b.as_ptr().add(16 + 32 * c).cast()) };
                    let lo = _mm256_and_si256(q, low);
                    let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q), low);
                    let s0 = _mm256_set1_epi16(i16::from(sm[r][2 * c].0));
                    let s1 = _mm256_set1_epi16(i16::from(sm[r][2 * c + 1].0));
                    for t in 0..T {
                        let qs = &a[t][i].qs;
                        // scale · (q·a pairs), summed in i32 lanes: exact, as the scalar sum.
                        let p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, load(qs, 64 * c)), s0);
                        let p1 =
                            _mm256_madd_epi16(_mm256_maddubs_epi16(hi, load(qs, 64 * c + 32)), s1);
                        sums[r][t] = _mm256_add_epi32(sums[r][t], _mm256_add_epi32(p0, p1));
                    }
                }
            }
            let totals = grid_sums(&sums);
            for r in 0..R {
                let b = &w[r][i * Q4_K_BYTES..];
                let (d, dmin) = (f16(b, 0), f16(b, 2));
                for t in 0..T {
                    let a = &a[t][i];
                    let sum_m: i32 = (0..8)
                        .map(|s| {
                            i32::from(sm[r][s].1)
                                * (i32::from(a.bsums[2 * s]) + i32::from(a.bsums[2 * s + 1]))
                        })
                        .sum();
                    acc[r][t] += d * a.d * totals[r][t] as f32 - dmin * a.d * sum_m as f32;
                }
            }
        }
        acc
    }
    // ANCHOR_END: avx2_q4_k

    /// `R` Q6_K rows against `T` tokens.
    #[target_feature(enable = "avx2")]
    unsafe fn q6_k<const R: usize, const T: usize>(
        w: [&[u8]; R],
        a: [&[BlockQ8K]; T],
    ) -> [[f32; T]; R] {
        let low = _mm256_set1_epi8(0x0f);
        let three = _mm256_set1_epi8(3);
        let mut acc = [[0.0f32; T]; R];
        let blocks = w[0].len() / Q6_K_BYTES;
        for i in 0..blocks {
            let mut sums = [[_mm256_setzero_si256(); T]; R];
            for r in 0..R {
                let b = &w[r][i * Q6_K_BYTES..(i + 1) * Q6_K_BYTES];
                let sc = &b[192..208];
                for h in 0..2 {
                    // SAFETY: ql bytes 64h..64h+64, qh bytes 128+32h..+32 of a 210-byte block.
                    let (ql0, ql1, qh) = unsafe {
                        (
                            _mm256_loadu_si256(b.as_ptr().add(64 * h).cast()),
                            _mm256_loadu_si256(b.as_ptr().add(64 * h + 32).cast()),
                            _mm256_loadu_si256(b.as_ptr().add(128 + 32 * h).cast()),
                        )
                    };
                    let two_bits = |x: __m256i| _mm256_slli_epi16::<4>(_mm256_and_si256(x, three));
                    // The four runs of 32 values of this half, unsigned 0..64.
                    let runs = [
                        _mm256_or_si256(_mm256_and_si256(ql0, low), two_bits(qh)),
                        _mm256_or_si256(
                            _mm256_and_si256(ql1, low),
                            two_bits(_mm256_srli_epi16::<2>(qh)),
                        ),
                        _mm256_or_si256(
                            _mm256_and_si256(_mm256_srli_epi16::<4>(ql0), low),
                            two_bits(_mm256_srli_epi16::<4>(qh)),
                        ),
                        _mm256_or_si256(
                            _mm256_and_si256(_mm256_srli_epi16::<4>(ql1), low),
                            two_bits(_mm256_srli_epi16::<6>(qh)),
                        ),
                    ];
                    for (run, q) in runs.into_iter().enumerate() {
                        let base = 128 * h + 32 * run;
                        let g = base / 16;
                        // Groups g (bytes 0..16) and g + 1 (bytes 16..32): their scales, per i16 lane.
                        let s = _mm256_set_m128i(
                            _mm_set1_epi16(i16::from(sc[g + 1] as i8)),
                            _mm_set1_epi16(i16::from(sc[g] as i8)),
                        );
                        for t in 0..T {
                            let p = _mm256_madd_epi16(
                                _mm256_maddubs_epi16(q, load(&a[t][i].qs, base)),
                                s,
                            );
                            sums[r][t] = _mm256_add_epi32(sums[r][t], p);
                        }
                    }
                }
            }
            let totals = grid_sums(&sums);
            for r in 0..R {
                let b = &w[r][i * Q6_K_BYTES..(i + 1) * Q6_K_BYTES];
                let (sc, d) = (&b[192..208], f16(b, 208));
                for t in 0..T {
                    let a = &a[t][i];
                    // Σ_g s_g·Σ(q − 32)·a = Σ_g s_g·Σ q·a − 32·Σ_g s_g·Σ a
                    let offset = scaled_sums(sc, &a.bsums);
                    acc[r][t] += d * a.d * (totals[r][t] - 32 * offset) as f32;
                }
            }
        }
        acc
    }

    /// `R` Q5_0 rows against `T` tokens.
    #[target_feature(enable = "avx2")]
    unsafe fn q5_0<const R: usize, const T: usize>(
        w: [&[u8]; R],
        a: [&[Q8_0Wide]; T],
    ) -> [[f32; T]; R] {
        let low = _mm_set1_epi8(0x0f);
        // Byte k of the 32 gets bit k of qh: spread qh's bytes, then test one bit per lane.
        let spread = _mm256_setr_epi8(
            0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3,
            3, 3, 3,
        );
        let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
        let sixteen = _mm256_set1_epi8(16);
        let ones = _mm256_set1_epi16(1);
        let mut acc = [[0.0f32; T]; R];
        let mut acc4 = _mm_setzero_ps(); // the four pairs' sums when R · T = 4
        let blocks = w[0].len() / Q5_0_BYTES;
        for i in 0..blocks {
            // Each token's activations, unsigned, once for all R rows.
            let av: [__m256i; T] = std::array::from_fn(|t| {
                // SAFETY: 32 quants of a Q8_0 block.
                unsafe { _mm256_loadu_si256(a[t][i].qs.as_ptr().cast()) }
            });
            let mut sums = [[_mm256_setzero_si256(); T]; R];
            for r in 0..R {
                let b = &w[r][i * Q5_0_BYTES..(i + 1) * Q5_0_BYTES];
                let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
                // SAFETY: 16 nibble bytes at 6..22 of a 22-byte block.
                let nib = unsafe { _mm_loadu_si128(b.as_ptr().add(6).cast()) };
                let q = _mm256_set_m128i(
                    _mm_and_si128(_mm_srli_epi16::<4>(nib), low),
                    _mm_and_si128(nib, low),
                );
                let h = _mm256_shuffle_epi8(_mm256_set1_epi32(qh as i32), spread);
                let h = _mm256_cmpeq_epi8(_mm256_and_si256(h, bit), bit);
                let q = _mm256_or_si256(q, _mm256_and_si256(h, sixteen)); // 0..32
                let q = _mm256_sub_epi8(q, sixteen); // −16..16, signed
                for t in 0..T {
                    // |a| unsigned (−128 becomes the byte 128, read right), q given a's sign:
                    // |a|·(q·sign a) = q·a, and q (at most 16 in size) never overflows a byte.
                    sums[r][t] = _mm256_madd_epi16(
                        _mm256_maddubs_epi16(
                            _mm256_sign_epi8(av[t], av[t]),
                            _mm256_sign_epi8(q, av[t]),
                        ),
                        ones,
                    );
                }
            }
            let dw = |r: usize| f16(w[r], i * Q5_0_BYTES);
            let da = |t: usize| a[t][i].d;
            if R * T == 4 {
                // Four (row, token) pairs at once: the same three roundings per lane as the
                // scalar `acc += dw · da · dot`, in four lanes.
                let flat: [__m256i; 4] = std::array::from_fn(|k| sums[k / T][k % T]);
                let h = _mm256_hadd_epi32(
                    _mm256_hadd_epi32(flat[0], flat[1]),
                    _mm256_hadd_epi32(flat[2], flat[3]),
                );
                let dots =
                    _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h));
                let ws = _mm_setr_ps(dw(0), dw(1 % R), dw(2 % R), dw(3 % R));
                let as_ = _mm_setr_ps(da(0), da(1 % T), da(2 % T), da(3 % T));
                acc4 = _mm_add_ps(acc4, _mm_mul_ps(_mm_mul_ps(ws, as_), _mm_cvtepi32_ps(dots)));
            } else {
                let dots = grid_sums(&sums);
                for r in 0..R {
                    for t in 0..T {
                        acc[r][t] += dw(r) * da(t) * dots[r][t] as f32;
                    }
                }
            }
        }
        if R * T == 4 {
            let mut lanes = [0.0f32; 4];
            // SAFETY: four f32 into four f32.
            unsafe { _mm_storeu_ps(lanes.as_mut_ptr(), acc4) };
            for (k, v) in lanes.into_iter().enumerate() {
                acc[k / T][k % T] = v;
            }
        }
        acc
    }
}
