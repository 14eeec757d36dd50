//! AVX2 versions. `vpmaddubsw` needs one unsigned operand: the K-quants' 4- and 6-bit
//! quants are unsigned before their offset, so they go in as they are and the offset is
//! taken out with the activations' precomputed sums; Q5_0's quants are made signed and
//! chapter 7's sign trick moves the sign onto them, leaving the activations unsigned. The sub-block scales ride in `vpmaddwd`'s second operand,
//! so a whole super-block needs one horizontal sum per token, not one per sub-block.
use super::products::Q4_1_BYTES;
#[allow(unused_imports)]
use super::products::{
    ByToken, KKernels, PrefillLayout, prefill_layout, q8_0_rows_with_half, two_eights,
};
#[allow(unused_imports)]
use crate::layout::eights_k::{self, KOcts, RowsK};
#[allow(unused_imports)]
use crate::layout::eights32::{self, ActOcts, Block32, Rows32};
#[allow(unused_imports)]
use crate::layout::kquant::{
    self, ActQuads, BlockQ8K, KQuads, Q4_K_BYTES, Q5_0_BYTES, Q6_K_BYTES, Q8_0Wide,
};
#[allow(unused_imports)]
use crate::layout::packed::PackedToken;
#[allow(unused_imports)]
use ch06_quantization::Format;
#[allow(unused_imports)]
use ch06_quantization::blocks::{BlockQ4_1, BlockQ8_0, BlockQ8_1};

use crate::kernels::avx2::prefetch_lines;
use std::arch::x86_64::*;

