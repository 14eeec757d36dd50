//! The x86 levels' kernels for chapter 6's [`Kernels`], [`OneToken`] and [`ManyTokens`]: which
//! function serves which shape on AVX2 and on AVX-512 VNNI. The kernels are in the files beside this one.
//!
//! AVX2 versions. `vpmaddubsw` needs one unsigned operand: the K-quants' 4- and 6-bit
//! quants are unsigned before their offset, so they go in as they are and the offset is
//! taken out with the activations' precomputed sums; Q5_0's quants are made signed and
//! chapter 7's sign trick moves the sign onto them, leaving the activations unsigned. The sub-block scales ride in `vpmaddwd`'s second operand,
//! so a whole super-block needs one horizontal sum per token, not one per sub-block.
use super::X86;
use super::products::{ByToken, ManyTokens, OneToken, q8_0_rows_with_half};
use super::{avx2_exp, avx2_many_f32, avx2_one_f32, avx2_one_q4_q8, avx2_quantize};
use super::{avx2_rows4_q4_q8, avx512_attention_f32, avx512_exp};
use std::ops::Range;

use crate::layout::eights::{Block32, Eights, Rows32};
use crate::layout::eights_k::{EightsK, RowsK};
use crate::layout::kquant::{BlockQ8K, KQuant, Q4_K_BYTES, Q5_0_BYTES, Q6_K_BYTES, Q8_0Wide};
use crate::layout::packed::Packed;
use crate::layout::packed_dot::PackedToken;
use crate::layout::quads::{ActQuads, KQuads};
use ch06_quantization::Kernels;
use ch06_quantization::blocks::{BlockQ8_0, BlockQ8_1};
use ch06_quantization::matrix::Q32;

use crate::kernels::x86_helpers::prefetch_lines;

use super::avx2_grid_k::{q4_k, q6_k};
use super::avx2_grid_q5_0::q5_0;

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

