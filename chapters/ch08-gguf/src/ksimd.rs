//! The kernels for the formats of [`crate::kquant`]: a whole row's dot product, scalar or
//! AVX2, chosen once like chapter 7's.
//!
//! Each kernel adds the blocks' f32 contributions in block order, and each block's
//! contribution is computed from exact integer sums with the same float operations as the
//! scalar code, so every level returns the same bits.

use ch06_quantization::blocks::{BlockQ4_1, BlockQ8_1};

/// Bytes of a Q4_1 block (chapter 6's format).
const Q4_1_BYTES: usize = BlockQ4_1::BYTES;
use ch07_simd_parallel::Isa;

use crate::kocts::{self, KOcts, RowsK};
use crate::kquant::{
    self, ActQuads, BlockQ8K, KQuads, Q4_K_BYTES, Q5_0_BYTES, Q6_K_BYTES, Q8_0Wide,
};
use crate::octs::{self, ActOcts, Block32, Format32, Rows32};

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
    /// Whether [`KKernels::dot4_q5_0_quads`] has a kernel of its own: worth building the
    /// interleaved activations for.
    fn wants_quads(&self) -> bool {
        false
    }
    /// `dot4_q5_0`, bit for bit, given also the same activations interleaved
    /// ([`ActQuads`]); kernels without a use for them ignore them.
    fn dot4_q5_0_quads(&self, w: &[u8], quads: &ActQuads, a: [&[Q8_0Wide]; 4]) -> [f32; 4] {
        let _ = quads;
        self.dot4_q5_0(w, a)
    }
    /// `dot4_q4_k`, bit for bit, given also the activations interleaved ([`KQuads`]);
    /// `None` when this level has no such kernel.
    fn dot4_q4_k_quads(&self, w: &[u8], quads: &KQuads, a: [&[BlockQ8K]; 4]) -> Option<[f32; 4]> {
        let _ = (w, quads, a);
        None
    }
    /// Whether [`KKernels::dot8_row32`] has a SIMD kernel: worth unpacking rows and
    /// interleaving eight tokens for ([`crate::octs`]).
    fn wants_octs(&self) -> bool {
        false
    }
    /// Whether [`KKernels::dot8_row32`] has a SIMD kernel at all, wanted or not: Q4_0 has no
    /// other multi-token kernel, so it takes this one on every SIMD level.
    fn has_octs(&self) -> bool {
        false
    }
    /// One unpacked Q4_0, Q5_0 or Q4_1 row against eight tokens: the scalar kernel's eight dots,
    /// bit for bit.
    fn dot8_row32(&self, format: Format32, row: &[Block32], a: &ActOcts) -> [f32; 8] {
        octs::dot8_row32(format, row, a)
    }
    /// One Q4_0, Q5_0 or Q4_1 row as it lies in the file against eight tokens, each block
    /// unpacked as it is met: [`KKernels::dot8_row32`]'s numbers without an unpacked copy.
    fn dot8_raw32(&self, format: Format32, w: &[u8], a: &ActOcts) -> [f32; 8] {
        let row: Vec<Block32> = w
            .chunks_exact(format.bytes())
            .map(|b| octs::unpack_block(format, b))
            .collect();
        self.dot8_row32(format, &row, a)
    }
    /// One Q8_0 row (its bytes as in the file) against eight tokens: eight of chapter 6's
    /// `dot_q8_0_q8_0`, bit for bit ([`crate::octs_q8_0`]).
    fn dot8_q8_0(&self, w: &[u8], a: &ActOcts) -> [f32; 8] {
        crate::octs_q8_0::dot8_q8_0(w, a)
    }
    /// Q4_K (or, with `q6_k`, Q6_K) rows unpacked for [`KKernels::dot8_q4_k`] (`dot8_q6_k`).
    fn unpack_rows_k(&self, q6_k: bool, rows: &[&[u8]], out: &mut RowsK) {
        if q6_k {
            out.unpack(Q6_K_BYTES, rows, kocts::unpack_q6_k);
        } else {
            out.unpack(Q4_K_BYTES, rows, kocts::unpack_q4_k);
        }
    }
    /// Row `i` of unpacked Q4_K rows against eight tokens: eight `dot_q4_k`s, bit for bit.
    fn dot8_q4_k(&self, rows: &RowsK, i: usize, a: &KOcts) -> [f32; 8] {
        kocts::dot8_q4_k(rows, i, a)
    }
    /// Row `i` of unpacked Q6_K rows against eight tokens: eight `dot_q6_k`s, bit for bit.
    fn dot8_q6_k(&self, rows: &RowsK, i: usize, a: &KOcts) -> [f32; 8] {
        kocts::dot8_q6_k(rows, i, a)
    }
    /// Q4_0, Q5_0 or Q4_1 rows unpacked for [`KKernels::dot8_row32`].
    fn unpack_rows32(&self, format: Format32, rows: &[&[u8]], out: &mut Rows32) {
        out.unpack(format.bytes(), rows, |b| octs::unpack_block(format, b));
    }
    /// Chapter 7's `dot4_q4_1_q8_1` for one Q4_1 row against four tokens, bit for bit, given
    /// the activations interleaved too; `None` when this level has no such kernel.
    fn dot4_q4_1_quads(
        &self,
        w: &[u8],
        quads: &ActQuads,
        a: [&[BlockQ8_1]; 4],
    ) -> Option<[f32; 4]> {
        let _ = (w, quads, a);
        None
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

/// The two layouts a multi-token prefill can use on a CPU with AVX-512 VNNI: eight tokens to
/// a register, one per 32-bit lane ([`crate::octs`], the layout every SIMD level has), or
/// four tokens' blocks interleaved so that a lane follows one (block, token) pair
/// ([`crate::kquant::ActQuads`], VNNI only). Both give the same bits.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PrefillLayout {
    Eights,
    Quads,
}

