//! What can be wrong with a GGUF file, each error naming the place.

use std::fmt;
use std::path::PathBuf;

/// Everything that can go wrong between a path and a model.
#[derive(Debug)]
pub enum Error {
    /// The file could not be opened or mapped.
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The file ends before `what` does.
    Truncated {
        what: String,
        offset: u64,
        need: u64,
        have: u64,
    },
    /// A header field holds an impossible value; `what` names the field.
    Format { what: String, message: String },
    /// A metadata key is missing, has the wrong type or an impossible value.
    Metadata { key: String, message: String },
    /// A tensor's description is impossible, or the model needs a tensor that is not there.
    Tensor { name: String, message: String },
    /// Valid GGUF, but something this chapter does not implement.
    Unsupported(String),
    /// The tokenizer in the metadata could not be built.
    Tokenizer(String),
    /// The forward pass refused its input.
    Model(ch06_quantization::Error),
    /// The forward pass made values that are infinite or NaN: weights or scales that
    /// overflow, from a damaged file or one whose metadata does not fit its weights.
    NotFinite(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
            Error::Truncated {
                what,
                offset,
                need,
                have,
            } => write!(
                f,
                "truncated file: {what} at byte {offset} needs {need} bytes, only {have} remain"
            ),
            Error::Format { what, message } => write!(f, "bad GGUF: {what}: {message}"),
            Error::Metadata { key, message } => write!(f, "metadata key `{key}`: {message}"),
            Error::Tensor { name, message } => write!(f, "tensor `{name}`: {message}"),
            Error::Unsupported(m) => write!(f, "not supported: {m}"),
            Error::Tokenizer(m) => write!(f, "tokenizer: {m}"),
            Error::Model(e) => write!(f, "{e}"),
            Error::NotFinite(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<ch06_quantization::Error> for Error {
    fn from(e: ch06_quantization::Error) -> Error {
        Error::Model(e)
    }
}

pub type Result<T> = std::result::Result<T, Error>;

pub(crate) fn format_error(what: impl Into<String>, message: impl Into<String>) -> Error {
    Error::Format {
        what: what.into(),
        message: message.into(),
    }
}
