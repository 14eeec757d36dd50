//! The chapter's error type. Kernels panic on slices that do not fit their shapes (a bug
//! in the caller); everything that reads files or configuration returns `Result<_, Error>`,
//! and the binary prints the `Display` text and exits 1.

use std::fmt;
use std::path::PathBuf;

/// What can go wrong in this chapter.
#[derive(Debug)]
pub enum Error {
    /// From chapter 1: reading the safetensors file, or a tensor shape.
    Tensors(ch01_tensors::Error),
    /// From chapter 2: loading the tokenizer or decoding a token.
    Tokenizer(ch02_tokenizer::Error),
    /// Reading a file failed.
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A configuration value is missing or impossible (odd head_dim, heads that do not divide).
    Config(String),
    /// Arguments whose shapes do not fit together.
    Shape(String),
    /// The model file lacks a tensor this chapter needs, or has it in the wrong shape.
    Model(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Tensors(e) => write!(f, "{e}"),
            Error::Tokenizer(e) => write!(f, "tokenizer: {e}"),
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
            Error::Config(msg) => write!(f, "config: {msg}"),
            Error::Shape(msg) => write!(f, "shape error: {msg}"),
            Error::Model(msg) => write!(f, "model: {msg}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Tensors(e) => Some(e),
            Error::Tokenizer(e) => Some(e),
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<ch01_tensors::Error> for Error {
    fn from(e: ch01_tensors::Error) -> Self {
        Error::Tensors(e)
    }
}

impl From<ch02_tokenizer::Error> for Error {
    fn from(e: ch02_tokenizer::Error) -> Self {
        Error::Tokenizer(e)
    }
}

impl From<crate::config::Error> for Error {
    fn from(e: crate::config::Error) -> Self {
        match e {
            crate::config::Error::Io { path, source } => Error::Io { path, source },
            other => Error::Config(other.to_string()),
        }
    }
}
