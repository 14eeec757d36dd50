//! Chapter 2's tokenizers, built from `tokenizer.ggml.*` metadata instead of a
//! `tokenizer.json`.
//!
//! | key | holds |
//! |---|---|
//! | `tokenizer.ggml.model` | `gpt2` (byte-level BPE) or `llama` (SentencePiece) |
//! | `tokenizer.ggml.tokens` | every token's text, in id order |
//! | `tokenizer.ggml.token_type` | llama.cpp's kind of each token (normal, control, byte, …) |
//! | `tokenizer.ggml.merges` | BPE only: `"left right"` strings in rank order |
//! | `tokenizer.ggml.scores` | SentencePiece only: one score per token |
//! | `tokenizer.ggml.pre` | BPE only: the pre-tokenizer's name (`smollm`, `llama-bpe`, `qwen2`) |
//! | `tokenizer.ggml.bos_token_id`, `add_bos_token` | the start token, and whether to add it |

use ch02_tokenizer::{PreTokenizer, TokenKind, Tokenizer};

use crate::error::{Error, Result};
use crate::gguf::Gguf;

// ANCHOR: eog
/// Texts that end a generation in some model family. llama.cpp treats a token with one of
/// these texts as a control token whatever type the file gives it (its vocabulary loader
/// warns "control-looking token ... will be overridden"), so with special-token parsing off
/// it is never matched in text. Gemma-3's file types `</s>` user-defined; llama.cpp, and
/// this reader, treat it as control.
pub const END_OF_GENERATION: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
];
// ANCHOR_END: eog

/// A tokenizer and what the file says about framing a prompt.
pub struct GgufTokenizer {
    pub tokenizer: Tokenizer,
    /// `tokenizer.ggml.bos_token_id`.
    pub bos: Option<u32>,
    /// Every token that ends a generation: the file's EOS and every [`END_OF_GENERATION`]
    /// token in the vocabulary (Gemma's `<end_of_turn>`, SmolLM2's `<|im_end|>`).
    pub end_ids: Vec<u32>,
    /// Put BOS in front of a prompt (`tokenizer.ggml.add_bos_token`; llama.cpp's default is
    /// true for SentencePiece models and false for BPE ones).
    pub add_bos: bool,
}

impl GgufTokenizer {
    /// `text` as ids, with BOS in front if the file asks for it.
    pub fn encode_prompt(&self, text: &str, parse_special: bool) -> Vec<u32> {
        let mut ids = Vec::new();
        if self.add_bos
            && let Some(b) = self.bos
        {
            ids.push(b);
        }
        ids.extend(self.tokenizer.encode(text, parse_special));
        ids
    }
}

