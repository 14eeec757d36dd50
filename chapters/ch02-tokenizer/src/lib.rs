//! Chapter 2: the tokenizer. Text in, token ids out, and back, exactly as llama.cpp does it.
//!
//! The path a string takes through [`Tokenizer::encode`]:
//!
//! ```text
//! "<|im_start|>user\nHi 42"
//!   │ special::partition        control tokens cut out first (only with parse_special)
//!   ▼
//! [<|im_start|>] "user\nHi 42"
//!   │ pretokenize               digits alone, then GPT-2's split
//!   ▼
//! "user" "\n" "Hi" " " "4" "2"
//!   │ byte_level + bpe          each piece: one token per byte, then merges by rank
//!   ▼
//! [1, 4093, 198, 26843, 216, 36, 34]      (SmolLM2 ids)
//! ```
//!
//! and back through [`Tokenizer::decode`] or, token by token, [`StreamDecoder`].
//! SentencePiece vocabularies (Gemma-3) go through [`spm`] instead of the last two steps.

pub mod bench_inputs;
pub mod bpe;
pub mod byte_level;
pub mod error;
pub mod hf_json;
pub mod llama3_split;
pub mod pretokenize;
pub mod regex_pieces;
pub mod show;
pub mod special;
pub mod spm;
pub mod stream;
pub mod tokenizer;
pub mod train;
pub mod unicode_class;
pub mod vocab;

/// The chapter's exercises: stubs for you to fill in (see the book's "Exercises" page).
#[cfg_attr(feature = "solutions", path = "../solutions/exercises.rs")]
pub mod exercises;

pub use error::{Error, Result};
pub use pretokenize::PreTokenizer;
pub use stream::StreamDecoder;
pub use tokenizer::{MergeLoop, Model, Tokenizer};
pub use vocab::{TokenId, TokenKind, Vocab};

/// Where SmolLM2's `tokenizer.json` lives (see `ch01_tensors::models`).
pub fn smollm2_tokenizer_path() -> std::path::PathBuf {
    ch01_tensors::models::smollm2_hf_dir().join("tokenizer.json")
}
