//! The bottom level of the kernel layer: how quantized data lies in memory, and the plain
//! Rust that defines what every kernel above must compute, bit for bit.

pub mod eights;
pub mod eights_k;
pub mod eights_q8_0;
pub mod kquant;
pub mod packed;
pub mod packed_dot;
pub mod quads;
