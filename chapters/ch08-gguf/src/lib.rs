//! Chapter 8: GGUF — llama.cpp's model files, read in place.
//!
//! - [`gguf`]: the container format, parsed as untrusted input;
//! - [`types`]: ggml's tensor types and their sizes;
//! - [`metadata`]: typed reads of the key–value metadata;
//! - [`file`]: the file mapped into memory, tensors as windows on it;
//! - [`config`], [`tokenizer`], [`model`]: a Llama model, its tokenizer and its weights,
//!   all from the one file;
//! - [`hexdump`]: the first bytes of a file, annotated.

pub mod arch;
pub mod config;
pub mod engine;
pub mod error;
pub mod file;
pub mod gguf;
pub mod hexdump;
pub mod kquant;
pub mod ksimd;
pub mod matrix;
pub mod memory;
pub mod metadata;
pub mod model;
pub mod tokenizer;
pub mod types;

/// The chapter's exercises: stubs for you to fill in (see the book's "Exercises" page).
#[cfg_attr(feature = "solutions", path = "../solutions/exercises.rs")]
pub mod exercises;

pub use error::{Error, Result};
pub use file::{Access, GgufFile};
pub use gguf::{Array, Gguf, TensorInfo, Value};
pub use model::load_llama;
pub use tokenizer::{GgufTokenizer, tokenizer};
pub use types::GgmlType;

/// A model ready to run: its weights (windows on the mapping), its tokenizer, and the
/// parsed file.
pub struct Loaded {
    pub file: GgufFile,
    pub model: ch06_quantization::QModel,
    pub tokenizer: GgufTokenizer,
}

/// Opens `path` and builds everything from it.
pub fn load(path: &std::path::Path) -> Result<Loaded> {
    let file = GgufFile::open(path)?;
    let model = load_llama(&file)?;
    let tokenizer = tokenizer(&file.gguf)?;
    if tokenizer.tokenizer.vocab_size() != model.config.vocab_size {
        return Err(Error::Metadata {
            key: "tokenizer.ggml.tokens".into(),
            message: format!(
                "{} tokens, but the embedding has {} rows",
                tokenizer.tokenizer.vocab_size(),
                model.config.vocab_size
            ),
        });
    }
    Ok(Loaded {
        file,
        model,
        tokenizer,
    })
}
