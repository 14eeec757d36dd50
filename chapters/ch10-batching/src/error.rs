//! What a caller of the batched engine can get wrong, each with the numbers that explain it.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// A request with no prompt tokens.
    EmptyPrompt,
    /// A request for zero new tokens.
    ZeroMaxTokens,
    /// Prompt plus `max_tokens` is longer than the model's context.
    ContextTooSmall {
        prompt: usize,
        max_tokens: usize,
        context: usize,
    },
    /// Prompt plus `max_tokens` needs more blocks than the whole pool has.
    PoolTooSmall {
        prompt: usize,
        max_tokens: usize,
        blocks_needed: usize,
        pool_blocks: usize,
        block_size: usize,
    },
    /// No request with this id is running or waiting (finished, cancelled, or never was).
    UnknownRequest(usize),
    /// An engine setting that cannot work.
    Config(String),
    /// The model failed (a token outside the vocabulary, ...).
    Model(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::EmptyPrompt => {
                write!(f, "the prompt is empty: the model needs at least one token")
            }
            Error::ZeroMaxTokens => write!(f, "max_tokens is 0: ask for at least one token"),
            Error::ContextTooSmall {
                prompt,
                max_tokens,
                context,
            } => write!(
                f,
                "the prompt ({prompt} tokens) plus max_tokens ({max_tokens}) is {} positions; the model has {context}",
                prompt + max_tokens
            ),
            Error::PoolTooSmall {
                prompt,
                max_tokens,
                blocks_needed,
                pool_blocks,
                block_size,
            } => write!(
                f,
                "the prompt ({prompt} tokens) plus max_tokens ({max_tokens}) needs {blocks_needed} KV blocks of {block_size} positions; the whole pool has {pool_blocks} (give it more --kv-mb)"
            ),
            Error::UnknownRequest(id) => write!(
                f,
                "request {id} is not running or waiting (it finished, was cancelled, or never existed)"
            ),
            Error::Config(msg) => write!(f, "{msg}"),
            Error::Model(msg) => write!(f, "model: {msg}"),
        }
    }
}

impl std::error::Error for Error {}