/// The layout `LLM_BOOK_PREFILL=eights|quads` names, read once; eights unless told. On the
/// 2-core AMD EPYC with AVX-512 VNNI (Zen 4) this book was last measured on, the eights gave
/// 1.5 to 1.75 times the quads' pp512 on both models, in alternating runs; so VNNI machines
/// take the eights too, and the quads stay for comparison (`LLM_BOOK_PREFILL=quads`).
pub fn prefill_layout() -> PrefillLayout {
    static LAYOUT: std::sync::OnceLock<PrefillLayout> = std::sync::OnceLock::new();
    *LAYOUT.get_or_init(|| match std::env::var("LLM_BOOK_PREFILL").as_deref() {
        Ok("quads") => PrefillLayout::Quads,
        Ok("eights") | Err(_) => PrefillLayout::Eights,
        Ok(other) => {
            eprintln!(
                "warning: LLM_BOOK_PREFILL={other:?} is neither eights nor quads; using eights"
            );
            PrefillLayout::Eights
        }
    })
}

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

/// The kernels for an instruction-set level.
pub fn for_isa(isa: Isa) -> &'static dyn KKernels {
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx512 && is_x86_feature_detected!("f16c") {
        // chapter 7's detection checked avx512f, bw, vl and vnni
        return &avx2::Avx2K::<true>;
    }
    #[cfg(target_arch = "x86_64")]
    if isa != Isa::Scalar && is_x86_feature_detected!("avx2") && is_x86_feature_detected!("f16c") {
        return &avx2::Avx2K::<false>;
    }
    let _ = isa;
    &ScalarK
}

#[cfg(target_arch = "x86_64")]
mod avx2_octs;
#[cfg(target_arch = "x86_64")]
mod avx2_q8_0;
#[cfg(target_arch = "x86_64")]
mod avx2_rows4;

#[cfg(target_arch = "x86_64")]
pub mod avx2 {
    //! AVX2 versions. `vpmaddubsw` needs one unsigned operand: the K-quants' 4- and 6-bit
    //! quants are unsigned before their offset, so they go in as they are and the offset is
    //! taken out with the activations' precomputed sums; Q5_0's quants are made signed and
    //! chapter 7's sign trick moves the sign onto them, leaving the activations unsigned. The sub-block scales ride in `vpmaddwd`'s second operand,
    //! so a whole super-block needs one horizontal sum per token, not one per sub-block.
    use super::*;
    use std::arch::x86_64::*;

    /// Panics unless every row of `w` is whole blocks of `bytes`, one per block of every
    /// activation row of `a`: what the unchecked VNNI kernels rely on.
    fn check_blocks<A>(w: &[&[u8]], bytes: usize, a: &[&[A]]) {
        for (w, a) in w.iter().flat_map(|w| a.iter().map(move |a| (w, a))) {
            assert_eq!(
                w.len(),
                a.len() * bytes,
                "whole blocks, one per activation block"
            );
        }
    }

    /// [`check_blocks`] for one row and four tokens, whose whole groups of four blocks
    /// `groups` counts (the interleaved activations' groups).
    fn check_quads<A>(w: &[u8], bytes: usize, groups: usize, a: [&[A]; 4]) {
        check_blocks(&[w], bytes, &a);
        assert_eq!(groups, a[0].len() / 4, "the quads are these activations'");
    }

    /// The AVX2 kernels; with `VNNI`, the Q5_0 products of [`super::avx512`] (the CPU must
    /// have AVX-512 F/BW/VL and VNNI).
    pub struct Avx2K<const VNNI: bool>;

