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

/// The block format activations are quantized to before they meet a format's weights
/// (llama.cpp's `vec_dot_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)] // llama.cpp's names
pub enum ActFormat {
    /// Blocks of 32: f16 scale + 32 × i8.
    Q8_0,
    /// Blocks of 32: f16 scale, f16 `d · Σ a`, 32 × i8.
    Q8_1,
    /// Super-blocks of 256: f32 scale, 256 × i8, 16 sums of 16 (chapter 8).
    Q8_K,
}

// ANCHOR: spec
/// What there is to know about a format in one place: one row of [`Format::spec`]'s table.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    /// The name used on the command line and in llama.cpp (`q4_1`, …).
    pub name: &'static str,
    /// Weights per block: 32, or 256 for the K-quants (1 for F32 and INT8).
    pub block_values: usize,
    /// Bytes per block (F32 and INT8: per weight).
    pub block_bytes: usize,
    /// Storage per weight, in bits (for a row long enough that INT8's scale vanishes).
    pub bits_per_weight: f64,
    /// The format the activations are quantized to before meeting these weights.
    pub activation: Option<ActFormat>,
    /// Its id in a GGUF file (ggml's `ggml_type`); INT8 is this book's own.
    pub ggml_type: Option<u32>,
    /// Which of chapter 6's block formats it is, if a [`QMatrix`](super::QMatrix) holds it.
    pub qblocks: Option<QBlocks>,
    /// Whether chapter 7 packs its rows eight at a time, and as which kind of block.
    pub packable: Option<Packable>,
}

impl Format {
    /// This format's row of the table: the one `match` that a new format adds a row to.
    /// A format that no shared kernel serves says so here, with `None` in the last two
    /// columns, and nowhere else.
    #[rustfmt::skip] // one row a line, a table
    pub const fn spec(self) -> Spec {
        const fn row(
            (name, block_values, block_bytes, bits_per_weight): (&'static str, usize, usize, f64),
            activation: Option<ActFormat>,
            ggml_type: Option<u32>,
            qblocks: Option<QBlocks>,
            packable: Option<Packable>,
        ) -> Spec {
            Spec { name, block_values, block_bytes, bits_per_weight, activation, ggml_type, qblocks, packable }
        }
        use ActFormat::{Q8_0 as A8_0, Q8_1 as A8_1, Q8_K as A8_K};
        use Packable::{K, Q32 as P32};
        let (q4_0, q4_1, q5_0, q4_k, q6_k) = (Q32::Q4_0, Q32::Q4_1, Q32::Q5_0, KQuant::Q4_K, KQuant::Q6_K);
        let (b8_0, b4_0, b4_1) = (BlockQ8_0::BYTES, BlockQ4_0::BYTES, BlockQ4_1::BYTES);
        match self {
            //                 (name, block, bytes, bits), activations, GGUF id, QMatrix's, packed as
            Format::F32 => row(("f32", 1, 4, 32.0), None, Some(0), None, None),
            Format::Int8 => row(("int8", 1, 1, 8.0), Some(A8_0), None, None, None),
            Format::Q8_0 => row(("q8_0", QK, b8_0, 8.5), Some(A8_0), Some(8), Some(QBlocks::Q8_0), None),
            Format::Q4_0 => row(("q4_0", QK, b4_0, 4.5), Some(A8_0), Some(2), Some(QBlocks::Q4_0), Some(P32(q4_0))),
            Format::Q4_1 => row(("q4_1", QK, b4_1, 5.0), Some(A8_1), Some(3), Some(QBlocks::Q4_1), Some(P32(q4_1))),
            Format::Q5_0 => row(("q5_0", QK, 22, 5.5), Some(A8_0), Some(6), None, Some(P32(q5_0))),
            Format::Q4_K => row(("q4_k", 256, 144, 4.5), Some(A8_K), Some(12), None, Some(K(q4_k))),
            Format::Q6_K => row(("q6_k", 256, 210, 6.5625), Some(A8_K), Some(14), None, Some(K(q6_k))),
        }
    }
}
// ANCHOR_END: spec

impl Format {
    /// Every format, in the order of the enum: what a file's type id is looked up in.
    pub const EVERY: [Format; 8] = [
        Format::F32,
        Format::Int8,
        Format::Q8_0,
        Format::Q4_0,
        Format::Q4_1,
        Format::Q5_0,
        Format::Q4_K,
        Format::Q6_K,
    ];
}

// ANCHOR: narrow
/// Chapter 6's block formats: the ones a [`QMatrix`](super::QMatrix) quantizes,
/// dequantizes and multiplies itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)] // llama.cpp's names
pub enum QBlocks {
    Q8_0,
    Q4_0,
    Q4_1,
}

/// The 32-value formats whose blocks unpack to 32 small unsigned quants, a scale and maybe
/// a minimum (chapter 7's `Block32`): the formats of its eight-token kernels and packed
/// groups of 32-value blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)] // llama.cpp's names
pub enum Q32 {
    Q4_0,
    Q4_1,
    Q5_0,
}

/// Which of the two K-quants a row holds: the kernels that serve both (unpacking rows for
/// the eight-token kernels, the packed groups) take one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)] // llama.cpp's names
pub enum KQuant {
    Q4_K,
    Q6_K,
}

/// The formats chapter 7 can pack eight rows at a time (and that have eight-token kernels).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Packable {
    Q32(Q32),
    K(KQuant),
}
// ANCHOR_END: narrow

