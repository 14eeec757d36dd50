//! The ARM levels' kernels for chapter 6's [`Kernels`], [`OneToken`] and [`ManyTokens`]: which
//! function serves which shape on plain NEON and with the dot product. The kernels are in the
//! `neon_*.rs` files beside this one.
//!
//! One-token products of every format have NEON kernels; four- and eight-row products are
//! made of them a row at a time (the same bits). Prefill takes the eight-token layouts
//! (`has_eights`), with NEON kernels for one row against eight tokens of every format; the
//! shapes built from those (four rows, two eights, half an eight: `dot8x4_*`, `dot16_q8_0`,
//! `dot2x4_q8_0`) are the defaults, which call them. Left to the defaults as well: the K-quants'
//! unpacking (plain Rust, once per row and band), the four-token `tokens4_*` (a one-token
//! kernel per token), and VNNI's interleaved quads and the packed layout, which this level
//! does not use (no `has_quads`; chapter 8 packs only for AVX2).

use super::Arm;
use super::neon_eights_all as e;
use super::neon_one_q5_0_k as k;
use super::products::{ManyTokens, OneToken};
use super::{neon_many_f32, neon_one_f32, neon_one_q4_q8, neon_quantize};
use ch06_quantization::Kernels;
use ch06_quantization::blocks::{BlockQ8_0, BlockQ8_1};

use crate::layout::eights::{Block32, Eights, Rows32};
use crate::layout::eights_k::{EightsK, RowsK};
use crate::layout::kquant::{BlockQ8K, Q8_0Wide};
use ch06_quantization::matrix::Q32;

// SAFETY (for every call below): a value of `Arm<DOTPROD>` exists only if [`for_isa`] found
// NEON on this CPU (with `DOTPROD`, the dot-product instructions too): what those functions
// enable.
impl<const DOTPROD: bool> Kernels for Arm<DOTPROD> {
    fn name(&self) -> &'static str {
        if DOTPROD { "dotprod" } else { "neon" }
    }
    fn dot_q8_0_q8_0(&self, w: &[u8], a: &[BlockQ8_0]) -> f32 {
        unsafe {
            if DOTPROD {
                neon_one_q4_q8::dot_q8_0_q8_0_sdot(w, a)
            } else {
                neon_one_q4_q8::dot_q8_0_q8_0(w, a)
            }
        }
    }
    fn dot_q4_0_q8_0(&self, w: &[u8], a: &[BlockQ8_0]) -> f32 {
        unsafe {
            if DOTPROD {
                neon_one_q4_q8::dot_q4_0_q8_0_sdot(w, a)
            } else {
                neon_one_q4_q8::dot_q4_0_q8_0(w, a)
            }
        }
    }
    fn dot_q4_1_q8_1(&self, w: &[u8], a: &[BlockQ8_1]) -> f32 {
        unsafe {
            if DOTPROD {
                neon_one_q4_q8::dot_q4_1_q8_1_sdot(w, a)
            } else {
                neon_one_q4_q8::dot_q4_1_q8_1(w, a)
            }
        }
    }
    fn dot_int8_q8_0(&self, w: &[u8], scale: f32, a: &[BlockQ8_0]) -> f32 {
        unsafe {
            if DOTPROD {
                neon_one_q4_q8::dot_int8_q8_0_sdot(w, scale, a)
            } else {
                neon_one_q4_q8::dot_int8_q8_0(w, scale, a)
            }
        }
    }
    fn quantize_q8_0(&self, x: &[f32], out: &mut Vec<BlockQ8_0>) {
        unsafe { neon_quantize::quantize_q8_0(x, out) }
    }
    fn quantize_q8_1(&self, x: &[f32], out: &mut Vec<BlockQ8_1>) {
        unsafe { neon_quantize::quantize_q8_1(x, out) }
    }
    fn dot_f32(&self, a: &[f32], b: &[f32]) -> f32 {
        unsafe { neon_one_f32::dot_f32(a, b) }
    }
    fn axpy(&self, y: &mut [f32], a: f32, x: &[f32]) {
        unsafe { neon_one_f32::axpy(y, a, x) }
    }
    fn dot_f32_rows(&self, q: &[f32], rows: &[f32], out: &mut [f32]) {
        unsafe { neon_one_f32::dot_f32_rows(q, rows, out) }
    }
    fn axpy_rows(&self, y: &mut [f32], w: &[f32], rows: &[f32]) {
        unsafe { neon_one_f32::axpy_rows(y, w, rows) }
    }
    fn dot_f32_rows_many(&self, qs: &[f32], d: usize, rows: &[f32], out: &mut [f32]) {
        unsafe { neon_many_f32::dot_f32_rows_many(qs, d, rows, out) }
    }
    fn f16_to_f32s(&self, src: &[u16], dst: &mut [f32]) {
        unsafe { neon_one_f32::f16_to_f32s(src, dst) }
    }
    // dot_f32_many, axpy_many and the dot4_* products: chapter 6's defaults, which call the
    // NEON dot_f32, axpy and one-row products above (the same bits, less register reuse).
}

