//! Chapter 7: SIMD and threads.
//!
//! - [`isa`]: which instruction-set level this CPU has, asked once at run time;
//! - [`kernels`]: AVX2 and AVX-512 VNNI versions of chapter 6's kernels, bit-equal to them,
//!   behind chapter 6's `Kernels` trait, and the dispatch that picks a set;
//! - [`eights`]: eight tokens against one weight row, a token per 32-bit lane (prefill);
//! - [`huge`]: memory on 2 MiB pages, for weights a program copies and streams;
//! - [`pool`]: the threads a program's products run on;
//! - [`bench`]: kernel throughput, the machine's memory bandwidth, and end-to-end prefill
//!   (pp512) and decode (tg128) in llama-bench's terms.

pub mod bench;
pub mod compare;
pub mod cores;
pub mod huge;
pub mod isa;
pub mod kernels;
pub mod layout;
pub mod pool;
pub mod profile;
pub mod roofline;
pub mod stats;

/// The chapter's exercises: stubs for you to fill in (see the book's "Exercises" page).
#[cfg_attr(feature = "solutions", path = "../solutions/exercises.rs")]
pub mod exercises;

pub use isa::Isa;
