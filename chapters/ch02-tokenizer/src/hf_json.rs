//! Loading a Hugging Face `tokenizer.json` (byte-level BPE only).
//!
//! The parts of the file that matter here:
//!
//! ```text
//! {
//!   "added_tokens":  [{"id": 1, "content": "<|im_start|>", "special": true, ...}, ...],
//!   "normalizer":    null,
//!   "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
//!                       {"type": "Digits", "individual_digits": true},
//!                       {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}]},
//!   "decoder":       {"type": "ByteLevel", ...},
//!   "model":         {"type": "BPE", "vocab": {"Ġthe": 260, ...}, "merges": ["Ġ t", ...]}
//! }
//! ```
//!
//! Anything else (a normalizer, another pre-tokenizer, another model) is refused with an
//! error that names it, rather than tokenized differently from llama.cpp.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::pretokenize::PreTokenizer;
use crate::tokenizer::Tokenizer;
use crate::vocab::{TokenId, TokenKind};

#[derive(Deserialize)]
struct TokenizerJson {
    #[serde(default)]
    added_tokens: Vec<AddedToken>,
    #[serde(default)]
    normalizer: Value,
    #[serde(default)]
    pre_tokenizer: Value,
    #[serde(default)]
    decoder: Value,
    model: ModelJson,
}

#[derive(Deserialize)]
struct AddedToken {
    id: TokenId,
    content: String,
    #[serde(default)]
    special: bool,
    #[serde(default)]
    lstrip: bool,
    #[serde(default)]
    rstrip: bool,
}

#[derive(Deserialize)]
struct ModelJson {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    vocab: HashMap<String, TokenId>,
    #[serde(default)]
    merges: Vec<MergeJson>,
    #[serde(default)]
    byte_fallback: bool,
    #[serde(default)]
    ignore_merges: bool,
}

/// Older files write a merge as `"Ġ t"`, newer ones as `["Ġ", "t"]`.
#[derive(Deserialize)]
#[serde(untagged)]
enum MergeJson {
    Joined(String),
    Pair(Vec<String>),
}

impl Tokenizer {
    /// Loads a `tokenizer.json` file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Tokenizer> {
        let path = path.as_ref();
        let text = ch01_tensors::files::read_to_string(path, ch01_tensors::files::MAX_TEXT_FILE)
            .map_err(|source| Error::Io {
                path: path.into(),
                source,
            })?;
        Tokenizer::from_json_str(&text).map_err(|e| match e {
            Error::Json { message, .. } => Error::Json {
                path: path.into(),
                message,
            },
            other => other,
        })
    }

    /// Parses the text of a `tokenizer.json`.
    pub fn from_json_str(json: &str) -> Result<Tokenizer> {
        let file: TokenizerJson = serde_json::from_str(json).map_err(|e| Error::Json {
            path: "<string>".into(),
            message: e.to_string(),
        })?;
        let model = &file.model;
        if model.kind.as_deref().is_some_and(|k| k != "BPE") {
            return Err(Error::Unsupported(format!(
                "model type {:?} (only BPE)",
                model.kind.as_deref().unwrap_or("")
            )));
        }
        if model.byte_fallback {
            return Err(Error::Unsupported(
                "BPE with byte_fallback (a SentencePiece-style BPE)".into(),
            ));
        }
        if model.ignore_merges {
            return Err(Error::Unsupported(
                "BPE with ignore_merges (a Llama-3-style BPE)".into(),
            ));
        }
        if !file.normalizer.is_null() {
            return Err(Error::Unsupported(format!(
                "normalizer {}",
                short(&file.normalizer)
            )));
        }
        if !(file.decoder.is_null() || file.decoder["type"] == "ByteLevel") {
            return Err(Error::Unsupported(format!(
                "decoder {}",
                short(&file.decoder)
            )));
        }
        let pre = pre_tokenizer(&file.pre_tokenizer)?;

        // Ids -> texts: the model vocabulary plus the added tokens, with no gaps.
        let size = file
            .model
            .vocab
            .values()
            .chain(file.added_tokens.iter().map(|t| &t.id))
            .max()
            .map_or(0, |&m| m as usize + 1);
        if size > file.model.vocab.len() + file.added_tokens.len() {
            return Err(Error::BadVocab(format!(
                "the largest id is {} but there are fewer tokens: ids have gaps",
                size - 1
            )));
        }
        let mut tokens: Vec<Option<(String, TokenKind)>> = vec![None; size];
        for (text, &id) in &file.model.vocab {
            if let Some((other, _)) = &tokens[id as usize] {
                return Err(Error::BadVocab(format!(
                    "id {id} is both {other:?} and {text:?}"
                )));
            }
            tokens[id as usize] = Some((text.clone(), TokenKind::Normal));
        }
        for added in &file.added_tokens {
            let kind = if added.special {
                TokenKind::Control
            } else {
                TokenKind::UserDefined
            };
            match &tokens[added.id as usize] {
                Some((text, _)) if *text != added.content => {
                    return Err(Error::BadVocab(format!(
                        "id {} is both {text:?} and added {:?}",
                        added.id, added.content
                    )));
                }
                _ => tokens[added.id as usize] = Some((added.content.clone(), kind)),
            }
        }
        let tokens = tokens
            .into_iter()
            .enumerate()
            .map(|(id, t)| {
                t.ok_or_else(|| {
                    Error::BadVocab(format!("id {id} has no token (ids must be 0..{size})"))
                })
            })
            .collect::<Result<Vec<_>>>()?;

        let mut merges = Vec::with_capacity(file.model.merges.len());
        for (rank, m) in file.model.merges.iter().enumerate() {
            let pair = match m {
                MergeJson::Joined(s) => s
                    .split_once(' ')
                    .map(|(a, b)| (a.to_string(), b.to_string())),
                MergeJson::Pair(v) if v.len() == 2 => Some((v[0].clone(), v[1].clone())),
                MergeJson::Pair(_) => None,
            };
            merges.push(
                pair.ok_or_else(|| {
                    Error::BadVocab(format!("merge {rank} is not a pair of tokens"))
                })?,
            );
        }

        let mut tokenizer = Tokenizer::byte_level_bpe(tokens, &merges, pre)?;
        for added in file.added_tokens.iter().filter(|t| t.lstrip || t.rstrip) {
            tokenizer.set_strip(added.id, added.lstrip, added.rstrip);
        }
        Ok(tokenizer)
    }
}

/// Which llama.cpp pre-tokenizer a `pre_tokenizer` entry describes.
fn pre_tokenizer(v: &Value) -> Result<PreTokenizer> {
    let byte_level = |v: &Value| {
        v["type"] == "ByteLevel" && v["add_prefix_space"] != true && v["use_regex"] != false
    };
    let digits = |v: &Value| v["type"] == "Digits" && v["individual_digits"] == true;
    if byte_level(v) {
        return Ok(PreTokenizer::Gpt2);
    }
    if v["type"] == "Sequence"
        && let Some([first, second]) = v["pretokenizers"].as_array().map(Vec::as_slice)
        && digits(first)
        && byte_level(second)
    {
        return Ok(PreTokenizer::DigitsThenGpt2);
    }
    Err(Error::Unsupported(format!("pre_tokenizer {}", short(v))))
}

/// A JSON value cut to a readable length for an error message.
fn short(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(120) {
        Some((at, _)) => format!("{}...", &s[..at]),
        None => s,
    }
}