// ANCHOR: arm_one_token
// SAFETY (for every call below): a value of `Arm<DOTPROD>` exists only if `for_isa` found
// NEON on this CPU (with `DOTPROD`, the dot-product instructions too): what they enable.
impl<const DOTPROD: bool> OneToken for Arm<DOTPROD> {
    fn dot_q4_k(&self, w: &[u8], a: &[BlockQ8K]) -> f32 {
        unsafe {
            if DOTPROD {
                k::dot_q4_k_sdot(w, a)
            } else {
                k::dot_q4_k(w, a)
            }
        }
    }
    fn dot_q6_k(&self, w: &[u8], a: &[BlockQ8K]) -> f32 {
        unsafe {
            if DOTPROD {
                k::dot_q6_k_sdot(w, a)
            } else {
                k::dot_q6_k(w, a)
            }
        }
    }
    fn dot_q5_0(&self, w: &[u8], a: &[Q8_0Wide]) -> f32 {
        unsafe {
            if DOTPROD {
                k::dot_q5_0_sdot(w, a)
            } else {
                k::dot_q5_0(w, a)
            }
        }
    }
    fn rows8_q8_0(&self, w: &[u8], a: &[BlockQ8_0]) -> [f32; 8] {
        let row = w.len() / 8;
        std::array::from_fn(|r| self.dot_q8_0_q8_0(&w[r * row..(r + 1) * row], a))
    }
    fn rows8_q4_0(&self, w: &[u8], a: &[BlockQ8_0]) -> [f32; 8] {
        let row = w.len() / 8;
        std::array::from_fn(|r| self.dot_q4_0_q8_0(&w[r * row..(r + 1) * row], a))
    }
    fn rows8_q4_1(&self, w: &[u8], a: &[BlockQ8_1]) -> [f32; 8] {
        let row = w.len() / 8;
        std::array::from_fn(|r| self.dot_q4_1_q8_1(&w[r * row..(r + 1) * row], a))
    }
}
// ANCHOR_END: arm_one_token

// ANCHOR: arm_many_tokens
// SAFETY: as above, for every call below.
impl<const DOTPROD: bool> ManyTokens for Arm<DOTPROD> {
    fn has_eights(&self) -> bool {
        true
    }
    fn unpack_rows32(&self, format: Q32, rows: &[&[u8]], out: &mut Rows32) {
        out.unpack(format.format().block_bytes(), rows, |b| unsafe {
            e::unpack_block(format, b)
        });
    }
    fn dot8_row32(&self, format: Q32, row: &[Block32], a: &Eights) -> [f32; 8] {
        unsafe {
            if DOTPROD {
                e::dot8_row32_sdot(format, row, a)
            } else {
                e::dot8_row32(format, row, a)
            }
        }
    }
    fn dot8_raw32(&self, format: Q32, w: &[u8], a: &Eights) -> [f32; 8] {
        unsafe {
            if DOTPROD {
                e::dot8_raw32_sdot(format, w, a)
            } else {
                e::dot8_raw32(format, w, a)
            }
        }
    }
    fn dot8_q8_0(&self, w: &[u8], a: &Eights) -> [f32; 8] {
        unsafe {
            if DOTPROD {
                e::dot8_q8_0_sdot(w, a)
            } else {
                e::dot8_q8_0(w, a)
            }
        }
    }
    fn dot8_q4_k(&self, rows: &RowsK, i: usize, a: &EightsK) -> [f32; 8] {
        unsafe {
            if DOTPROD {
                e::dot8_q4_k_sdot(rows, i, a)
            } else {
                e::dot8_q4_k(rows, i, a)
            }
        }
    }
    fn dot8_q6_k(&self, rows: &RowsK, i: usize, a: &EightsK) -> [f32; 8] {
        unsafe {
            if DOTPROD {
                e::dot8_q6_k_sdot(rows, i, a)
            } else {
                e::dot8_q6_k(rows, i, a)
            }
        }
    }
}
// ANCHOR_END: arm_many_tokens
