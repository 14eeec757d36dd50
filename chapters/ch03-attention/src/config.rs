//! The model's hyperparameters, read from a Hugging Face `config.json`.
//!
//! The weights file says how big each tensor is, but not what the numbers mean: how many
//! heads share a row of `q_proj`, which RMSNorm epsilon to use, which RoPE base. Those live
//! in `config.json`. SmolLM2-135M's, abridged:
//!
//! ```json
//! { "hidden_size": 576, "num_hidden_layers": 30, "num_attention_heads": 9,
//!   "num_key_value_heads": 3, "head_dim": 64, "intermediate_size": 1536,
//!   "rms_norm_eps": 1e-05, "rope_theta": 100000.0, "vocab_size": 49152,
//!   "tie_word_embeddings": true, "max_position_embeddings": 8192,
//!   "bos_token_id": 1, "eos_token_id": 2 }
//! ```
//!
//! Every field is checked as it is read, and an error names the field: a config that
//! parses but describes an impossible model (9 heads over 2 KV heads) must fail here,
//! not as an index out of bounds 20 layers into the forward pass.
//!
//! This is the one `config.json` parser of the book: chapter 3's probe reads it for the
//! attention layout, and chapter 4 re-exports it as `ch04_forward::Config` for the whole
//! model.

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::Heads;

/// What can be wrong with a `config.json`.
#[derive(Debug)]
pub enum Error {
    /// The file could not be read (or is not a regular file, or is too large).
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A field is missing, mistyped or impossible; `field` names it (or the pair of fields).
    Config { field: String, message: String },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
            Error::Config { field, message } => write!(f, "config.json: {field}: {message}"),
        }
    }
}

impl std::error::Error for Error {}

/// The largest value each size field may take. Real models are far below these (SmolLM2:
/// 30 layers, 9 heads of 64, hidden 576, vocabulary 49 152, 8 192 positions); the bounds
/// make every product of them that a later chapter computes (a KV cache's bytes: 2 × layers
/// × KV heads × head_dim × positions × 4 < 2^56) fit in 64 bits, so no arithmetic on a
/// config can wrap, and no allocation is sized by an absurd number.
fn max_of(key: &str) -> u64 {
    match key {
        "num_hidden_layers" => 1 << 10,
        "num_attention_heads" | "num_key_value_heads" => 1 << 10,
        "head_dim" => 1 << 12,
        "hidden_size" => 1 << 16,
        "intermediate_size" => 1 << 20,
        "vocab_size" | "max_position_embeddings" => 1 << 21,
        _ => u64::from(u32::MAX),
    }
}

/// A `config.json` is a few kB; anything over 1 MiB is not one.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

// ANCHOR: config
/// The numbers that describe a Llama-family decoder.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Width of the residual stream, `dim` in the shape comments (SmolLM2-135M: 576).
    pub hidden_size: usize,
    /// Decoder layers (30).
    pub num_layers: usize,
    /// Query heads (9).
    pub n_heads: usize,
    /// Key/value heads, dividing `n_heads` (3): grouped-query attention.
    pub n_kv_heads: usize,
    /// Coordinates per head (64). Defaults to `hidden_size / n_heads`.
    pub head_dim: usize,
    /// Width of the feed-forward network's hidden layer (1536).
    pub intermediate_size: usize,
    /// The ε in RMSNorm's `x / sqrt(mean(x²) + ε)` (1e-5).
    pub rms_norm_eps: f32,
    /// RoPE base θ (100 000).
    pub rope_theta: f32,
    /// Tokens in the vocabulary: rows of the embedding table (49 152).
    pub vocab_size: usize,
    /// The LM head reuses the embedding table instead of having its own weight (true).
    pub tie_word_embeddings: bool,
    /// The longest sequence the model was trained on; the RoPE table covers this many
    /// positions (8192).
    pub max_position_embeddings: usize,
    /// The id the tokenizer puts in front of a text, if any.
    pub bos_token_id: Option<u32>,
    /// Ids that end a generation (`eos_token_id` may be one id or a list).
    pub eos_token_ids: Vec<u32>,
}
// ANCHOR_END: config