use super::avx2_kquants::{q4_k, q6_k};

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
            return unsafe { super::avx512_quads::q5_0_pairs::<1, 4>([w], a) };
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
                super::avx2_eights::unpack_q6_k(b)
            });
        } else {
            out.unpack(Q4_K_BYTES, rows, |b| unsafe {
                super::avx2_eights::unpack_q4_k(b)
            });
        }
    }
    fn dot8_q6_k(&self, rows: &RowsK, i: usize, a: &KOcts) -> [f32; 8] {
        // SAFETY: as below; the kernel checks the lengths.
        unsafe { super::avx2_eights::dot8_q6_k(rows, i, a) }
    }
    fn dot8_q4_k(&self, rows: &RowsK, i: usize, a: &KOcts) -> [f32; 8] {
        // SAFETY: as above; the kernel checks the lengths.
        unsafe { super::avx2_eights::dot8_q4_k(rows, i, a) }
    }
    fn dot8x4_q4_k(&self, rows: &RowsK, i: usize, a: &KOcts) -> [[f32; 8]; 4] {
        // SAFETY: as in dot8_q4_k.
        unsafe { super::avx2_eights4_k::dot8x4_q4_k(rows, i, a) }
    }
    fn dot8x4_q6_k(&self, rows: &RowsK, i: usize, a: &KOcts) -> [[f32; 8]; 4] {
        // SAFETY: as in dot8_q4_k.
        unsafe { super::avx2_eights4_k::dot8x4_q6_k(rows, i, a) }
    }
    fn unpack_rows32(&self, format: Format, rows: &[&[u8]], out: &mut Rows32) {
        // SAFETY: for_isa hands this out only when the CPU has AVX2 and F16C.
        out.unpack(format.block_bytes(), rows, |b| unsafe {
            super::avx2_eights::unpack_block(format, b)
        });
    }
    fn dot8_raw32(&self, format: Format, w: &[u8], a: &ActOcts) -> [f32; 8] {
        // SAFETY: for_isa hands this out only when the CPU has AVX2 and F16C; the kernel
        // checks the lengths.
        unsafe {
            match format {
                Format::Q4_0 | Format::Q5_0 => {
                    super::avx2_eights::dot8_raw32::<false>(format, w, a)
                }
                Format::Q4_1 => super::avx2_eights::dot8_raw32::<true>(format, w, a),
                f => unreachable!(
                    "{} has no unpacked 32-value kernel (Q4_0, Q5_0 and Q4_1 do)",
                    f.name()
                ),
            }
        }
    }
    fn dot8_q8_0(&self, w: &[u8], a: &ActOcts) -> [f32; 8] {
        // SAFETY: for_isa hands this out only when the CPU has AVX2 and F16C; the kernel
        // checks the lengths.
        unsafe { super::avx2_q8_0::dot8_q8_0(w, a) }
    }
    fn dot16_q8_0(&self, w: &[u8], a: [&ActOcts; 2]) -> [f32; 16] {
        if VNNI {
            // SAFETY: for_isa hands out VNNI only when the CPU has AVX-512 F/BW/VL/VNNI
            // (and F16C); the kernel checks the lengths.
            return unsafe { super::avx512_q8_0::dot16_q8_0(w, a) };
        }
        // SAFETY: for_isa hands this out only when the CPU has AVX2 and F16C; the kernel
        // checks the lengths.
        unsafe { super::avx2_q8_0::dot16_q8_0(w, a) }
    }
    fn q8_0_pad_from(&self) -> usize {
        // Eight rows in the lanes cost little more for eight tokens than for two: with them,
        // Gemma-3's decode on the Zen 4 EPYC went from 106 to 115 tok/s at 2 sequences and
        // from 114 to 127 at 3 (alternating runs, medians).
        if VNNI { 2 } else { 4 }
    }
    fn fetch_row_after_next(&self, row: &[u8]) {
        prefetch_lines(row.as_ptr().wrapping_add(2 * row.len()), row.len());
    }
    fn dot2x4_q8_0(&self, w: [&[u8]; 2], a: &ActOcts) -> [f32; 8] {
        // SAFETY: for_isa hands this out only when the CPU has AVX2 and F16C; the kernel
        // checks the lengths.
        unsafe { super::avx2_q8_0::dot2x4_q8_0(w, a) }
    }
    fn q8_0_rows_by_eights(
        &self,
        rows: &[&[u8]],
        groups: &[ActOcts],
        tokens: usize,
        out: &mut ByToken,
    ) {
        // With VNNI, eight rows at a time in the lanes; the last one to seven, and every row
        // without VNNI, a row at a time.
        let eights = if VNNI { rows.len() / 8 * 8 } else { 0 };
        for i in (0..eights).step_by(8) {
            let w = std::array::from_fn(|r| rows[i + r]);
            for (g, a) in groups.iter().enumerate() {
                // SAFETY: for_isa hands out VNNI only when the CPU has AVX-512 F/BW/VL/VNNI
                // (and F16C); the kernel checks the lengths.
                let v = unsafe { super::avx512_q8_0_rows8::dot8x8_q8_0(w, a, g == 0) };
                let by_row: [[f32; 8]; 8] = std::array::from_fn(|r| v.map(|t| t[r]));
                by_row
                    .into_iter()
                    .enumerate()
                    .for_each(|(r, v)| out.put(g, i + r, v));
            }
        }
        q8_0_rows_with_half(
            self,
            &rows[eights..],
            groups,
            tokens,
            &mut out.from_row(eights),
        );
    }
    fn dot8_row32(&self, format: Format, row: &[Block32], a: &ActOcts) -> [f32; 8] {
        // SAFETY: for_isa hands this out only when the CPU has AVX2; the kernel checks
        // the lengths.
        unsafe {
            match format {
                Format::Q4_0 | Format::Q5_0 => super::avx2_eights::dot8_row32::<false>(row, a),
                Format::Q4_1 => super::avx2_eights::dot8_row32::<true>(row, a),
                f => unreachable!(
                    "{} has no unpacked 32-value kernel (Q4_0, Q5_0 and Q4_1 do)",
                    f.name()
                ),
            }
        }
    }
    fn dot8x4_row32(&self, format: Format, rows: [&[Block32]; 4], a: &ActOcts) -> [[f32; 8]; 4] {
        use super::avx2_eights4::dot8x4_row32;
        // SAFETY: for_isa hands this out only when the CPU has AVX2, and VNNI only when it
        // has AVX-512 F/BW/VL and VNNI; the kernels check the lengths.
        unsafe {
            match format {
                Format::Q4_1 => dot8x4_row32::<true, VNNI>(rows, a),
                _ => dot8x4_row32::<false, VNNI>(rows, a),
            }
        }
    }
    fn dot4_q5_0_quads(&self, w: &[u8], quads: &ActQuads, a: [&[Q8_0Wide]; 4]) -> [f32; 4] {
        if !VNNI {
            return self.dot4_q5_0(w, a);
        }
        check_quads(w, Q5_0_BYTES, quads.qs.len(), a);
        // SAFETY: as in dot4_q5_0.
        unsafe { super::avx512_quads::q5_0_quads(w, quads, a) }
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
        Some(unsafe { super::avx512_quads::q4_1_quads(w, quads, a) })
    }
    fn dot4_q4_k_quads(&self, w: &[u8], quads: &KQuads, a: [&[BlockQ8K]; 4]) -> Option<[f32; 4]> {
        if !VNNI {
            return None;
        }
        check_quads(w, Q4_K_BYTES, quads.qs.len(), a);
        // SAFETY: as in dot4_q5_0.
        Some(unsafe { super::avx512_quads::q4_k_quads(w, quads, a) })
    }
    fn rows4_q5_0(&self, w: [&[u8]; 4], a: &[Q8_0Wide]) -> [f32; 4] {
        // The AVX2 four-row kernel on every level: on a Zen 4 EPYC with AVX-512 VNNI it gave
        // Gemma-3's tg128 1.1 to 1.25 times the VNNI pairs kernel's (three alternating runs).
        // SAFETY: as above; the kernel checks the lengths.
        unsafe { super::avx2_rows4_q5_0::rows4_q5_0(w, a) }
    }
    // The eight rows' scales by one gather on the AVX-512 level (where these kernels were
    // first measured), by eight loads with AVX2 alone (see avx2_rows8.rs).
    fn rows8_q8_0(&self, w: &[u8], a: &[BlockQ8_0]) -> [f32; 8] {
        // SAFETY: as above; the kernel checks the lengths.
        unsafe { super::avx2_rows8::rows8_q8_0::<VNNI>(w, a) }
    }
    fn rows8_q4_1(&self, w: &[u8], a: &[BlockQ8_1]) -> [f32; 8] {
        // SAFETY: as above; the kernel checks the lengths.
        unsafe { super::avx2_rows8::rows8_q4_1::<VNNI>(w, a) }
    }
    fn rows8_q4_0(&self, w: &[u8], a: &[BlockQ8_0]) -> [f32; 8] {
        // SAFETY: as above; the kernel checks the lengths.
        unsafe { super::avx2_rows8::rows8_q4_0::<VNNI>(w, a) }
    }
    fn packed8(&self, group: &[u8], tokens: &[PackedToken], out: &mut [[f32; 8]]) {
        // SAFETY: as above; the kernels check the lengths.
        unsafe { super::avx2_packed::packed8(group, tokens, out) }
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

// ANCHOR: splat_f16
/// [`f16`] in every lane of a vector. The half is copied to eight lanes, then all eight are
/// converted: with the scalar above the compiler fills the other lanes of the vector it
/// converts from whatever register is at hand (`vpinsrw`), and when that is a kernel's
/// running sum, every block waits for the one before it.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn splat_f16(b: &[u8], i: usize) -> __m256 {
    splat_bits(u16::from_le_bytes([b[i], b[i + 1]]))
}

/// [`splat_f16`] of an f16 given by its bits.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn splat_bits(bits: u16) -> __m256 {
    _mm256_cvtph_ps(_mm_set1_epi16(bits as i16))
}
// ANCHOR_END: splat_f16

#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn load(p: &[i8], at: usize) -> __m256i {
    assert!(at + 32 <= p.len());
    // SAFETY: 32 bytes at `at`, checked above.
    unsafe { _mm256_loadu_si256(p.as_ptr().add(at).cast()) }
}

/// The sums of an `R × T` grid of lane vectors: four at once when there are four.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn grid_sums<const R: usize, const T: usize>(v: &[[__m256i; T]; R]) -> [[i32; T]; R] {
    if R * T == 4 {
        let flat: [__m256i; 4] = std::array::from_fn(|i| v[i / T][i % T]);
        let s = hsums(&flat);
        std::array::from_fn(|r| std::array::from_fn(|t| s[r * T + t]))
    } else {
        std::array::from_fn(|r| std::array::from_fn(|t| hsum(v[r][t])))
    }
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
        0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3,
        3, 3,
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
            let dots = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h));
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
