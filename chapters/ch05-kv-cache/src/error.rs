//! The chapter's error type. Kernels panic on slices that do not fit their shapes (a bug in
//! the caller); everything a user can cause — a missing file, a context that is full, a pool
//! out of blocks — returns `Result<_, Error>`, and the binary prints it and exits 1.

use std::fmt;
use std::path::PathBuf;

/// What can go wrong in this chapter.
#[derive(Debug)]
pub enum Error {
    /// From chapter 4: loading or running the model.
    Forward(ch04_forward::Error),
    /// From the tokenizer (chapter 2).
    Tokenizer(String),
    /// Reading a file failed.
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A configuration value is missing or impossible.
    Config(String),
    /// A token id outside the vocabulary.
    BadToken { id: u32, vocab: usize },
    /// The sequence would need more positions than the cache holds. The policy of this
    /// chapter: refuse, name the limit, and leave the cache as it was (nothing is evicted
    /// behind the caller's back).
    ContextFull { limit: usize, needed: usize },
    /// The paged cache's pool has no free block left.
    OutOfBlocks { blocks: usize, block_size: usize },
    /// A ring buffer cannot go back to a length whose keys it has already overwritten.
    CannotRewind {
        from: usize,
        to: usize,
        window: usize,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Forward(e) => write!(f, "{e}"),
            Error::Tokenizer(msg) => write!(f, "tokenizer: {msg}"),
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
            Error::Config(msg) => write!(f, "config: {msg}"),
            Error::BadToken { id, vocab } => {
                write!(
                    f,
                    "token id {id} is outside the vocabulary ({vocab} tokens)"
                )
            }
            Error::ContextFull { limit, needed } => write!(
                f,
                "context is full: the KV cache holds {limit} positions and this needs {needed}; \
                 reset the session or give the cache more positions (--ctx)"
            ),
            Error::OutOfBlocks { blocks, block_size } => write!(
                f,
                "the paged KV cache is out of blocks: all {blocks} blocks of {block_size} positions \
                 are in use; free a sequence or make the pool bigger"
            ),
            Error::CannotRewind { from, to, window } => write!(
                f,
                "cannot rewind a {window}-position ring buffer from {from} to {to} positions: \
                 the keys it would need are overwritten; reset and recompute"
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Forward(e) => Some(e),
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<ch04_forward::Error> for Error {
    fn from(e: ch04_forward::Error) -> Self {
        Error::Forward(e)
    }
}
