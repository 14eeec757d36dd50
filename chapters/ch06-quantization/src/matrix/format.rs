//! The formats a [`QMatrix`](super::QMatrix) can hold, and what each costs in bytes.

use crate::blocks::{BlockQ4_0, BlockQ4_1, BlockQ8_0, QK};

// ANCHOR: format
/// How a weight matrix is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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
}
// ANCHOR_END: format

impl Format {
    /// Every format, smallest last.
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
            Format::Q8_0 => cols / QK * BlockQ8_0::BYTES,
            Format::Q4_0 => cols / QK * BlockQ4_0::BYTES,
            Format::Q4_1 => cols / QK * BlockQ4_1::BYTES,
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
        }
    }

    /// The format the activations are quantized to before meeting these weights.
    pub fn activation(self) -> Option<&'static str> {
        match self {
            Format::F32 => None,
            Format::Int8 | Format::Q8_0 | Format::Q4_0 => Some("q8_0"),
            Format::Q4_1 => Some("q8_1"),
        }
    }
}
