//! The chapter's error type. Every fallible function in this crate returns
//! `Result<_, Error>`; the binary prints the `Display` text and exits 1.

use std::fmt;
use std::path::PathBuf;

/// What can go wrong building tensors or reading a safetensors file.
#[derive(Debug)]
pub enum Error {
    /// Opening, reading, mapping or writing a file failed.
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A shape does not fit: wrong element count, wrong rank, a view that
    /// reaches past its storage, mismatched matmul dimensions.
    Shape(String),
    /// A safetensors file is malformed: truncated, bad header, bad offsets.
    Format(String),
    /// A tensor in the file uses a dtype this loader does not read.
    UnsupportedDtype { dtype: String, tensor: String },
    /// `SafeTensors::tensor` was asked for a name the file does not contain.
    TensorNotFound(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
            Error::Shape(msg) => write!(f, "shape error: {msg}"),
            Error::Format(msg) => write!(f, "invalid safetensors file: {msg}"),
            Error::UnsupportedDtype { dtype, tensor } => write!(
                f,
                "unsupported dtype {dtype} for tensor {tensor} (this loader reads F32, F16 and BF16)"
            ),
            Error::TensorNotFound(name) => write!(f, "no tensor named {name:?} in the file"),
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
