//! Chapter 7: SIMD and threads.
//!
//! The quantized kernel layer of the whole engine lives here, in two levels (chapter 8's
//! matrix drivers are the third, on top):
//!
//! - [`layout`]: how quantized data lies in memory, and the plain Rust that defines what each
//!   kernel must compute: chapter 8's formats (Q5_0, the K-quants), eight tokens a register
//!   ([`layout::eights`]), eight rows interleaved ([`layout::packed`]);
//! - [`kernels`]: the AVX2 and AVX-512 VNNI kernels of every format and shape, bit-equal to
//!   the scalar ones, behind chapter 6's `Kernels` and this chapter's `OneToken` and
//!   `ManyTokens`, and the dispatch that picks a set ([`isa`]: which level this CPU has);
//!
//! and what runs them:
//!
//! - [`huge`]: memory on 2 MiB pages, for weights a program copies and streams;
//! - [`pool`]: the threads a program's products run on, and [`team`]: the threads a decode
//!   step's small regions run on, and [`regions`]: what one region costs on each;
//! - [`bench`](mod@bench): kernel throughput, the machine's memory bandwidth, and end-to-end
//!   prefill (pp512) and decode (tg128) in llama-bench's terms.

// A match over a format names every format, so that adding one makes the compiler list
// every place that must handle it (no `_ =>` that quietly sends it down another's path).
#![deny(clippy::wildcard_enum_match_arm)]

pub mod bench;
pub mod compare;
pub mod cores;
pub mod huge;
pub mod isa;
pub mod kernels;
pub mod layout;
pub mod pool;
pub mod profile;
pub mod regions;
pub mod roofline;
pub mod stats;
pub mod team;

/// The chapter's exercises: stubs for you to fill in (see the book's "Exercises" page).
#[cfg_attr(feature = "solutions", path = "../solutions/exercises.rs")]
pub mod exercises;

pub use isa::Isa;