    impl<const VNNI: bool> KKernels for Avx2K<VNNI> {
        fn name(&self) -> &'static str {
            if VNNI { "avx512" } else { "avx2" }
        }
        fn dot_q4_k(&self, w: &[u8], a: &[BlockQ8K]) -> f32 {
            // SAFETY: for_isa only hands this out when the CPU has AVX2 and F16C.
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
            if VNNI {
                check_blocks(&[w], Q5_0_BYTES, &a);
                // SAFETY: for_isa hands out VNNI only when the CPU has AVX-512 F/BW/VL/VNNI
                // (and F16C); the lengths are checked above.
                return unsafe { super::avx512::q5_0_pairs::<1, 4>([w], a) };
            }
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
        fn wants_quads(&self) -> bool {
            VNNI && prefill_layout() == PrefillLayout::Quads
        }
        fn wants_octs(&self) -> bool {
            !self.wants_quads()
        }
        fn has_octs(&self) -> bool {
            true
        }
        fn unpack_rows_k(&self, q6_k: bool, rows: &[&[u8]], out: &mut RowsK) {
            // SAFETY (both): for_isa hands this out only when the CPU has AVX2 and F16C.
            if q6_k {
                out.unpack(Q6_K_BYTES, rows, |b| unsafe {
                    super::avx2_octs::unpack_q6_k(b)
                });
            } else {
                out.unpack(Q4_K_BYTES, rows, |b| unsafe {
                    super::avx2_octs::unpack_q4_k(b)
                });
            }
        }
        fn dot8_q6_k(&self, rows: &RowsK, i: usize, a: &KOcts) -> [f32; 8] {
            // SAFETY: as below; the kernel checks the lengths.
            unsafe { super::avx2_octs::dot8_q6_k(rows, i, a) }
        }
        fn dot8_q4_k(&self, rows: &RowsK, i: usize, a: &KOcts) -> [f32; 8] {
            // SAFETY: as above; the kernel checks the lengths.
            unsafe { super::avx2_octs::dot8_q4_k(rows, i, a) }
        }
        fn unpack_rows32(&self, format: Format32, rows: &[&[u8]], out: &mut Rows32) {
            // SAFETY: for_isa hands this out only when the CPU has AVX2 and F16C.
            out.unpack(format.bytes(), rows, |b| unsafe {
                super::avx2_octs::unpack_block(format, b)
            });
        }
        fn dot8_raw32(&self, format: Format32, w: &[u8], a: &ActOcts) -> [f32; 8] {
            // SAFETY: for_isa hands this out only when the CPU has AVX2 and F16C; the kernel
            // checks the lengths.
            unsafe {
                match format {
                    Format32::Q4_0 | Format32::Q5_0 => {
                        super::avx2_octs::dot8_raw32::<false>(format, w, a)
                    }
                    Format32::Q4_1 => super::avx2_octs::dot8_raw32::<true>(format, w, a),
                }
            }
        }
        fn dot8_q8_0(&self, w: &[u8], a: &ActOcts) -> [f32; 8] {
            // SAFETY: for_isa hands this out only when the CPU has AVX2 and F16C; the kernel
            // checks the lengths.
            unsafe { super::avx2_q8_0::dot8_q8_0(w, a) }
        }
        fn dot8_row32(&self, format: Format32, row: &[Block32], a: &ActOcts) -> [f32; 8] {
            // SAFETY: for_isa hands this out only when the CPU has AVX2; the kernel checks
            // the lengths.
            unsafe {
                match format {
                    Format32::Q4_0 | Format32::Q5_0 => {
                        super::avx2_octs::dot8_row32::<false>(row, a)
                    }
                    Format32::Q4_1 => super::avx2_octs::dot8_row32::<true>(row, a),
                }
            }
        }
        fn dot4_q5_0_quads(&self, w: &[u8], quads: &ActQuads, a: [&[Q8_0Wide]; 4]) -> [f32; 4] {
            if !VNNI {
                return self.dot4_q5_0(w, a);
            }
            check_quads(w, Q5_0_BYTES, quads.qs.len(), a);
            // SAFETY: as in dot4_q5_0.
            unsafe { super::avx512::q5_0_quads(w, quads, a) }
        }
        fn dot4_q4_1_quads(
            &self,
            w: &[u8],
            quads: &ActQuads,
            a: [&[BlockQ8_1]; 4],
        ) -> Option<[f32; 4]> {
            if !VNNI {
                return None;
            }
            check_quads(w, Q4_1_BYTES, quads.qs.len(), a);
            // SAFETY: as in dot4_q5_0.
            Some(unsafe { super::avx512::q4_1_quads(w, quads, a) })
        }
        fn dot4_q4_k_quads(
            &self,
            w: &[u8],
            quads: &KQuads,
            a: [&[BlockQ8K]; 4],
        ) -> Option<[f32; 4]> {
            if !VNNI {
                return None;
            }
            check_quads(w, Q4_K_BYTES, quads.qs.len(), a);
            // SAFETY: as in dot4_q5_0.
            Some(unsafe { super::avx512::q4_k_quads(w, quads, a) })
        }
        fn rows4_q5_0(&self, w: [&[u8]; 4], a: &[Q8_0Wide]) -> [f32; 4] {
            if VNNI {
                check_blocks(&w, Q5_0_BYTES, &[a]);
                // SAFETY: as in dot4_q5_0.
                return unsafe { super::avx512::q5_0_pairs::<4, 1>(w, [a]) };
            }
            // SAFETY: as above; the kernel checks the lengths.
            unsafe { super::avx2_rows4::rows4_q5_0(w, a) }
        }
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn hsum(v: __m256i) -> i32 {
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

    /// The f16 at byte `i` of `b`, by the CPU's converter (F16C): no branch, where the
    /// portable [`ch06_quantization::f16::f16_to_f32_fast`] needs one for the subnormal
    /// scales of small weights, which real K-quant blocks hold often enough to mispredict.
    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn f16(b: &[u8], i: usize) -> f32 {
        let bits = u16::from_le_bytes([b[i], b[i + 1]]);
        _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(bits))))
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn load(p: &[i8], at: usize) -> __m256i {
        assert!(at + 32 <= p.len());
        // SAFETY: 32 bytes at `at`, checked above.
        unsafe { _mm256_loadu_si256(p.as_ptr().add(at).cast()) }
    }