// SAFETY (for every call below): a value of `X86<VNNI>` exists only if [`for_isa`] found
// the features those functions enable on this CPU (with `VNNI`, AVX-512 F/BW/VL/VNNI too).
impl<const VNNI: bool> Kernels for X86<VNNI> {
    fn name(&self) -> &'static str {
        if VNNI { "avx512" } else { "avx2" }
    }
    fn dot_q8_0_q8_0(&self, w: &[u8], a: &[BlockQ8_0]) -> f32 {
        unsafe {
            if VNNI {
                avx2_one_q4_q8::dot_q8_0_q8_0_vnni(w, a)
            } else {
                avx2_one_q4_q8::dot_q8_0_q8_0(w, a)
            }
        }
    }
    fn dot_q4_0_q8_0(&self, w: &[u8], a: &[BlockQ8_0]) -> f32 {
        unsafe {
            if VNNI {
                avx2_one_q4_q8::dot_q4_0_q8_0_vnni(w, a)
            } else {
                avx2_one_q4_q8::dot_q4_0_q8_0(w, a)
            }
        }
    }
    fn dot_q4_1_q8_1(&self, w: &[u8], a: &[BlockQ8_1]) -> f32 {
        unsafe {
            if VNNI {
                avx2_one_q4_q8::dot_q4_1_q8_1_vnni(w, a)
            } else {
                avx2_one_q4_q8::dot_q4_1_q8_1(w, a)
            }
        }
    }
    fn dot_int8_q8_0(&self, w: &[u8], scale: f32, a: &[BlockQ8_0]) -> f32 {
        unsafe {
            if VNNI {
                avx2_one_q4_q8::dot_int8_q8_0_vnni(w, scale, a)
            } else {
                avx2_one_q4_q8::dot_int8_q8_0(w, scale, a)
            }
        }
    }
    fn quantize_q8_0(&self, x: &[f32], out: &mut Vec<BlockQ8_0>) {
        unsafe { avx2_quantize::quantize_q8_0(x, out) }
    }
    fn quantize_q8_1(&self, x: &[f32], out: &mut Vec<BlockQ8_1>) {
        unsafe { avx2_quantize::quantize_q8_1(x, out) }
    }
    fn dot4_q4_1_q8_1(&self, w: [&[u8]; 4], a: [&[BlockQ8_1]; 4]) -> [f32; 4] {
        unsafe { avx2_rows4_q4_q8::dot4_q4_1_q8_1(w, a) }
    }
    fn dot4_q8_0_q8_0(&self, w: [&[u8]; 4], a: [&[BlockQ8_0]; 4]) -> [f32; 4] {
        unsafe { avx2_rows4_q4_q8::dot4_q8_0_q8_0(w, a) }
    }
    fn dot4_q4_0_q8_0(&self, w: [&[u8]; 4], a: [&[BlockQ8_0]; 4]) -> [f32; 4] {
        unsafe { avx2_rows4_q4_q8::dot4_q4_0_q8_0(w, a) }
    }
    fn dot_f32(&self, a: &[f32], b: &[f32]) -> f32 {
        unsafe { avx2_one_f32::dot_f32(a, b) }
    }
    fn axpy(&self, y: &mut [f32], a: f32, x: &[f32]) {
        unsafe { avx2_one_f32::axpy(y, a, x) }
    }
    fn dot_f32_rows(&self, q: &[f32], rows: &[f32], out: &mut [f32]) {
        unsafe { avx2_one_f32::dot_f32_rows(q, rows, out) }
    }
    fn axpy_rows(&self, y: &mut [f32], w: &[f32], rows: &[f32]) {
        // one output of the 512-bit kernel where it takes the shape (a weight a row)
        let d = y.len();
        if VNNI
            && w.len() * d == rows.len()
            // SAFETY: VNNI only where the CPU has AVX-512 F.
            && unsafe { avx512_attention_f32::axpy_rows_many(y, d, w, rows) }.is_some()
        {
            return;
        }
        unsafe { avx2_one_f32::axpy_rows(y, w, rows) }
    }
    fn dot_f32_many(&self, qs: &[&[f32]], rows: &[&[f32]], out: &mut [f32]) {
        unsafe {
            if VNNI {
                avx512_attention_f32::dot_f32_many(qs, rows, out)
            } else {
                avx2_many_f32::dot_f32_many(qs, rows, out)
            }
        }
    }
    fn axpy_rows_many(&self, ys: &mut [f32], d: usize, w: &[f32], rows: &[f32]) {
        // SAFETY: VNNI only where the CPU has AVX-512 F.
        if VNNI && unsafe { avx512_attention_f32::axpy_rows_many(ys, d, w, rows) }.is_some() {
            return;
        }
        ch06_quantization::kernels::axpy_rows_each(self, ys, d, w, rows);
    }
    fn dot_f32_rows_many(&self, qs: &[f32], d: usize, rows: &[f32], out: &mut [f32]) {
        unsafe {
            if VNNI {
                avx512_attention_f32::dot_f32_rows_many(qs, d, rows, out)
            } else {
                avx2_many_f32::dot_f32_rows_many(qs, d, rows, out)
            }
        }
    }
    fn axpy_many(&self, ys: &mut [f32], w: &[f32], rows: &[&[f32]]) {
        // SAFETY: VNNI only where the CPU has AVX-512 F.
        if VNNI && unsafe { avx512_attention_f32::axpy_many(ys, w, rows) }.is_some() {
            return;
        }
        unsafe { avx2_many_f32::axpy_many(ys, w, rows) }
    }
    fn f16_to_f32s(&self, src: &[u16], dst: &mut [f32]) {
        unsafe { avx2_one_f32::f16_to_f32s(src, dst) }
    }
    fn exp_inplace(&self, x: &mut [f32]) {
        unsafe {
            if VNNI {
                avx512_exp::exp_inplace(x)
            } else {
                avx2_exp::exp_inplace(x)
            }
        }
    }
    fn softmax_rows(&self, x: &mut [f32], n: usize) {
        unsafe {
            if VNNI {
                avx512_exp::softmax_rows(x, n)
            } else {
                avx2_exp::softmax_rows(x, n)
            }
        }
    }
}

