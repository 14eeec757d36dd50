//! Chapter 13: the GPU. The same quantized blocks chapter 8 maps from a GGUF file, uploaded
//! as they are and multiplied by WGSL compute shaders through wgpu, so one program runs on
//! Vulkan, Metal and DX12 and every machine can test it (Mesa's lavapipe is a Vulkan driver
//! on the CPU).
//!
//! - [`gpu`]: the adapter, the device and queue, the features found.
//! - [`acts`]: the input vector quantized as the CPU engine quantizes it.
//! - [`matvec`](mod@matvec): a matrix on the GPU and the decode product `W · x`.
//! - [`matmul`]: the prefill product `X · Wᵀ`, many tokens a dispatch, tile by tile.
//! - [`split`]: a matrix larger than one binding, split by rows over several buffers.
//! - [`quantize`], [`rmsnorm`]: the input quantized on the GPU, and RMSNorm.
//! - [`model`], [`ops`], [`bind`], [`pass`], [`step`]: chapter 8's model uploaded once, the
//!   small shaders of a pass (embedding, RoPE, attention, the SwiGLU and GELU gates,
//!   residual, soft-cap, last row, argmax), each dispatch bound once, a pass over one token
//!   or a prompt's piece, and the decoder that runs them: one submission a token, one a
//!   piece of the prompt, for every family chapter 8 runs (SmolLM2 and Gemma-3's files, and
//!   chapter 8's synthetic Llama 3, Mistral, Qwen2, Qwen3, Phi-3 and Gemma-2 files).
//! - [`tune`]: the products' layout chosen by timing the model's own step, on a GPU.
//! - [`generate`]: chapter 9's generation loop on that step.
//! - [`info`], [`bench`](mod@bench), [`decode_bench`], [`compare`], [`tile_bench`]: the
//!   binary's `info`, `kernels`, `bench`, `bench --compare` and `tiles` commands.

// A match over a format names every format (as in chapters 6 to 8), so that a new format
// makes the compiler list the places that must handle it.
#![deny(clippy::wildcard_enum_match_arm)]

pub mod acts;
pub mod bench;
pub mod bind;
pub mod compare;
pub mod decode_bench;
pub mod generate;
pub mod gpu;
pub mod info;
pub mod matmul;
pub mod matvec;
pub mod model;
pub mod ops;
pub mod pass;
pub mod quantize;
pub mod random;
pub mod rmsnorm;
pub mod split;
pub mod step;
pub mod tile_bench;
pub mod tune;

pub use gpu::{Error, Gpu, Result};
pub use matvec::{GpuMatrix, MatVec, Product, matvec};

/// The chapter's exercises: stubs for you to fill in (see the book's "Exercises" page).
#[cfg_attr(feature = "solutions", path = "../solutions/exercises.rs")]
pub mod exercises;
