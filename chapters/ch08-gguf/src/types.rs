//! ggml's tensor types: the number in a tensor's description, and how many bytes its
//! values take.
//!
//! Most types store values in blocks: Q4_1 packs 32 weights into 20 bytes, Q4_K packs 256
//! into 144. A row's length must then be a whole number of blocks, and its size in bytes is
//! `values / block_values × block_bytes`. The ids and sizes are ggml's (its `ggml_type`
//! enum and type-traits table, which the `gguf` Python package mirrors). The gaps, ids 4,
//! 5, 31–33 and 36–38, belong to formats ggml has since removed. Q8_1 (9) and Q8_K (15) are
//! in the table although no model file stores its weights in them: they are the formats
//! ggml's CPU kernels quantize activations to, and a file may still hold them.

use ch06_quantization::Format;

use crate::error::{Error, Result};

/// A ggml tensor type this reader knows the size of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GgmlType(u32);

// ANCHOR: types
/// (id, name, values per block, bytes per block).
const TYPES: &[(u32, &str, u64, u64)] = &[
    (0, "F32", 1, 4),
    (1, "F16", 1, 2),
    (2, "Q4_0", 32, 18),
    (3, "Q4_1", 32, 20),
    (6, "Q5_0", 32, 22),
    (7, "Q5_1", 32, 24),
    (8, "Q8_0", 32, 34),
    (9, "Q8_1", 32, 36),
    (10, "Q2_K", 256, 84),
    (11, "Q3_K", 256, 110),
    (12, "Q4_K", 256, 144),
    (13, "Q5_K", 256, 176),
    (14, "Q6_K", 256, 210),
    (15, "Q8_K", 256, 292),
    (16, "IQ2_XXS", 256, 66),
    (17, "IQ2_XS", 256, 74),
    (18, "IQ3_XXS", 256, 98),
    (19, "IQ1_S", 256, 50),
    (20, "IQ4_NL", 32, 18),
    (21, "IQ3_S", 256, 110),
    (22, "IQ2_S", 256, 82),
    (23, "IQ4_XS", 256, 136),
    (24, "I8", 1, 1),
    (25, "I16", 1, 2),
    (26, "I32", 1, 4),
    (27, "I64", 1, 8),
    (28, "F64", 1, 8),
    (29, "IQ1_M", 256, 56),
    (30, "BF16", 1, 2),
    (34, "TQ1_0", 256, 54),
    (35, "TQ2_0", 256, 66),
    (39, "MXFP4", 32, 17),
];
// ANCHOR_END: types

impl GgmlType {
    pub const F32: GgmlType = GgmlType(0);
    pub const F16: GgmlType = GgmlType(1);
    pub const Q4_0: GgmlType = GgmlType(2);
    pub const Q4_1: GgmlType = GgmlType(3);
    pub const Q5_0: GgmlType = GgmlType(6);
    pub const Q8_0: GgmlType = GgmlType(8);
    pub const Q4_K: GgmlType = GgmlType(12);
    pub const Q6_K: GgmlType = GgmlType(14);

    // ANCHOR: format
    /// The engine's name for the blocks of this type, if it runs them: the one map from a
    /// file's type id to the [`Format`] every matrix and kernel is chosen by, the id being a
    /// column of chapter 6's table ([`Format::spec`]).
    pub fn format(self) -> Option<Format> {
        Format::from_ggml_type(self.0)
    }
    // ANCHOR_END: format

    /// The type with this id, if ggml (at the pinned version) has one.
    pub fn from_id(id: u32) -> Option<GgmlType> {
        TYPES.iter().any(|t| t.0 == id).then_some(GgmlType(id))
    }

    fn entry(self) -> &'static (u32, &'static str, u64, u64) {
        TYPES
            .iter()
            .find(|t| t.0 == self.0)
            .expect("a GgmlType is only made from an id in the table")
    }

    pub fn id(self) -> u32 {
        self.0
    }
    pub fn name(self) -> &'static str {
        self.entry().1
    }
    /// Values per block (1 for the plain types).
    pub fn block_values(self) -> u64 {
        self.entry().2
    }
    /// Bytes per block.
    pub fn block_bytes(self) -> u64 {
        self.entry().3
    }

    // ANCHOR: byte_size
    /// Bytes taken by a tensor of this type with shape `dims` (ggml order: `dims[0]` is the
    /// row length, the one that is cut into blocks). An error names what does not fit:
    /// a row that is not whole blocks, or a product that overflows 64 bits.
    pub fn byte_size(self, name: &str, dims: &[u64]) -> Result<u64> {
        let err = |message: String| Error::Tensor {
            name: name.to_string(),
            message,
        };
        let row = *dims
            .first()
            .ok_or_else(|| err("it has no dimensions".into()))?;
        if !row.is_multiple_of(self.block_values()) {
            return Err(err(format!(
                "rows of {row} values are not whole {} blocks of {}",
                self.name(),
                self.block_values()
            )));
        }
        let elements = dims
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| err(format!("shape {dims:?} has 2^64 values or more")))?;
        (elements / self.block_values())
            .checked_mul(self.block_bytes())
            .ok_or_else(|| err(format!("shape {dims:?} takes 2^64 bytes or more")))
    }
    // ANCHOR_END: byte_size
}

impl std::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_of_the_formats_chapter_6_built() {
        let q41 = GgmlType::from_id(3).unwrap();
        assert_eq!(q41.byte_size("w", &[576, 1536]).unwrap(), 1536 * 18 * 20);
        assert_eq!(GgmlType::F32.byte_size("n", &[576]).unwrap(), 2304);
        assert!(GgmlType::Q8_0.byte_size("w", &[33, 2]).is_err());
        assert!(GgmlType::F32.byte_size("w", &[1 << 40, 1 << 40]).is_err());
        assert!(GgmlType::from_id(4).is_none() && GgmlType::from_id(5).is_none());
    }

    #[test]
    fn q8_1_is_32_values_in_36_bytes_two_f16_and_32_int8() {
        let q81 = GgmlType::from_id(9).expect("id 9 is ggml's Q8_1, which ggml still has");
        assert_eq!(
            (q81.name(), q81.block_values(), q81.block_bytes()),
            ("Q8_1", 32, 36)
        );
        assert_eq!(q81.byte_size("a", &[64, 3]).unwrap(), 3 * 2 * 36);
        assert!(
            q81.byte_size("a", &[48]).is_err(),
            "48 values are not whole blocks of 32"
        );
    }
}