impl Config {
    /// The attention head layout, for chapter 3's `attention`.
    pub fn heads(&self) -> Heads {
        Heads {
            n_heads: self.n_heads,
            n_kv_heads: self.n_kv_heads,
            head_dim: self.head_dim,
        }
    }

    /// Width of a query row: `n_heads * head_dim` (576).
    pub fn q_dim(&self) -> usize {
        self.n_heads * self.head_dim
    }

    /// Width of a key or value row: `n_kv_heads * head_dim` (192).
    pub fn kv_dim(&self) -> usize {
        self.n_kv_heads * self.head_dim
    }

    /// Reads and validates `config.json` (a regular file of at most [`MAX_CONFIG_BYTES`]).
    pub fn load(path: &Path) -> Result<Config, Error> {
        let text =
            ch01_tensors::files::read_to_string(path, MAX_CONFIG_BYTES).map_err(|source| {
                Error::Io {
                    path: path.to_path_buf(),
                    source,
                }
            })?;
        Config::from_json(&text)
    }

    /// Parses and validates the text of a `config.json`.
    pub fn from_json(text: &str) -> Result<Config, Error> {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| config_error("(file)", format!("not valid JSON: {e}")))?;
        let Some(obj) = value.as_object() else {
            return Err(config_error(
                "(file)",
                "the top level is not a JSON object".into(),
            ));
        };
        let f = Fields(obj);
        // Only what this forward pass implements: Qwen2's q/k/v biases and Mistral's
        // sliding window would load and then give wrong logits silently.
        if let Some(kind) = f.string("model_type")?
            && kind != "llama"
        {
            return Err(config_error(
                "model_type",
                format!(
                    "{kind:?} is not supported: this chapter implements the Llama architecture only"
                ),
            ));
        }
        if !matches!(obj.get("rope_scaling"), None | Some(Value::Null)) {
            return Err(config_error(
                "rope_scaling",
                "RoPE scaling is not supported by this chapter".into(),
            ));
        }

        // ANCHOR: from_json
        let hidden_size = f.positive("hidden_size")?;
        let n_heads = f.positive("num_attention_heads")?;
        let n_kv_heads = f
            .optional_positive("num_key_value_heads")?
            .unwrap_or(n_heads);
        let head_dim = match f.optional_positive("head_dim")? {
            Some(d) => d,
            None if hidden_size % n_heads == 0 => hidden_size / n_heads,
            None => {
                return Err(config_error(
                    "hidden_size / num_attention_heads",
                    format!(
                        "hidden_size {hidden_size} is not divisible by {n_heads} heads (and no head_dim is given)"
                    ),
                ));
            }
        };
        if n_heads % n_kv_heads != 0 {
            return Err(config_error(
                "num_attention_heads / num_key_value_heads",
                format!("{n_heads} query heads cannot be shared evenly by {n_kv_heads} KV heads"),
            ));
        }
        if head_dim % 2 != 0 {
            return Err(config_error(
                "head_dim",
                format!("RoPE rotates pairs, so head_dim must be even, got {head_dim}"),
            ));
        }
        // ANCHOR_END: from_json
        let rms_norm_eps = f.number("rms_norm_eps")?.unwrap_or(1e-6);
        if !(rms_norm_eps > 0.0 && rms_norm_eps < 1.0) {
            return Err(config_error(
                "rms_norm_eps",
                format!("must be in (0, 1), got {rms_norm_eps}"),
            ));
        }
        let rope_theta = f.number("rope_theta")?.unwrap_or(10_000.0);
        if !(rope_theta > 1.0 && rope_theta.is_finite()) {
            return Err(config_error(
                "rope_theta",
                format!("must be > 1, got {rope_theta}"),
            ));
        }
        let vocab_size = f.positive("vocab_size")?;
        let token = |key: &str, id: u64| -> Result<u32, Error> {
            if id >= vocab_size as u64 {
                return Err(config_error(
                    key,
                    format!("token id {id} is outside the vocabulary of {vocab_size}"),
                ));
            }
            Ok(id as u32)
        };
        let bos_token_id = f
            .optional_integer("bos_token_id")?
            .map(|id| token("bos_token_id", id))
            .transpose()?;
        let eos_token_ids = f
            .ids("eos_token_id")?
            .into_iter()
            .map(|id| token("eos_token_id", id))
            .collect::<Result<_, _>>()?;
        // The RoPE table holds head_dim floats per position: refuse one that cannot fit.
        let max_position_embeddings = f
            .optional_positive("max_position_embeddings")?
            .unwrap_or(2048);
        if max_position_embeddings.saturating_mul(head_dim) > MAX_ROPE_TABLE {
            return Err(config_error(
                "max_position_embeddings",
                format!(
                    "{max_position_embeddings} positions × head_dim {head_dim} is too large a RoPE table \
                     (at most {MAX_ROPE_TABLE} numbers)"
                ),
            ));
        }