// ANCHOR: tokenizer
/// The tokenizer described by `g`'s metadata.
pub fn tokenizer(g: &Gguf) -> Result<GgufTokenizer> {
    let model = g.str("tokenizer.ggml.model")?;
    let tokens = g.strings("tokenizer.ggml.tokens")?;
    let mut kinds = match g.opt_ints("tokenizer.ggml.token_type")? {
        None => vec![TokenKind::Normal; tokens.len()],
        Some(types) if types.len() == tokens.len() => types
            .iter()
            .map(|&t| TokenKind::from_gguf(i32::try_from(t).unwrap_or(1)))
            .collect(),
        Some(types) => {
            return Err(Error::Metadata {
                key: "tokenizer.ggml.token_type".into(),
                message: format!("{} types for {} tokens", types.len(), tokens.len()),
            });
        }
    };
    // The end-of-generation texts are control tokens, whatever type the file gives them.
    let mut end_ids = Vec::new();
    for (id, text) in tokens.iter().enumerate() {
        if END_OF_GENERATION.contains(&text.as_str()) {
            end_ids.push(id as u32);
            kinds[id] = TokenKind::Control;
        }
    }
    // The texts go to chapter 2's vocabulary as borrowed `&str`s: it copies them once,
    // into its own buffer, with no `String` per token on the way.
    let entries = tokens.iter().zip(kinds);
    // ANCHOR_END: tokenizer
    // ANCHOR: tokenizer_model
    let bad = |e: ch02_tokenizer::Error| Error::Tokenizer(e.to_string());
    let tokenizer = match model {
        "gpt2" => {
            let pre_name = g.opt_str("tokenizer.ggml.pre")?.unwrap_or("default");
            let pre = PreTokenizer::from_gguf_name(pre_name).ok_or_else(|| {
                Error::Unsupported(format!(
                    "pre-tokenizer {pre_name:?} (tokenizer.ggml.pre); chapter 2 implements {}",
                    PreTokenizer::GGUF_NAMES
                ))
            })?;
            let merges = g
                .strings("tokenizer.ggml.merges")?
                .iter()
                .enumerate()
                .map(|(rank, m)| split_merge(rank, m))
                .collect::<Result<Vec<_>>>()?;
            Tokenizer::byte_level_bpe(entries, &merges, pre).map_err(bad)?
        }
        "llama" => {
            let scores = g
                .opt_f32s("tokenizer.ggml.scores")?
                .ok_or_else(|| Error::Metadata {
                    key: "tokenizer.ggml.scores".into(),
                    message: "missing (a SentencePiece vocabulary needs scores)".into(),
                })?;
            let prefix = g
                .opt_bool("tokenizer.ggml.add_space_prefix")?
                .unwrap_or(true);
            Tokenizer::sentencepiece(entries, scores.to_vec(), prefix).map_err(bad)?
        }
        other => {
            return Err(Error::Unsupported(format!(
                "tokenizer model {other:?} (tokenizer.ggml.model); chapter 2 implements \
                 \"gpt2\" (byte-level BPE) and \"llama\" (SentencePiece)"
            )));
        }
    };
    // ANCHOR_END: tokenizer_model
    // ANCHOR: tokenizer_special
    // a special id outside the vocabulary is the file's mistake: said, not ignored
    let special = |key: &str| -> Result<Option<u32>> {
        match g.opt_u64(key)? {
            Some(id) if id < tokens.len() as u64 => Ok(Some(id as u32)),
            Some(id) => Err(Error::Metadata {
                key: key.into(),
                message: format!("{id} is outside the vocabulary of {}", tokens.len()),
            }),
            None => Ok(None),
        }
    };
    let bos = special("tokenizer.ggml.bos_token_id")?;
    if let Some(eos) = special("tokenizer.ggml.eos_token_id")?
        && !end_ids.contains(&eos)
    {
        end_ids.push(eos);
    }
    let add_bos = g
        .opt_bool("tokenizer.ggml.add_bos_token")?
        .unwrap_or(model == "llama");
    Ok(GgufTokenizer {
        tokenizer,
        bos,
        end_ids,
        add_bos,
    })
}

/// `"Ġ t"` → `("Ġ", "t")`. The separator is the first space after the first character, as
/// llama.cpp reads it (a token never starts with a space in a byte-level vocabulary, but
/// the first character is skipped all the same).
fn split_merge(rank: usize, m: &str) -> Result<(&str, &str)> {
    let first = m.chars().next().map_or(0, char::len_utf8);
    match m[first..].find(' ') {
        Some(at) => Ok((&m[..first + at], &m[first + at + 1..])),
        None => Err(Error::Metadata {
            key: "tokenizer.ggml.merges".into(),
            message: format!("merge {rank} ({m:?}) is not two tokens separated by a space"),
        }),
    }
}
// ANCHOR_END: tokenizer_special

/// Token ids as a command line gives them (`--ids 1,2,3`): comma-separated, spaces allowed
/// around each, at most `most` of them; the error names the piece that is no id. Whether
/// each id is in the vocabulary is the model's to say, once it is open.
pub fn parse_ids(text: &str, most: usize) -> std::result::Result<Vec<u32>, String> {
    let ids: Vec<u32> = text
        .split(',')
        .take(most.saturating_add(1))
        .map(|t| {
            t.trim()
                .parse()
                .map_err(|_| format!("--ids: {t:?} is not a token id"))
        })
        .collect::<std::result::Result<_, _>>()?;
    // (split gives one piece or more: an empty list is one piece that is no id)
    if ids.len() > most {
        return Err(format!("--ids: more than {most} ids"));
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::parse_ids;

    #[test]
    fn ids_from_a_command_line() {
        assert_eq!(parse_ids("1, 2,3", 3), Ok(vec![1, 2, 3]));
        assert_eq!(
            parse_ids("1,2,3,4", 3),
            Err("--ids: more than 3 ids".into())
        );
        assert_eq!(
            parse_ids("", 3),
            Err("--ids: \"\" is not a token id".into())
        );
        assert_eq!(
            parse_ids("1,,2", 3),
            Err("--ids: \"\" is not a token id".into())
        );
        assert_eq!(
            parse_ids("-1", 3),
            Err("--ids: \"-1\" is not a token id".into())
        );
    }
}