impl QBlocks {
    /// Its [`Format`].
    pub const fn format(self) -> Format {
        match self {
            QBlocks::Q8_0 => Format::Q8_0,
            QBlocks::Q4_0 => Format::Q4_0,
            QBlocks::Q4_1 => Format::Q4_1,
        }
    }
}

impl Q32 {
    /// Its [`Format`].
    pub const fn format(self) -> Format {
        match self {
            Q32::Q4_0 => Format::Q4_0,
            Q32::Q4_1 => Format::Q4_1,
            Q32::Q5_0 => Format::Q5_0,
        }
    }
    /// Whether a block stores a minimum beside its scale (`w = d·q + m`, Q4_1) rather than
    /// a scale alone: the kernels take a different path for it.
    pub const fn has_min(self) -> bool {
        match self {
            Q32::Q4_1 => true,
            Q32::Q4_0 | Q32::Q5_0 => false,
        }
    }
}

impl KQuant {
    /// Its [`Format`].
    pub const fn format(self) -> Format {
        match self {
            KQuant::Q4_K => Format::Q4_K,
            KQuant::Q6_K => Format::Q6_K,
        }
    }
}

impl Packable {
    /// Its [`Format`].
    pub const fn format(self) -> Format {
        match self {
            Packable::Q32(q) => q.format(),
            Packable::K(k) => k.format(),
        }
    }
}

impl Format {
    /// Which of chapter 6's block formats this is, if any ([`Spec::qblocks`]).
    pub const fn qblocks(self) -> Option<QBlocks> {
        self.spec().qblocks
    }

    /// How chapter 7 packs it, if it does ([`Spec::packable`]).
    pub const fn packable(self) -> Option<Packable> {
        self.spec().packable
    }

    /// The 32-value kind of block it is, if one ([`Q32`]).
    pub const fn q32(self) -> Option<Q32> {
        match self.packable() {
            Some(Packable::Q32(q)) => Some(q),
            Some(Packable::K(_)) | None => None,
        }
    }

    /// The K-quant it is, if one.
    pub const fn kquant(self) -> Option<KQuant> {
        match self.packable() {
            Some(Packable::K(k)) => Some(k),
            Some(Packable::Q32(_)) | None => None,
        }
    }

    /// The format a GGUF file's type `id` names, if the engine runs it.
    pub fn from_ggml_type(id: u32) -> Option<Format> {
        Format::EVERY
            .into_iter()
            .find(|f| f.spec().ggml_type == Some(id))
    }
}

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
        self.spec().name
    }

    /// Whether rows of this format are whole blocks (every format but F32 and INT8).
    pub fn is_blocks(self) -> bool {
        !matches!(self, Format::F32 | Format::Int8)
    }

    /// Weights per block: 32, or 256 for the K-quants (1 for F32 and INT8).
    pub fn block_values(self) -> usize {
        self.spec().block_values
    }

    /// Bytes per block (of [`Format::block_values`] weights; F32 and INT8: per weight).
    pub fn block_bytes(self) -> usize {
        self.spec().block_bytes
    }

    /// The format called `name`, if there is one.
    pub fn parse(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Bytes one row of `cols` weights takes (the INT8 row's scale included).
    #[inline]
    pub fn row_bytes(self, cols: usize) -> usize {
        let row = cols / self.block_values() * self.block_bytes();
        if self == Format::Int8 { row + 4 } else { row }
    }

    /// Storage per weight, in bits (for a row long enough that INT8's scale vanishes).
    pub fn bits_per_weight(self) -> f64 {
        self.spec().bits_per_weight
    }

    /// The format the activations are quantized to before meeting these weights.
    pub fn activation(self) -> Option<ActFormat> {
        self.spec().activation
    }
}

#[cfg(test)]
mod tests {
    use super::Format;

    /// The variants named once, as the patterns of a `match` (which the compiler checks
    /// names every variant) and as the values of an array (which the test compares).
    macro_rules! variants {
        ($($v:ident),* $(,)?) => {{
            fn named_exhaustively(f: Format) {
                match f {
                    $(Format::$v)|* => {}
                }
            }
            let _ = named_exhaustively;
            [$(Format::$v),*]
        }};
    }

    #[test]
    fn every_lists_each_variant_once_in_the_enums_order() {
        // a new variant fails to compile here until it is named, then fails the test until
        // EVERY holds it in the same place
        let all = variants!(F32, Int8, Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q6_K);
        assert_eq!(
            Format::EVERY,
            all,
            "Format::EVERY is not every variant in order"
        );
        for (i, f) in all.iter().enumerate() {
            assert_eq!(
                *f as usize, i,
                "{f:?} is variant {} of the enum, not {i}",
                *f as usize
            );
        }
    }
}
