//! The ARM levels' kernels for [`OneToken`] and [`ManyTokens`]: which function serves which
//! shape on plain NEON and with the dot product. The kernels are in the `neon*.rs` files
//! beside this one.
//!
//! One-token products of every format have NEON kernels; four- and eight-row products are
//! made of them a row at a time (the same bits). The multi-token shapes take the defaults,
//! which call the one-token kernels a token at a time where they are chapter 7's own
//! (`tokens4_*`), and the scalar twins for the eight-token layouts, which this level does
//! not ask for ([`ManyTokens::has_eights`] is false, so chapter 8's prefill never builds
//! them here).

use super::Arm;
use super::neon_kquants as k;
use super::products::{ManyTokens, OneToken};
use ch06_quantization::Kernels;
use ch06_quantization::blocks::{BlockQ8_0, BlockQ8_1};

use crate::layout::kquant::{BlockQ8K, Q8_0Wide};

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

impl<const DOTPROD: bool> ManyTokens for Arm<DOTPROD> {}