    /// In a decode step (four rows at a time, each thread walking its rows in order), asks
    /// for the `len` bytes at `block`'s place eight rows further on, as chapter 7's kernels
    /// do: the hardware prefetcher does not run far enough ahead of four interleaved
    /// streams on its own. A prefetch never faults, so an address past the matrix is fine.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn prefetch_rows_ahead(block: &[u8], row_len: usize, len: usize) {
        let ahead = block.as_ptr().wrapping_add(8 * row_len);
        for line in (0..len).step_by(64) {
            _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(line).cast());
        }
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

    // ANCHOR: avx2_q4_k_scales
    /// Q4_K's eight 6-bit scales and eight 6-bit mins as sixteen bytes (scales first): the
    /// rule of [`kquant::scale_min_k4`] applied to all eight pairs at once, on three words.
    #[inline]
    pub(super) fn scales_and_mins(packed: &[u8]) -> [u8; 16] {
        let word = |i: usize| u32::from_le_bytes(packed[4 * i..4 * i + 4].try_into().expect("4"));
        let (w0, w1, w2) = (word(0), word(1), word(2));
        let six = 0x3f3f_3f3f; // the low 6 bits of each byte
        let nib = 0x0f0f_0f0f;
        let two = 0x0303_0303;
        let scales_lo = w0 & six;
        let mins_lo = w1 & six;
        let scales_hi = (w2 & nib) | (((w0 >> 6) & two) << 4);
        let mins_hi = ((w2 >> 4) & nib) | (((w1 >> 6) & two) << 4);
        let mut out = [0u8; 16];
        for (i, w) in [scales_lo, scales_hi, mins_lo, mins_hi]
            .into_iter()
            .enumerate()
        {
            out[4 * i..4 * i + 4].copy_from_slice(&w.to_le_bytes());
        }
        out
    }
    // ANCHOR_END: avx2_q4_k_scales

    // ANCHOR: avx2_q4_k
    /// `R` Q4_K rows against `T` tokens (1 × 1, 1 × 4 for a prefill, 4 × 1 for a decode step):
    /// each weight block is unpacked once for its `T` tokens.
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn q4_k<const R: usize, const T: usize>(
        w: [&[u8]; R],
        a: [&[BlockQ8K]; T],
    ) -> [[f32; T]; R] {
        let low = _mm256_set1_epi8(0x0f);
        // Sub-block j's scale (an i16) in every lane: one byte shuffle each.
        let pick: [__m256i; 8] =
            std::array::from_fn(|j| _mm256_set1_epi16(0x0100 + 0x0202 * j as i16));
        let mut acc = [[0.0f32; T]; R];
        let blocks = w[0].len() / Q4_K_BYTES;
        for i in 0..blocks {
            let mut sums = [[_mm256_setzero_si256(); T]; R];
            let mut min_sums = [[_mm256_setzero_si256(); T]; R];
            // Each token's activation sums of sub-blocks (pairs of its 16-value sums).
            let pairs: [__m128i; T] = std::array::from_fn(|t| {
                // SAFETY: 16 i16 sums.
                let bs = unsafe { _mm256_loadu_si256(a[t][i].bsums.as_ptr().cast()) };
                let h = _mm256_hadd_epi16(bs, bs); // per half: 4 pair sums, twice
                _mm256_castsi256_si128(_mm256_permute4x64_epi64::<0b00_00_10_00>(h))
            });
            // ANCHOR_END: avx2_q4_k
            // ANCHOR: avx2_q4_k_rows
            for r in 0..R {
                let b = &w[r][i * Q4_K_BYTES..(i + 1) * Q4_K_BYTES];
                if R == 4 {
                    prefetch_rows_ahead(b, blocks * Q4_K_BYTES, Q4_K_BYTES);
                }
                let sm = scales_and_mins(&b[4..16]);
                // SAFETY: 16 bytes.
                let sm = _mm256_cvtepu8_epi16(unsafe { _mm_loadu_si128(sm.as_ptr().cast()) });
                let scales = _mm256_permute4x64_epi64::<0b01_00_01_00>(sm); // 8 scales, twice
                let mins = _mm256_extracti128_si256::<1>(sm);
                for t in 0..T {
                    // Σ_s min_s · (activation sum of sub-block s), in four lanes
                    min_sums[r][t] = _mm256_zextsi128_si256(_mm_madd_epi16(mins, pairs[t]));
                }
                for c in 0..4 {
                    // 32 bytes: sub-block 2c in the low nibbles, 2c + 1 in the high ones.
                    // SAFETY: bytes 16 + 32c .. 48 + 32c of a 144-byte block.
                    let q = unsafe { _mm256_loadu_si256(b.as_ptr().add(16 + 32 * c).cast()) };
                    let lo = _mm256_and_si256(q, low);
                    let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q), low);
                    let s0 = _mm256_shuffle_epi8(scales, pick[2 * c]);
                    let s1 = _mm256_shuffle_epi8(scales, pick[2 * c + 1]);
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
            let min_totals = grid_sums(&min_sums);
            for r in 0..R {
                let b = &w[r][i * Q4_K_BYTES..];
                let (d, dmin) = (f16(b, 0), f16(b, 2));
                for t in 0..T {
                    let ad = a[t][i].d;
                    acc[r][t] += d * ad * totals[r][t] as f32 - dmin * ad * min_totals[r][t] as f32;
                }
            }
        }
        acc
    }
    // ANCHOR_END: avx2_q4_k_rows

    /// `R` Q6_K rows against `T` tokens.
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn q6_k<const R: usize, const T: usize>(
        w: [&[u8]; R],
        a: [&[BlockQ8K]; T],
    ) -> [[f32; T]; R] {
        let low = _mm256_set1_epi8(0x0f);
        let three = _mm256_set1_epi8(3);
        // For run k (groups 2k and 2k + 1): group 2k's scale in every i16 of the low half,
        // 2k + 1's in the high half, picked by one byte shuffle from the scales widened to
        // i16 (groups 0–7 or 8–15 in both halves).
        // The shuffle index of i16 lane `g`: its two bytes, 2g and 2g + 1.
        let lane = |g: i16| (2 * g) | ((2 * g + 1) << 8);
        let pick: [__m256i; 4] = std::array::from_fn(|k| {
            let k = k as i16;
            _mm256_set_m128i(_mm_set1_epi16(lane(2 * k + 1)), _mm_set1_epi16(lane(2 * k)))
        });
        let mut acc = [[0.0f32; T]; R];
        let blocks = w[0].len() / Q6_K_BYTES;
        for i in 0..blocks {
            let mut sums = [[_mm256_setzero_si256(); T]; R];
            for r in 0..R {
                let b = &w[r][i * Q6_K_BYTES..(i + 1) * Q6_K_BYTES];
                if R == 4 {
                    prefetch_rows_ahead(b, blocks * Q6_K_BYTES, Q6_K_BYTES);
                }
                // SAFETY: the 16 scale bytes at 192..208 of a 210-byte block.
                let sc =
                    _mm256_cvtepi8_epi16(unsafe { _mm_loadu_si128(b.as_ptr().add(192).cast()) });
                let halves = [
                    _mm256_permute4x64_epi64::<0b01_00_01_00>(sc), // groups 0–7, twice
                    _mm256_permute4x64_epi64::<0b11_10_11_10>(sc), // groups 8–15, twice
                ];
                for t in 0..T {
                    // Σ(q − 32)·a = Σ q·a − 32·Σ a: the offset's share, per group pair, taken
                    // out of the lanes before the one horizontal sum.
                    // SAFETY: 16 i16 sums.
                    let bs = unsafe { _mm256_loadu_si256(a[t][i].bsums.as_ptr().cast()) };
                    sums[r][t] = _mm256_sub_epi32(
                        sums[r][t],
                        _mm256_slli_epi32::<5>(_mm256_madd_epi16(sc, bs)),
                    );
                }
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
                        _mm256_or_si256(
                            _mm256_and_si256(ql0, low),
                            _mm256_slli_epi16::<4>(_mm256_and_si256(qh, three)),
                        ),
                        _mm256_or_si256(
                            _mm256_and_si256(ql1, low),
                            _mm256_slli_epi16::<2>(_mm256_and_si256(
                                qh,
                                _mm256_slli_epi16::<2>(three),
                            )),
                        ),
                        _mm256_or_si256(
                            _mm256_and_si256(_mm256_srli_epi16::<4>(ql0), low),
                            _mm256_and_si256(qh, _mm256_slli_epi16::<4>(three)),
                        ),
                        _mm256_or_si256(
                            _mm256_and_si256(_mm256_srli_epi16::<4>(ql1), low),
                            _mm256_and_si256(
                                _mm256_srli_epi16::<2>(qh),
                                _mm256_slli_epi16::<4>(three),
                            ),
                        ),
                    ];
                    for (run, q) in runs.into_iter().enumerate() {
                        let base = 128 * h + 32 * run;
                        let k = 4 * h + run; // groups 2k, 2k + 1
                        let s = _mm256_shuffle_epi8(halves[k / 4], pick[k % 4]);
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
                let d = f16(w[r], i * Q6_K_BYTES + 208);
                for t in 0..T {
                    acc[r][t] += d * a[t][i].d * totals[r][t] as f32;
                }
            }
        }
        acc
    }

    /// `R` Q5_0 rows against `T` tokens.
    #[target_feature(enable = "avx2,f16c")]
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

