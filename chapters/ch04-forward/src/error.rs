//! The chapter's error type. Kernels panic on slices that do not fit their shapes (a bug
//! in the caller); everything that reads files, configuration, fixtures or user input
//! returns `Result<_, Error>`, and the binary prints the `Display` text and exits 1.

use std::fmt;
use std::path::PathBuf;

/// What can go wrong loading and running a model.
#[derive(Debug)]
pub enum Error {
    /// Reading a file failed.
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// `config.json` is not JSON, or one of its fields is missing, mistyped or impossible.
    /// `field` names the field (or the pair of fields) at fault.
    Config { field: String, message: String },
    /// The safetensors file lacks a tensor the config calls for.
    MissingTensor { name: String, expected: Vec<usize> },
    /// A tensor is there but has the wrong shape. `meaning` spells the expected shape in
    /// config terms, e.g. `(num_key_value_heads * head_dim, hidden_size)`.
    WrongShape {
        name: String,
        expected: Vec<usize>,
        found: Vec<usize>,
        meaning: &'static str,
    },
    /// The file holds tensors the config does not call for (e.g. 30 layers in the file, 29
    /// in the config): a config for another checkpoint, refused rather than half-used.
    UnusedTensors { count: usize, first: String },
    /// From chapter 1: opening or reading the safetensors file.
    Tensors(ch01_tensors::Error),
    /// From chapter 3: building the RoPE table or the head layout.
    Attention(ch03_attention::Error),
    /// From chapter 2: loading the tokenizer, encoding or decoding.
    Tokenizer(String),
    /// Input the model cannot run: an empty sequence, a token id outside the vocabulary,
    /// a sequence longer than the RoPE table.
    Input(String),
    /// A reference fixture is missing or malformed.
    Fixture(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
            Error::Config { field, message } => write!(f, "config.json: {field}: {message}"),
            Error::MissingTensor { name, expected } => write!(
                f,
                "model.safetensors has no tensor {name:?} (expected one of shape {expected:?})"
            ),
            Error::WrongShape {
                name,
                expected,
                found,
                meaning,
            } => write!(
                f,
                "tensor {name:?} has shape {found:?}, expected {expected:?} = {meaning}"
            ),
            Error::UnusedTensors { count, first } => write!(
                f,
                "model.safetensors has {count} tensor(s) the config does not call for, such as {first:?}: \
                 the config and the weights are for different models"
            ),
            Error::Tensors(e) => write!(f, "{e}"),
            Error::Attention(e) => write!(f, "{e}"),
            Error::Tokenizer(msg) => write!(f, "tokenizer: {msg}"),
            Error::Input(msg) => write!(f, "{msg}"),
            Error::Fixture(msg) => write!(f, "reference fixture: {msg}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Tensors(e) => Some(e),
            Error::Attention(e) => Some(e),
            _ => None,
        }
    }
}

impl From<ch01_tensors::Error> for Error {
    fn from(e: ch01_tensors::Error) -> Self {
        Error::Tensors(e)
    }
}

impl From<ch03_attention::Error> for Error {
    fn from(e: ch03_attention::Error) -> Self {
        Error::Attention(e)
    }
}

impl From<ch03_attention::config::Error> for Error {
    fn from(e: ch03_attention::config::Error) -> Self {
        match e {
            ch03_attention::config::Error::Io { path, source } => Error::Io { path, source },
            ch03_attention::config::Error::Config { field, message } => {
                Error::Config { field, message }
            }
        }
    }
}
