//! Chapter 1: tensors.
//!
//! A model is a few hundred named arrays of numbers. This crate holds them:
//! - [`tensor`]: `Tensor`, a shape + strides + offset view over shared `f32` storage, so
//!   transposes, slices and reshapes are free;
//! - [`ops`]: the kernels on plain slices — matmul (naive and cache-blocked), matvec,
//!   RMSNorm, softmax, SiLU — that later chapters call in their hot loops;
//! - [`half`]: decoding f16 and bf16 by hand;
//! - [`safetensors`]: reading model files through `mmap`, zero-copy, refusing bad files;
//! - [`files`]: opening files strangers name: regular files only, size-capped;
//! - [`models`]: where the book's models live on disk and how to fetch them;
//! - [`pipe`]: a binary piped into `head` stops quietly instead of panicking;
//! - [`random`]: deterministic pseudo-random numbers for demos, tests and benches;
//! - [`stopwatch`]: the best of repeated timed runs, for the chapters' speed tables.

mod error;
pub mod files;
pub mod half;
pub mod models;
pub mod ops;
pub mod pipe;
pub mod random;
pub mod safetensors;
pub mod stopwatch;
mod storage;
pub mod tensor;

pub use error::Error;
pub use tensor::Tensor;

// ANCHOR: exercises_module
/// The chapter's exercises: stubs for you to fill in (see the book's "Exercises" page).
#[cfg_attr(feature = "solutions", path = "../solutions/exercises.rs")]
pub mod exercises;
// ANCHOR_END: exercises_module