#[cfg(target_arch = "x86_64")]
pub mod avx512 {
    //! AVX-512 (with VNNI) for the Q5_0 products, the format that carries most of Gemma-3's
    //! layer weights; [`super::avx2::Avx2K`]`<true>` uses them, the AVX2 kernels the rest. Three AVX-512 instructions
    //! shorten its unpacking: a shift by a different count in each half of the register
    //! (`vpsrlvw`) splits the nibbles, a masked add puts the fifth bit on with `qh` itself as
    //! the mask, and `vpdpbusd` multiplies and sums four byte pairs per lane in one step.
    use super::*;
    use std::arch::x86_64::*;

    /// The 32 nibbles of the 16 bytes at `p`: the low nibbles in bytes 0..16, the high ones
    /// in bytes 16..32 (Q4_0, Q4_1 and Q5_0 order them so), by one shift of 0 or 4 bits.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2")]
    unsafe fn nibbles(p: *const u8) -> __m256i {
        // SAFETY: the caller passes 16 readable bytes.
        let nib = _mm256_broadcastsi128_si256(unsafe { _mm_loadu_si128(p.cast()) });
        let shifts = _mm256_setr_epi16(0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4);
        _mm256_and_si256(_mm256_srlv_epi16(nib, shifts), _mm256_set1_epi8(0x0f))
    }

    /// One Q5_0 block's 32 quants (at `p`), unsigned, before the offset of 16 is taken out.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2")]
    unsafe fn unpack(p: *const u8) -> __m256i {
        // SAFETY: the caller passes a whole 22-byte block.
        let (q, qh) = unsafe { (nibbles(p.add(6)), p.add(2).cast::<u32>().read_unaligned()) };
        // Byte j gets 16 where bit j of qh is set.
        _mm256_mask_add_epi8(q, qh, q, _mm256_set1_epi8(16))
    }

    /// One block's `dw · da · dot`, the scalar kernel's term, for the blocks after the last
    /// group of four.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,f16c")]
    fn block_term(w: &[u8], a: &Q8_0Wide) -> f32 {
        assert_eq!(w.len(), Q5_0_BYTES);
        // SAFETY: one whole block (checked) and 32 activation quants.
        let v = unsafe {
            _mm256_dpbusd_epi32(
                _mm256_setzero_si256(),
                unpack(w.as_ptr()),
                _mm256_loadu_si256(a.qs.as_ptr().cast()),
            )
        };
        let dot = avx2::hsum(v) - 16 * a.sum;
        avx2::f16(w, 0) * a.d * dot as f32
    }

