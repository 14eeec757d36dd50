//! The chapter's error type: everything that can go wrong loading a tokenizer or decoding ids.

use std::fmt;
use std::path::PathBuf;

/// Why loading a tokenizer, or turning ids back into text, failed.
#[derive(Debug)]
pub enum Error {
    /// The tokenizer file could not be read.
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The file is not valid JSON, or its JSON does not have the shape of a `tokenizer.json`.
    Json { path: PathBuf, message: String },
    /// The file asks for something this chapter does not implement (another model type,
    /// a normalizer, an unknown pre-tokenizer ...). The message names it.
    Unsupported(String),
    /// The vocabulary contradicts itself: a gap in the ids, a merge of unknown tokens, ...
    BadVocab(String),
    /// `decode` was handed an id that is not in the vocabulary.
    TokenOutOfRange { id: u32, vocab_size: usize },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, source } => write!(f, "cannot read {}: {source}", path.display()),
            Error::Json { path, message } => {
                write!(
                    f,
                    "{} is not a valid tokenizer.json: {message}",
                    path.display()
                )
            }
            Error::Unsupported(what) => write!(f, "unsupported tokenizer: {what}"),
            Error::BadVocab(what) => write!(f, "inconsistent vocabulary: {what}"),
            Error::TokenOutOfRange { id, vocab_size } => write!(
                f,
                "token id {id} is out of range: the vocabulary has {vocab_size} tokens (ids 0..={})",
                vocab_size.saturating_sub(1)
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The chapter's `Result`.
pub type Result<T> = std::result::Result<T, Error>;
