//! The block formats, byte for byte as llama.cpp lays them out (`ggml-common.h`).
//!
//! A row of weights is cut into blocks of [`QK`] = 32 consecutive values. Each block stores
//! its own scale, so one large weight only coarsens the 31 values that share its block,
//! not the whole row. Every scale is an f16 (two bytes, little-endian), every quant an
//! integer:
//!
//! ```text
//! Q8_0  34 bytes   d: f16 │ qs: 32 × i8                      x ≈ d · q
//! Q8_1  36 bytes   d: f16 │ s: f16 │ qs: 32 × i8              x ≈ d · q,  s = d · Σq
//! Q4_0  18 bytes   d: f16 │ qs: 16 bytes, two 4-bit quants    x ≈ d · (q − 8)
//! Q4_1  20 bytes   d: f16 │ m: f16 │ qs: 16 bytes             x ≈ d · q + m
//! ```
//!
//! The 4-bit formats pack element `j` in the **low** nibble of byte `j` and element
//! `j + 16` in the **high** nibble of the same byte (not `2j` and `2j + 1`): a SIMD kernel
//! then gets the first half of the block with one AND and the second with one shift.
//!
//! Weights are kept as the raw bytes a GGUF file holds (chapter 8 maps them straight from
//! disk), and each kernel reads one block at a time with `from_bytes`; activations, which
//! this program makes itself, are kept as the structs.

use crate::f16::f16_to_f32_fast as f16_to_f32;

/// Values per block, in every format of this chapter (llama.cpp's `QK8_0`, `QK4_0`, `QK4_1`).
pub const QK: usize = 32;

/// The two bytes at `b[i..i + 2]` as a little-endian f16, widened to f32.
fn half_at(b: &[u8], i: usize) -> f32 {
    f16_to_f32(u16::from_le_bytes([b[i], b[i + 1]]))
}

// ANCHOR: block_q8_0
/// 32 values as `d · q` with `q` in −127..=127: 34 bytes, 8.5 bits per value.
/// `repr(C)`: the fields in this order, no padding, as llama.cpp's `block_q8_0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockQ8_0 {
    pub d: u16,       // f16 bits: the scale, max|x| / 127
    pub qs: [i8; QK], // the quants, in order
}
// ANCHOR_END: block_q8_0

impl BlockQ8_0 {
    /// Bytes on disk and in memory.
    pub const BYTES: usize = 2 + QK;

    /// Reads a block from its 34 bytes.
    pub fn from_bytes(b: &[u8; Self::BYTES]) -> BlockQ8_0 {
        BlockQ8_0 {
            d: u16::from_le_bytes([b[0], b[1]]),
            qs: std::array::from_fn(|j| b[2 + j] as i8),
        }
    }

    /// Writes the block as llama.cpp would.
    pub fn write(&self, b: &mut [u8; Self::BYTES]) {
        b[..2].copy_from_slice(&self.d.to_le_bytes());
        for (o, &q) in b[2..].iter_mut().zip(&self.qs) {
            *o = q as u8;
        }
    }

    /// The scale as f32.
    pub fn scale(&self) -> f32 {
        f16_to_f32(self.d)
    }
}

// ANCHOR: block_q8_1
/// Q8_0 plus `s = d · Σ q`, the (quantized) sum of the block's values: 36 bytes. Only ever
/// an activation format, the partner of Q4_1 weights (see [`crate::dot`]). `repr(C)`, as
/// llama.cpp's `block_q8_1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockQ8_1 {
    pub d: u16,       // f16 bits: the scale
    pub s: u16,       // f16 bits: d · Σ qs
    pub qs: [i8; QK], // the quants
}
// ANCHOR_END: block_q8_1

impl BlockQ8_1 {
    /// Bytes in memory.
    pub const BYTES: usize = 4 + QK;

    /// The scale as f32.
    pub fn scale(&self) -> f32 {
        f16_to_f32(self.d)
    }

    /// The stored sum as f32.
    pub fn sum(&self) -> f32 {
        f16_to_f32(self.s)
    }
}

// ANCHOR: block_q4_0
/// A view of one Q4_0 block's 18 bytes: `d` (f16), then 16 bytes of nibble pairs.
#[derive(Clone, Copy, Debug)]
pub struct BlockQ4_0<'a>(pub &'a [u8; BlockQ4_0::BYTES]);

impl BlockQ4_0<'_> {
    pub const BYTES: usize = 2 + QK / 2;

    /// The scale.
    pub fn scale(&self) -> f32 {
        half_at(self.0, 0)
    }

    /// Quant `j` (0..32) as stored, 0..=15: the value is `d · (q − 8)`.
    pub fn quant(&self, j: usize) -> u8 {
        let byte = self.0[2 + j % 16];
        if j < 16 { byte & 0x0f } else { byte >> 4 }
    }
}
// ANCHOR_END: block_q4_0

// ANCHOR: block_q4_1
/// A view of one Q4_1 block's 20 bytes: `d` (f16), `m` (f16), then 16 bytes of nibble pairs.
#[derive(Clone, Copy, Debug)]
pub struct BlockQ4_1<'a>(pub &'a [u8; BlockQ4_1::BYTES]);

impl BlockQ4_1<'_> {
    pub const BYTES: usize = 4 + QK / 2;

    /// The scale: the step between two consecutive quants.
    pub fn scale(&self) -> f32 {
        half_at(self.0, 0)
    }

    /// The offset: the value of quant 0, the block's minimum.
    pub fn min(&self) -> f32 {
        half_at(self.0, 2)
    }

    /// Quant `j` (0..32) as stored, 0..=15: the value is `d · q + m`.
    pub fn quant(&self, j: usize) -> u8 {
        let byte = self.0[4 + j % 16];
        if j < 16 { byte & 0x0f } else { byte >> 4 }
    }
}
// ANCHOR_END: block_q4_1

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_llama_cpp_s() {
        assert_eq!(std::mem::size_of::<BlockQ8_0>(), 34);
        assert_eq!(std::mem::size_of::<BlockQ8_1>(), 36);
        assert_eq!(BlockQ8_0::BYTES, 34);
        assert_eq!(BlockQ8_1::BYTES, 36);
        assert_eq!(BlockQ4_0::BYTES, 18);
        assert_eq!(BlockQ4_1::BYTES, 20);
    }

    #[test]
    fn nibble_order_is_low_then_high() {
        let mut bytes = [0u8; 20];
        bytes[4] = 0xa3; // byte 0 of the quants: element 0 = 0x3, element 16 = 0xa
        bytes[19] = 0x5c; // byte 15: element 15 = 0xc, element 31 = 0x5
        let b = BlockQ4_1(&bytes);
        assert_eq!(
            (b.quant(0), b.quant(16), b.quant(15), b.quant(31)),
            (3, 10, 12, 5)
        );
    }

    #[test]
    fn q8_0_bytes_round_trip() {
        let block = BlockQ8_0 {
            d: 0x3c00,
            qs: std::array::from_fn(|j| j as i8 - 16),
        };
        let mut bytes = [0u8; 34];
        block.write(&mut bytes);
        assert_eq!(&bytes[..3], &[0x00, 0x3c, 0xf0]);
        assert_eq!(BlockQ8_0::from_bytes(&bytes), block);
    }
}
