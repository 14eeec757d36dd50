//! The formats a [`QMatrix`](super::QMatrix) can hold, and what each costs in bytes.

use crate::blocks::{BlockQ4_0, BlockQ4_1, BlockQ8_0, QK};

// ANCHOR: format
/// How a weight matrix is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)] // llama.cpp's names
pub enum Format {
    /// 4 bytes a weight: chapters 1–5.
    F32,
    /// One i8 a weight and one f32 scale a row (per output channel, symmetric).
    Int8,
    /// Blocks of 32: f16 scale + 32 × i8 (34 bytes).
    Q8_0,
    /// Blocks of 32: f16 scale + 16 bytes of 4-bit quants (18 bytes).
    Q4_0,
    /// Blocks of 32: f16 scale + f16 minimum + 16 bytes of 4-bit quants (20 bytes).
    Q4_1,
    /// Chapter 8's formats, which the files hold and a [`QMatrix`](super::QMatrix) does not:
    /// blocks of 32 with a fifth bit per weight (22 bytes);
    Q5_0,
    /// llama.cpp's K-quants, super-blocks of 256 weights: 4-bit (144 bytes)
    Q4_K,
    /// and 6-bit (210 bytes).
    Q6_K,
}
// ANCHOR_END: format

impl Format {
    /// Every format this chapter quantizes, smallest last.
    pub const ALL: [Format; 5] = [
        Format::F32,
        Format::Int8,
        Format::Q8_0,
        Format::Q4_1,
        Format::Q4_0,
    ];

    /// The name used on the command line and in llama.cpp (`q4_1`, …).
    pub fn name(self) -> &'static str {
        match self {
            Format::F32 => "f32",
            Format::Int8 => "int8",
            Format::Q8_0 => "q8_0",
            Format::Q4_0 => "q4_0",
            Format::Q4_1 => "q4_1",
            Format::Q5_0 => "q5_0",
            Format::Q4_K => "q4_k",
            Format::Q6_K => "q6_k",
        }
    }

    /// Whether rows of this format are whole blocks (every format but F32 and INT8).
    pub fn is_blocks(self) -> bool {
        !matches!(self, Format::F32 | Format::Int8)
    }

    /// Weights per block: 32, or 256 for the K-quants (1 for F32 and INT8).
    pub fn block_values(self) -> usize {
        match self {
            Format::F32 | Format::Int8 => 1,
            Format::Q4_K | Format::Q6_K => 256,
            _ => QK,
        }
    }

    /// Bytes per block (of [`Format::block_values`] weights; F32 and INT8: per weight).
    pub fn block_bytes(self) -> usize {
        match self {
            Format::F32 => 4,
            Format::Int8 => 1,
            Format::Q8_0 => BlockQ8_0::BYTES,
            Format::Q4_0 => BlockQ4_0::BYTES,
            Format::Q4_1 => BlockQ4_1::BYTES,
            Format::Q5_0 => 22,
            Format::Q4_K => 144,
            Format::Q6_K => 210,
        }
    }

    /// The format called `name`, if there is one.
    pub fn parse(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Bytes one row of `cols` weights takes (the INT8 row's scale included).
    #[inline]
    pub fn row_bytes(self, cols: usize) -> usize {
        match self {
            Format::F32 => 4 * cols,
            Format::Int8 => cols + 4,
            f => cols / f.block_values() * f.block_bytes(),
        }
    }

    /// Storage per weight, in bits (for a row long enough that INT8's scale vanishes).
    pub fn bits_per_weight(self) -> f64 {
        match self {
            Format::F32 => 32.0,
            Format::Int8 => 8.0,
            Format::Q8_0 => 8.5,
            Format::Q4_0 => 4.5,
            Format::Q4_1 => 5.0,
            Format::Q5_0 => 5.5,
            Format::Q4_K => 4.5,
            Format::Q6_K => 6.5625,
        }
    }

    /// The format the activations are quantized to before meeting these weights.
    pub fn activation(self) -> Option<&'static str> {
        match self {
            Format::F32 => None,
            Format::Int8 | Format::Q8_0 | Format::Q4_0 | Format::Q5_0 => Some("q8_0"),
            Format::Q4_1 => Some("q8_1"),
            Format::Q4_K | Format::Q6_K => Some("q8_k"),
        }
    }
}
