//! Chapter 8: GGUF — llama.cpp's model files, read in place.
//!
//! - [`gguf`]: the container format, parsed as untrusted input;
//! - [`types`]: ggml's tensor types and their sizes;
//! - [`metadata`]: typed reads of the key–value metadata;
//! - [`file`](mod@file): the file mapped into memory, tensors as windows on it;
//! - [`config`], [`tokenizer`](mod@tokenizer), [`model`]: a Llama model, its tokenizer and
//!   its weights, all from the one file;
//! - [`gguf_write`], [`synth`]: a GGUF writer, and small files of every architecture with
//!   random weights, for checks against llama.cpp without the real models;
//! - [`hexdump`]: the first bytes of a file, annotated;
//! - [`matrix`]: a weight matrix of any format the file holds, and the drivers that pick a
//!   product's path (one token, a few, a prefill) over chapter 7's kernels;
//! - [`engine`], [`arch`]: one decoder layer for both families, and the model from its file;
//! - [`step_parts`]: where a decode step's time goes, product by product.

pub mod arch;
pub mod bench;
pub mod config;
pub mod engine;
pub mod error;
pub mod families;
pub mod file;
pub mod gguf;
pub mod gguf_write;
pub mod hexdump;
pub mod matrix;
pub mod memory;
pub mod metadata;
pub mod model;
pub mod step_parts;
pub mod synth;
pub mod tokenizer;
pub mod types;

/// The chapter's exercises: stubs for you to fill in (see the book's "Exercises" page).
#[cfg_attr(feature = "solutions", path = "../solutions/exercises.rs")]
pub mod exercises;

pub use error::{Error, Result};
pub use file::{Access, GgufFile};
pub use gguf::{Array, Gguf, TensorInfo, Value};
pub use tokenizer::{GgufTokenizer, tokenizer};
pub use types::GgmlType;

/// A model ready to run: its weights (windows on the mapping), its tokenizer, and the
/// parsed file.
pub struct Loaded {
    pub file: GgufFile,
    pub model: engine::Model,
    pub tokenizer: GgufTokenizer,
}

// ANCHOR: load
/// Opens `path` and builds everything from it, whichever architecture it holds.
pub fn load(path: &std::path::Path) -> Result<Loaded> {
    let file = GgufFile::open(path)?;
    let mut model = arch::load_model(&file)?;
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
    // Stop at every end-of-generation token, not only the file's EOS (Gemma's chat turns
    // end with <end_of_turn>).
    for &id in &tokenizer.end_ids {
        if !model.config.eos_token_ids.contains(&id) {
            model.config.eos_token_ids.push(id);
        }
    }
    Ok(Loaded {
        file,
        model,
        tokenizer,
    })
}
// ANCHOR_END: load

/// The fastest kernels this CPU has (chapter 7's dispatch), or the level `LLM_BOOK_ISA`
/// forces: one set, seen as chapter 6's [`ch06_quantization::Kernels`] and as the whole.
pub fn kernels() -> std::result::Result<
    (
        &'static dyn ch06_quantization::Kernels,
        &'static dyn ch07_simd_parallel::kernels::ManyTokens,
    ),
    String,
> {
    let (_, k) = ch07_simd_parallel::kernels::detect()?;
    Ok((k, k))
}

impl Loaded {
    /// An engine over this model with `kernels()`.
    pub fn engine(&self) -> std::result::Result<engine::Engine<'_>, String> {
        matrix::policy::check()?; // LLM_BOOK_TASK_BYTES and chapter 7's team's variables
        engine::tuning()?; // LLM_BOOK_DECODE_TUNE
        let (k, kk) = kernels()?;
        Ok(engine::Engine::new(&self.model, k, kk))
    }
}