// ANCHOR: x86_one_token
impl<const VNNI: bool> OneToken for X86<VNNI> {
    fn dot_q4_k(&self, w: &[u8], a: &[BlockQ8K]) -> f32 {
        // SAFETY: for_isa hands this out only when the CPU has AVX2 and F16C.
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
    fn rows4_q4_k(&self, w: [&[u8]; 4], a: &[BlockQ8K]) -> [f32; 4] {
        // SAFETY: as above.
        (unsafe { q4_k::<4, 1>(w, [a]) }).map(|r| r[0])
    }
    fn rows4_q6_k(&self, w: [&[u8]; 4], a: &[BlockQ8K]) -> [f32; 4] {
        // SAFETY: as above.
        (unsafe { q6_k::<4, 1>(w, [a]) }).map(|r| r[0])
    }
    fn rows4_q5_0(&self, w: [&[u8]; 4], a: &[Q8_0Wide]) -> [f32; 4] {
        // The AVX2 four-row kernel on every level: on AVX-512 VNNI it beat the VNNI pairs
        // kernel at decode (the CHANGELOG has the figures).
        // SAFETY: as above; the kernel checks the lengths.
        unsafe { super::avx2_rows4_q5_0::rows4_q5_0(w, a) }
    }
    // The eight rows' scales by one gather on the AVX-512 level, by eight loads with AVX2
    // alone (see avx2_rows8_q4_q8.rs).
    fn rows8_q8_0(&self, w: &[u8], a: &[BlockQ8_0]) -> [f32; 8] {
        // SAFETY: as above; the kernel checks the lengths.
        unsafe { super::avx2_rows8_q4_q8::rows8_q8_0::<VNNI>(w, a) }
    }
    fn rows8_q4_0(&self, w: &[u8], a: &[BlockQ8_0]) -> [f32; 8] {
        // SAFETY: as above; the kernel checks the lengths.
        unsafe { super::avx2_rows8_q4_q8::rows8_q4_0::<VNNI>(w, a) }
    }
    fn rows8_q4_1(&self, w: &[u8], a: &[BlockQ8_1]) -> [f32; 8] {
        // SAFETY: as above; the kernel checks the lengths.
        unsafe { super::avx2_rows8_q4_q8::rows8_q4_1::<VNNI>(w, a) }
    }
}
// ANCHOR_END: x86_one_token

impl<const VNNI: bool> ManyTokens for X86<VNNI> {
    fn has_eights(&self) -> bool {
        true
    }
    fn has_quads(&self) -> bool {
        VNNI
    }
    fn tokens4_q4_k(&self, w: &[u8], a: [&[BlockQ8K]; 4]) -> [f32; 4] {
        // SAFETY: as above.
        (unsafe { q4_k::<1, 4>([w], a) })[0]
    }
    fn tokens4_q6_k(&self, w: &[u8], a: [&[BlockQ8K]; 4]) -> [f32; 4] {
        // SAFETY: as above.
        (unsafe { q6_k::<1, 4>([w], a) })[0]
    }
    fn tokens4_q5_0(&self, w: &[u8], a: [&[Q8_0Wide]; 4]) -> [f32; 4] {
        if VNNI {
            check_blocks(&[w], Q5_0_BYTES, &a);
            // SAFETY: for_isa hands out VNNI only when the CPU has AVX-512 F/BW/VL/VNNI
            // (and F16C); the lengths are checked above.
            return unsafe { super::avx512_grid_q5_0::q5_0_pairs::<1, 4>([w], a) };
        }
        // SAFETY: as above.
        (unsafe { q5_0::<1, 4>([w], a) })[0]
    }
    fn unpack_rows_k(&self, format: KQuant, rows: &[&[u8]], out: &mut RowsK) {
        // SAFETY (both): for_isa hands this out only when the CPU has AVX2 and F16C.
        match format {
            KQuant::Q4_K => out.unpack(Q4_K_BYTES, rows, |b| unsafe {
                super::avx2_eights_q32_k::unpack_q4_k(b)
            }),
            KQuant::Q6_K => out.unpack(Q6_K_BYTES, rows, |b| unsafe {
                super::avx2_eights_q32_k::unpack_q6_k(b)
            }),
        }
    }
    fn dot8_q6_k(&self, rows: &RowsK, i: usize, a: &EightsK) -> [f32; 8] {
        // SAFETY: as below; the kernel checks the lengths.
        unsafe { super::avx2_eights_q32_k::dot8_q6_k(rows, i, a) }
    }
    fn dot8_q4_k(&self, rows: &RowsK, i: usize, a: &EightsK) -> [f32; 8] {
        // SAFETY: as above; the kernel checks the lengths.
        unsafe { super::avx2_eights_q32_k::dot8_q4_k(rows, i, a) }
    }
    fn dot8x4_q4_k(&self, rows: &RowsK, i: usize, a: &EightsK) -> [[f32; 8]; 4] {
        // SAFETY: as in dot8_q4_k.
        unsafe { super::avx2_eights4_k::dot8x4_q4_k(rows, i, a) }
    }
    fn dot8x4_q6_k(&self, rows: &RowsK, i: usize, a: &EightsK) -> [[f32; 8]; 4] {
        // SAFETY: as in dot8_q4_k.
        unsafe { super::avx2_eights4_k::dot8x4_q6_k(rows, i, a) }
    }
    fn unpack_packed32(&self, p: &Packed, rows: Range<usize>, out: &mut Rows32) {
        // SAFETY: for_isa hands this out only when the CPU has AVX2 and F16C.
        unsafe { super::avx2_unpack::unpack_packed32(p, rows, out) }
    }
    fn unpack_packed_k(&self, p: &Packed, rows: Range<usize>, out: &mut RowsK) {
        // SAFETY: as above.
        unsafe { super::avx2_unpack::unpack_packed_k(p, rows, out) }
    }
    fn unpack_rows32(&self, format: Q32, rows: &[&[u8]], out: &mut Rows32) {
        // SAFETY: for_isa hands this out only when the CPU has AVX2 and F16C.
        out.unpack(format.format().block_bytes(), rows, |b| unsafe {
            super::avx2_eights_q32_k::unpack_block(format, b)
        });
    }
    fn dot8_raw32(&self, format: Q32, w: &[u8], a: &Eights) -> [f32; 8] {
        // SAFETY: for_isa hands this out only when the CPU has AVX2 and F16C; the kernel
        // checks the lengths.
        unsafe {
            if format.has_min() {
                super::avx2_eights_q32_k::dot8_raw32::<true>(format, w, a)
            } else {
                super::avx2_eights_q32_k::dot8_raw32::<false>(format, w, a)
            }
        }
    }
    fn dot8_q8_0(&self, w: &[u8], a: &Eights) -> [f32; 8] {
        // SAFETY: for_isa hands this out only when the CPU has AVX2 and F16C; the kernel
        // checks the lengths.
        unsafe { super::avx2_eights_q8_0::dot8_q8_0(w, a) }
    }
    fn dot16_q8_0(&self, w: &[u8], a: [&Eights; 2]) -> [f32; 16] {
        if VNNI {
            // SAFETY: for_isa hands out VNNI only when the CPU has AVX-512 F/BW/VL/VNNI
            // (and F16C); the kernel checks the lengths.
            return unsafe { super::avx512_sixteens_q8_0::dot16_q8_0(w, a) };
        }
        // SAFETY: for_isa hands this out only when the CPU has AVX2 and F16C; the kernel
        // checks the lengths.
        unsafe { super::avx2_eights_q8_0::dot16_q8_0(w, a) }
    }
    fn q8_0_pad_from(&self) -> usize {
        // Eight rows in the lanes cost little more for eight tokens than for two, so VNNI
        // pads from two.
        if VNNI { 2 } else { 4 }
    }
    fn fetch_row_after_next(&self, row: &[u8]) {
        prefetch_lines(row.as_ptr().wrapping_add(2 * row.len()), row.len());
    }
    fn dot2x4_q8_0(&self, w: [&[u8]; 2], a: &Eights) -> [f32; 8] {
        // SAFETY: for_isa hands this out only when the CPU has AVX2 and F16C; the kernel
        // checks the lengths.
        unsafe { super::avx2_eights_q8_0::dot2x4_q8_0(w, a) }
    }
    fn q8_0_rows_by_eights(
        &self,
        rows: &[&[u8]],
        groups: &[Eights],
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
                let v = unsafe { super::avx512_rows8_q8_0::dot8x8_q8_0(w, a, g == 0) };
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
    fn dot8_row32(&self, format: Q32, row: &[Block32], a: &Eights) -> [f32; 8] {
        // SAFETY: for_isa hands this out only when the CPU has AVX2; the kernel checks
        // the lengths.
        unsafe {
            if format.has_min() {
                super::avx2_eights_q32_k::dot8_row32::<true>(row, a)
            } else {
                super::avx2_eights_q32_k::dot8_row32::<false>(row, a)
            }
        }
    }
    fn dot8x4_row32(&self, format: Q32, rows: [&[Block32]; 4], a: &Eights) -> [[f32; 8]; 4] {
        use super::avx2_eights4_q32::dot8x4_row32;
        // SAFETY: for_isa hands this out only when the CPU has AVX2, and VNNI only when it
        // has AVX-512 F/BW/VL and VNNI; the kernels check the lengths.
        unsafe {
            if format.has_min() {
                dot8x4_row32::<true, VNNI>(rows, a)
            } else {
                dot8x4_row32::<false, VNNI>(rows, a)
            }
        }
    }
    fn dot16x4_row32(&self, format: Q32, rows: [&[Block32]; 4], a: [&Eights; 2]) -> [[f32; 16]; 4] {
        if !VNNI {
            return super::products::row32_by_eights(self, format, rows, a);
        }
        // SAFETY: for_isa hands out VNNI only when the CPU has AVX-512 F/BW/VL and VNNI.
        unsafe { sixteens_row32(format, rows, a) }
    }
    fn dot16x8_row32(&self, format: Q32, rows: [&[Block32]; 8], a: [&Eights; 2]) -> [[f32; 16]; 8] {
        if !VNNI {
            return super::products::row32_by_fours(self, format, rows, a);
        }
        // SAFETY: for_isa hands out VNNI only when the CPU has AVX-512 F/BW/VL and VNNI.
        unsafe { sixteens_row32(format, rows, a) }
    }
    fn dot16x4_k(
        &self,
        format: KQuant,
        rows: &RowsK,
        i: usize,
        a: [&EightsK; 2],
    ) -> [[f32; 16]; 4] {
        use super::avx512_sixteens4_q32_k::{dot16x4_q4_k, dot16x4_q6_k};
        if !VNNI {
            return super::products::k_by_eights(self, format, rows, i, a);
        }
        // SAFETY: for_isa hands out VNNI only when the CPU has AVX-512 F/BW/VL and VNNI;
        // the kernels check the lengths.
        unsafe {
            match format {
                KQuant::Q4_K => dot16x4_q4_k(rows, i, a),
                KQuant::Q6_K => dot16x4_q6_k(rows, i, a),
            }
        }
    }
    fn tokens4_q5_0_quads(&self, w: &[u8], quads: &ActQuads, a: [&[Q8_0Wide]; 4]) -> [f32; 4] {
        if !VNNI {
            return self.tokens4_q5_0(w, a);
        }
        check_quads(w, Q5_0_BYTES, quads.qs.len(), a);
        // SAFETY: as in tokens4_q5_0.
        unsafe { super::avx512_quads_q4_1_q5_0_q4_k::q5_0_quads(w, quads, a) }
    }
    fn tokens4_q4_1_quads(
        &self,
        w: &[u8],
        quads: &ActQuads,
        a: [&[BlockQ8_1]; 4],
    ) -> Option<[f32; 4]> {
        if !VNNI {
            return None;
        }
        check_quads(
            w,
            ch06_quantization::blocks::BlockQ4_1::BYTES,
            quads.qs.len(),
            a,
        );
        // SAFETY: as in tokens4_q5_0.
        Some(unsafe { super::avx512_quads_q4_1_q5_0_q4_k::q4_1_quads(w, quads, a) })
    }
    fn tokens4_q4_k_quads(
        &self,
        w: &[u8],
        quads: &KQuads,
        a: [&[BlockQ8K]; 4],
    ) -> Option<[f32; 4]> {
        if !VNNI {
            return None;
        }
        check_quads(w, Q4_K_BYTES, quads.qs.len(), a);
        // SAFETY: as in tokens4_q5_0.
        Some(unsafe { super::avx512_quads_q4_1_q5_0_q4_k::q4_k_quads(w, quads, a) })
    }
    fn packed8(&self, group: &[u8], tokens: &[PackedToken], out: &mut [[f32; 8]]) {
        // SAFETY: as above; the kernels check the lengths.
        unsafe { super::avx2_packed_dispatch::packed8(group, tokens, out) }
    }
}

/// `R` rows against two eights on the 512-bit VNNI kernel.
///
/// # Safety
/// The CPU must have AVX-512 F/BW/VL and VNNI.
unsafe fn sixteens_row32<const R: usize>(
    format: Q32,
    rows: [&[Block32]; R],
    a: [&Eights; 2],
) -> [[f32; 16]; R] {
    use super::avx512_sixteens4_q32_k::dot16_rows32;
    // SAFETY: the caller's promise; the kernel checks the lengths.
    unsafe {
        if format.has_min() {
            dot16_rows32::<true, R>(rows, a)
        } else {
            dot16_rows32::<false, R>(rows, a)
        }
    }
}