    // ANCHOR: avx512_q5_0
    /// Four (row, token) pairs of Q5_0 products: four rows and one token (a decode step) or
    /// one row and four tokens (a prefill). Four blocks at a time, each pair's four block sums
    /// are reduced together and turned into the same floats as the scalar `dw · da · dot`;
    /// a 4 × 4 transpose then puts the pairs in lanes, so that one vector add per block keeps
    /// each pair's sum in block order, as the scalar loop adds.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,f16c")]
    pub(super) unsafe fn q5_0_pairs<const R: usize, const T: usize>(
        w: [&[u8]; R],
        a: [&[Q8_0Wide]; T],
    ) -> [f32; 4] {
        const { assert!(R * T == 4) };
        let blocks = a[0].len();
        let pair = |k: usize| (k % R, k / R); // (row, token) of pair k
        let mut acc = _mm_setzero_ps(); // lane k: pair k's sum so far
        let strides = _mm_setr_epi32(0, 22, 44, 66); // the f16 scales of four blocks
        let mut i = 0;
        while i + 4 <= blocks {
            let dw: [__m128; R] = std::array::from_fn(|r| {
                let b = w[r][i * Q5_0_BYTES..].as_ptr();
                if R == 4 {
                    avx2::prefetch_rows_ahead(
                        &w[r][i * Q5_0_BYTES..],
                        blocks * Q5_0_BYTES,
                        4 * Q5_0_BYTES,
                    );
                }
                // SAFETY: the gather reads 4 bytes at the start of each of blocks i..i + 4,
                // which lie inside the row (lengths checked by the caller).
                _mm_cvtph_ps(_mm_cvtepi32_epi16(unsafe {
                    _mm_i32gather_epi32::<1>(b.cast(), strides)
                }))
            });
            // SAFETY: blocks i..i + 4 of each row.
            let q: [[__m256i; 4]; R] = std::array::from_fn(|r| {
                std::array::from_fn(|j| unsafe { unpack(w[r][(i + j) * Q5_0_BYTES..].as_ptr()) })
            });
            let p: [__m128; 4] = std::array::from_fn(|k| {
                let (r, t) = pair(k);
                let a = &a[t][i..i + 4];
                // SAFETY: 32 quants of each activation block.
                let v: [__m256i; 4] = std::array::from_fn(|j| unsafe {
                    _mm256_dpbusd_epi32(
                        _mm256_setzero_si256(),
                        q[r][j],
                        _mm256_loadu_si256(a[j].qs.as_ptr().cast()),
                    )
                });
                // The four blocks' lane sums, all at once.
                let h =
                    _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
                let dots =
                    _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h));
                let offset =
                    _mm_slli_epi32::<4>(_mm_setr_epi32(a[0].sum, a[1].sum, a[2].sum, a[3].sum));
                let dots = _mm_cvtepi32_ps(_mm_sub_epi32(dots, offset)); // Σ (q − 16)·a
                let da = _mm_setr_ps(a[0].d, a[1].d, a[2].d, a[3].d);
                _mm_mul_ps(_mm_mul_ps(dw[r], da), dots)
            });
            // Transpose: column j holds block j's contribution to each pair.
            let t0 = _mm_unpacklo_ps(p[0], p[1]);
            let t1 = _mm_unpacklo_ps(p[2], p[3]);
            let t2 = _mm_unpackhi_ps(p[0], p[1]);
            let t3 = _mm_unpackhi_ps(p[2], p[3]);
            acc = _mm_add_ps(acc, _mm_movelh_ps(t0, t1));
            acc = _mm_add_ps(acc, _mm_movehl_ps(t1, t0));
            acc = _mm_add_ps(acc, _mm_movelh_ps(t2, t3));
            acc = _mm_add_ps(acc, _mm_movehl_ps(t3, t2));
            i += 4;
        }
        let mut out = [0.0f32; 4];
        // SAFETY: four f32 into four f32.
        unsafe { _mm_storeu_ps(out.as_mut_ptr(), acc) };
        for (k, o) in out.iter_mut().enumerate() {
            let (r, t) = pair(k);
            // The last blocks (fewer than four) one at a time, as the scalar loop.
            for j in i..blocks {
                *o += block_term(&w[r][j * Q5_0_BYTES..(j + 1) * Q5_0_BYTES], &a[t][j]);
            }
        }
        out
    }
    // ANCHOR_END: avx512_q5_0

    /// Sixteen lanes, (block b, token t) at 4b + t, each holding `per_block[b]`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn block_lanes(per_block: [i32; 4]) -> __m512i {
        let [a, b, c, d] = per_block;
        _mm512_setr_epi32(a, a, a, a, b, b, b, b, c, c, c, c, d, d, d, d)
    }

    /// The f16 in the low (`SHIFT` 0) or high (16) half of each of four dwords (four blocks'
    /// d, or their second f16), as f32, each in its block's four lanes.
    #[inline]
    #[target_feature(enable = "avx512f,avx512vl,f16c")]
    fn spread_halves<const SHIFT: i32>(dm: __m128i) -> __m512 {
        let h = _mm_cvtph_ps(_mm_cvtepi32_epi16(_mm_srli_epi32::<SHIFT>(dm)));
        _mm512_permutexvar_ps(block_lanes([0, 1, 2, 3]), _mm512_castps128_ps512(h))
    }

    /// `acc` (a token per lane) plus each block's four tokens of `p`, block after block: the
    /// scalar loop's order of additions.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn add_in_block_order(acc: __m128, p: __m512) -> __m128 {
        let acc = _mm_add_ps(acc, _mm512_castps512_ps128(p));
        let acc = _mm_add_ps(acc, _mm512_extractf32x4_ps::<1>(p));
        let acc = _mm_add_ps(acc, _mm512_extractf32x4_ps::<2>(p));
        _mm_add_ps(acc, _mm512_extractf32x4_ps::<3>(p))
    }

    // ANCHOR: avx512_q5_0_quads
    /// The whole groups of four blocks of one row (Q5_0, or Q4_1 with `Q4_1`) against four
    /// tokens (a prefill), sixteen (block, token) pairs at a time, one per lane, from
    /// [`ActQuads`]: each of the eight steps of a group is a permute of the weights (lane
    /// (b, t) gets four quants of block b) and one `vpdpbusd`, and no horizontal add is
    /// needed. Then, as the scalar loop does, each block's term (Q5_0: `dw · da · dot`; Q4_1:
    /// `(dw · da) · dot + mw · s`) is added to its token's sum in block order.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,f16c")]
    unsafe fn quads_groups<const Q4_1: bool>(w: &[u8], quads: &ActQuads) -> [f32; 4] {
        let bytes = if Q4_1 { Q4_1_BYTES } else { Q5_0_BYTES };
        let stride = bytes as i32;
        let strides = _mm_setr_epi32(0, stride, 2 * stride, 3 * stride); // four blocks' scales
        // Step s: lane (b, t) takes dword s of block b (dwords 8b..8b + 8 of the two registers).
        let steps: [__m512i; 8] = std::array::from_fn(|s| {
            let s = s as i32;
            block_lanes([s, 8 + s, 16 + s, 24 + s])
        });
        let mut acc = _mm_setzero_ps(); // lane t: token t's sum so far
        for (g, qs) in quads.qs.iter().enumerate() {
            let b = w[4 * g * bytes..].as_ptr();
            // SAFETY: blocks 4g..4g + 4 lie inside the row (checked by the caller).
            let q: [__m256i; 4] = std::array::from_fn(|j| unsafe {
                let blk = b.add(j * bytes);
                if Q4_1 {
                    nibbles(blk.add(4))
                } else {
                    unpack(blk)
                }
            });
            let q01 = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(q[0]), q[1]);
            let q23 = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(q[2]), q[3]);
            let mut dots = _mm512_setzero_si512();
            for (s, step) in steps.iter().enumerate() {
                // SAFETY: 64 of the group's 512 bytes.
                let act = unsafe { _mm512_loadu_si512(qs.as_ptr().add(64 * s).cast()) };
                dots = _mm512_dpbusd_epi32(dots, _mm512_permutex2var_epi32(q01, *step, q23), act);
            }
            // ANCHOR_END: avx512_q5_0_quads
            // ANCHOR: avx512_q5_0_quads_float
            // SAFETY: the gather reads 4 bytes at the start of each of the four blocks: the
            // f16 d (and, for Q4_1, the f16 m after it).
            let dm = unsafe { _mm_i32gather_epi32::<1>(b.cast(), strides) };
            let dw = spread_halves::<0>(dm);
            // SAFETY: 16 f32 (and 16 i32).
            let da = unsafe { _mm512_loadu_ps(quads.d[g].as_ptr()) };
            let p = if Q4_1 {
                let mw = spread_halves::<16>(dm);
                // SAFETY: 16 f32.
                let s = unsafe { _mm512_loadu_ps(quads.s[g].as_ptr()) };
                _mm512_add_ps(
                    _mm512_mul_ps(_mm512_mul_ps(dw, da), _mm512_cvtepi32_ps(dots)),
                    _mm512_mul_ps(mw, s),
                )
            } else {
                // SAFETY: 16 i32.
                let sum16 = unsafe { _mm512_loadu_si512(quads.sum16[g].as_ptr().cast()) };
                let dots = _mm512_cvtepi32_ps(_mm512_sub_epi32(dots, sum16)); // Σ (q − 16)·a
                _mm512_mul_ps(_mm512_mul_ps(dw, da), dots)
            };
            // Block b's four tokens are lanes 4b..4b + 4: added in block order.
            acc = add_in_block_order(acc, p);
        }
        let mut out = [0.0f32; 4];
        // SAFETY: four f32 into four f32.
        unsafe { _mm_storeu_ps(out.as_mut_ptr(), acc) };
        out
    }
    // ANCHOR_END: avx512_q5_0_quads_float

    // ANCHOR: avx512_q4_k_quads
    /// One Q4_K row against four tokens, sixteen (super-block, token) pairs a lane each, as
    /// [`q5_0_quads`] does for Q5_0: per sub-block of 32, eight permute-and-`vpdpbusd` steps
    /// give each lane its sub-block dot, which is multiplied by that block's 6-bit scale in
    /// 32 bits and added up; the mins meet the activations' sub-block sums the same way.
    /// Then each super-block's `d · da · Σq − dmin · da · Σm`, as the scalar kernel writes
    /// it, is added to its token's sum in block order.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,f16c")]
    pub(super) unsafe fn q4_k_quads(w: &[u8], quads: &KQuads, a: [&[BlockQ8K]; 4]) -> [f32; 4] {
        let strides = _mm_setr_epi32(0, 144, 288, 432); // four blocks' d and dmin
        let steps: [__m512i; 8] = std::array::from_fn(|s| {
            let s = s as i32;
            block_lanes([s, 8 + s, 16 + s, 24 + s])
        });
        // Lane (b, t) takes entry j of block b's sixteen (scales, then mins): from the first
        // register of a pair for blocks 0 and 2, from the second for blocks 1 and 3.
        let pick = |j: i32| block_lanes([j, 16 + j, j, 16 + j]);
        let low = _mm256_set1_epi8(0x0f);
        let mut acc = _mm_setzero_ps(); // lane t: token t's sum so far
        for (g, qs) in quads.qs.iter().enumerate() {
            let b = w[4 * g * Q4_K_BYTES..].as_ptr();
            // Each block's 8 scales and 8 mins, widened to 32 bits.
            let sm: [__m512i; 4] = std::array::from_fn(|j| {
                // SAFETY: the 12 packed bytes at 4..16 of block j (inside the row).
                let packed = unsafe { std::slice::from_raw_parts(b.add(j * Q4_K_BYTES + 4), 12) };
                let sm = avx2::scales_and_mins(packed);
                // SAFETY: 16 bytes.
                _mm512_cvtepu8_epi32(unsafe { _mm_loadu_si128(sm.as_ptr().cast()) })
            });
            let (mut sumq, mut summ) = (_mm512_setzero_si512(), _mm512_setzero_si512());
            for sub in 0..8 {
                // Sub-block `sub` of the four blocks: 32 bytes of nibbles each (low nibbles of
                // chunk sub / 2 for even sub-blocks, high for odd ones).
                let q: [__m256i; 4] = std::array::from_fn(|j| {
                    // SAFETY: bytes 16 + 32c .. 48 + 32c of block j, inside the row.
                    let v = unsafe {
                        _mm256_loadu_si256(b.add(j * Q4_K_BYTES + 16 + 32 * (sub / 2)).cast())
                    };
                    let v = if sub % 2 == 1 {
                        _mm256_srli_epi16::<4>(v)
                    } else {
                        v
                    };
                    _mm256_and_si256(v, low)
                });
                let q01 = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(q[0]), q[1]);
                let q23 = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(q[2]), q[3]);
                let mut dots = _mm512_setzero_si512();
                for (k, step) in steps.iter().enumerate() {
                    // SAFETY: 64 of the group's 4096 bytes.
                    let act =
                        unsafe { _mm512_loadu_si512(qs.as_ptr().add(64 * (sub * 8 + k)).cast()) };
                    dots =
                        _mm512_dpbusd_epi32(dots, _mm512_permutex2var_epi32(q01, *step, q23), act);
                }
                let lanes = |j: i32| {
                    let p = pick(j);
                    _mm512_mask_blend_epi32(
                        0xff00,
                        _mm512_permutex2var_epi32(sm[0], p, sm[1]),
                        _mm512_permutex2var_epi32(sm[2], p, sm[3]),
                    )
                };
                sumq = _mm512_add_epi32(sumq, _mm512_mullo_epi32(dots, lanes(sub as i32)));
                // SAFETY: 16 i32.
                let sums = unsafe { _mm512_loadu_si512(quads.sums[g][sub].as_ptr().cast()) };
                summ = _mm512_add_epi32(summ, _mm512_mullo_epi32(sums, lanes(8 + sub as i32)));
            }
            // SAFETY: the gather reads the f16 d and dmin at the start of each of the four blocks.
            let dm = unsafe { _mm_i32gather_epi32::<1>(b.cast(), strides) };
            let d = spread_halves::<0>(dm);
            let dmin = spread_halves::<16>(dm);
            // SAFETY: 16 f32.
            let da = unsafe { _mm512_loadu_ps(quads.d[g].as_ptr()) };
            let p = _mm512_sub_ps(
                _mm512_mul_ps(_mm512_mul_ps(d, da), _mm512_cvtepi32_ps(sumq)),
                _mm512_mul_ps(_mm512_mul_ps(dmin, da), _mm512_cvtepi32_ps(summ)),
            );
            // Block b's four tokens are lanes 4b..4b + 4: added in block order.
            acc = add_in_block_order(acc, p);
        }
        let mut out = [0.0f32; 4];
        // SAFETY: four f32 into four f32.
        unsafe { _mm_storeu_ps(out.as_mut_ptr(), acc) };
        // The blocks after the last whole group, one at a time, as the scalar loop.
        for (t, o) in out.iter_mut().enumerate() {
            for j in 4 * quads.qs.len()..a[t].len() {
                *o += kquant::dot_q4_k_q8_k(&w[j * Q4_K_BYTES..(j + 1) * Q4_K_BYTES], &a[t][j]);
            }
        }
        out
    }
    // ANCHOR_END: avx512_q4_k_quads

    /// An f16's bits as f32, by the CPU's converter.
    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    fn half(bits: u16) -> f32 {
        avx2::f16(&bits.to_le_bytes(), 0)
    }

    /// One Q5_0 row against four tokens: the groups, then the last blocks one at a time.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,f16c")]
    pub(super) unsafe fn q5_0_quads(w: &[u8], quads: &ActQuads, a: [&[Q8_0Wide]; 4]) -> [f32; 4] {
        // SAFETY: the caller's checks are this function's.
        let mut out = unsafe { quads_groups::<false>(w, quads) };
        for (t, o) in out.iter_mut().enumerate() {
            for j in 4 * quads.qs.len()..a[t].len() {
                *o += block_term(&w[j * Q5_0_BYTES..(j + 1) * Q5_0_BYTES], &a[t][j]);
            }
        }
        out
    }

    /// One Q4_1 row against four tokens: the groups, then the last blocks one at a time, each
    /// block's term as chapter 6 writes it, `(d · da) · dot + m · s`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,f16c")]
    pub(super) unsafe fn q4_1_quads(w: &[u8], quads: &ActQuads, a: [&[BlockQ8_1]; 4]) -> [f32; 4] {
        // SAFETY: the caller's checks are this function's.
        let mut out = unsafe { quads_groups::<true>(w, quads) };
        let done = 4 * quads.qs.len();
        for (t, o) in out.iter_mut().enumerate() {
            for j in done..a[t].len() {
                let (blk, a) = (&w[j * Q4_1_BYTES..(j + 1) * Q4_1_BYTES], &a[t][j]);
                // SAFETY: 16 nibble bytes of a whole block, and 32 activation quants.
                let v = unsafe {
                    _mm256_dpbusd_epi32(
                        _mm256_setzero_si256(),
                        nibbles(blk.as_ptr().add(4)),
                        _mm256_loadu_si256(a.qs.as_ptr().cast()),
                    )
                };
                let (d, m) = (avx2::f16(blk, 0), avx2::f16(blk, 2));
                let (da, s) = (half(a.d), half(a.s));
                *o += (d * da) * avx2::hsum(v) as f32 + m * s;
            }
        }
        out
    }
}