        Ok(Config {
            hidden_size,
            num_layers: f.positive("num_hidden_layers")?,
            n_heads,
            n_kv_heads,
            head_dim,
            intermediate_size: f.positive("intermediate_size")?,
            rms_norm_eps,
            rope_theta,
            vocab_size,
            tie_word_embeddings: f.boolean("tie_word_embeddings")?.unwrap_or(false),
            max_position_embeddings,
            bos_token_id,
            eos_token_ids,
        })
    }
}

/// The most numbers the RoPE table may hold (2^28: 1 GiB of f32, 2M positions at head_dim 128).
const MAX_ROPE_TABLE: usize = 1 << 28;

fn config_error(field: &str, message: String) -> Error {
    Error::Config {
        field: field.to_string(),
        message,
    }
}

/// Typed, field-naming access to the JSON object.
struct Fields<'a>(&'a Map<String, Value>);

impl Fields<'_> {
    /// The field, or `None` when absent or `null` (Hugging Face writes `null` for "unset").
    fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key).filter(|v| !v.is_null())
    }

    fn wrong_type(key: &str, want: &str, got: &Value) -> Error {
        config_error(key, format!("expected {want}, found {got}"))
    }

    fn optional_integer(&self, key: &str) -> Result<Option<u64>, Error> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| Self::wrong_type(key, "a non-negative integer", v)),
        }
    }

    fn optional_positive(&self, key: &str) -> Result<Option<usize>, Error> {
        match self.optional_integer(key)? {
            None => Ok(None),
            Some(0) => Err(config_error(key, "must be at least 1, found 0".into())),
            Some(n) if n > max_of(key) => Err(config_error(
                key,
                format!(
                    "{n} is more than this book's engine accepts ({})",
                    max_of(key)
                ),
            )),
            Some(n) => Ok(Some(n as usize)),
        }
    }

    fn positive(&self, key: &str) -> Result<usize, Error> {
        self.optional_positive(key)?
            .ok_or_else(|| config_error(key, "missing (a required integer)".into()))
    }

    fn number(&self, key: &str) -> Result<Option<f32>, Error> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_f64()
                .map(|x| Some(x as f32))
                .ok_or_else(|| Self::wrong_type(key, "a number", v)),
        }
    }

    fn boolean(&self, key: &str) -> Result<Option<bool>, Error> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_bool()
                .map(Some)
                .ok_or_else(|| Self::wrong_type(key, "true or false", v)),
        }
    }

    fn string(&self, key: &str) -> Result<Option<String>, Error> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_str()
                .map(|s| Some(s.to_string()))
                .ok_or_else(|| Self::wrong_type(key, "a string", v)),
        }
    }

    /// One id or a list of ids; absent means none.
    fn ids(&self, key: &str) -> Result<Vec<u64>, Error> {
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| {
                    v.as_u64()
                        .ok_or_else(|| Self::wrong_type(key, "a list of token ids", v))
                })
                .collect(),
            Some(v) => v
                .as_u64()
                .map(|id| vec![id])
                .ok_or_else(|| Self::wrong_type(key, "a token id", v)),
        }
    }
}
