//! Chapter 6: quantization — fewer bits per weight, and the same answers.
//!
//! Chapters 1–5 keep every weight as an f32: 538 MB read for every token. This chapter
//! stores them in 8 and 4 bits, in llama.cpp's block formats, byte for byte:
//!
//! - [`f16`](mod@f16): rounding an f32 scale to the f16 the blocks store;
//! - [`blocks`]: the block layouts (Q8_0, Q8_1, Q4_0, Q4_1);
//! - [`quantize`]: llama.cpp's rules for filling them, and reading them back;
//! - [`int8`]: INT8 with one scale per row, for comparison;
//! - [`histogram`]: how weights sit inside their blocks;
//! - [`search`]: choosing scales by searching for the smallest error;
//! - [`dot`]: integer dot products of quantized weights with quantized activations;
//! - [`kernels`]: the trait those loops sit behind, so chapter 7 can swap in SIMD ones;
//! - [`matrix`]: [`QMatrix`], a weight matrix in any format, and `x · Wᵀ` with it;
//! - [`model`], [`forward`]: SmolLM2 with quantized weights, driven by chapter 5's cache;
//! - [`eval`]: perplexity, KL divergence and top-1 agreement against the f32 model.

// A match over a format names every format, so that adding one makes the compiler list
// every place that must handle it (no `_ =>` that quietly sends it down another's path).
#![deny(clippy::wildcard_enum_match_arm)]

pub mod blocks;
pub mod dot;
pub mod eval;
pub mod f16;
pub mod forward;
pub mod histogram;
pub mod int8;
pub mod kernels;
pub mod matrix;
pub mod model;
pub mod quantize;
pub mod search;

/// The chapter's exercises: stubs for you to fill in (see the book's "Exercises" page).
#[cfg_attr(feature = "solutions", path = "../solutions/exercises.rs")]
pub mod exercises;

pub use ch05_kv_cache::Error;
pub use kernels::{Kernels, Scalar};
pub use matrix::{Bytes, Format, QMatrix};
pub use model::QModel;
pub use search::ScaleRule;
