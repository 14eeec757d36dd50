//! The vocabulary: token id <-> token text, and what kind of token each one is.

use std::collections::HashMap;

use crate::error::{Error, Result};

/// A token id: an index into the vocabulary (and, in later chapters, a row of the embedding).
pub type TokenId = u32;

/// llama.cpp's token attributes, as far as tokenizing and decoding care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenKind {
    /// An ordinary piece of text.
    Normal,
    /// A control token such as `<|im_start|>` or `<s>`: only parsed from text when asked.
    Control,
    /// An added token that is always matched in text, even without special-token parsing.
    UserDefined,
    /// SentencePiece's `<unk>`.
    Unknown,
    /// SentencePiece's byte fallback tokens `<0x00>` ... `<0xFF>`.
    Byte,
    /// A placeholder that decodes to nothing.
    Unused,
}

impl TokenKind {
    /// The kind a GGUF file gives as `tokenizer.ggml.token_type` (llama.cpp's
    /// `llama_token_type`: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte).
    /// Anything else is read as normal, as llama.cpp does.
    pub fn from_gguf(token_type: i32) -> TokenKind {
        match token_type {
            2 => TokenKind::Unknown,
            3 => TokenKind::Control,
            4 => TokenKind::UserDefined,
            5 => TokenKind::Unused,
            6 => TokenKind::Byte,
            _ => TokenKind::Normal,
        }
    }

    /// Control and unknown tokens: llama.cpp's "special" attribute set.
    pub fn is_special(self) -> bool {
        matches!(self, TokenKind::Control | TokenKind::Unknown)
    }
}

/// Token texts and kinds, indexed by id, plus the reverse map.
#[derive(Clone, Debug)]
pub struct Vocab {
    texts: Vec<String>,    // (n_vocab)
    kinds: Vec<TokenKind>, // (n_vocab)
    ids: HashMap<String, TokenId>,
}

impl Vocab {
    /// Builds a vocabulary from `(text, kind)` in id order. If a text occurs twice, the later
    /// id wins the reverse lookup, as in llama.cpp.
    pub fn new(entries: Vec<(String, TokenKind)>) -> Result<Vocab> {
        if entries.is_empty() {
            return Err(Error::BadVocab("the vocabulary is empty".into()));
        }
        if entries.len() >= u32::MAX as usize {
            return Err(Error::BadVocab(format!(
                "{} tokens do not fit u32 ids",
                entries.len()
            )));
        }
        let mut ids = HashMap::with_capacity(entries.len());
        let (mut texts, mut kinds) = (Vec::new(), Vec::new());
        for (id, (text, kind)) in entries.into_iter().enumerate() {
            ids.insert(text.clone(), id as TokenId);
            texts.push(text);
            kinds.push(kind);
        }
        Ok(Vocab { texts, kinds, ids })
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.texts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }

    /// The id of a token text, if it is in the vocabulary.
    pub fn id(&self, text: &str) -> Option<TokenId> {
        self.ids.get(text).copied()
    }

    /// The stored text of a token (byte-level spelling for BPE, `▁` spelling for SentencePiece).
    pub fn text(&self, id: TokenId) -> Result<&str> {
        self.texts
            .get(id as usize)
            .map(String::as_str)
            .ok_or(self.out_of_range(id))
    }

    pub fn kind(&self, id: TokenId) -> Result<TokenKind> {
        self.kinds
            .get(id as usize)
            .copied()
            .ok_or(self.out_of_range(id))
    }

    /// All ids with their text and kind, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (TokenId, &str, TokenKind)> {
        (0..)
            .zip(self.texts.iter().zip(&self.kinds))
            .map(|(id, (t, &k))| (id, t.as_str(), k))
    }

    pub(crate) fn out_of_range(&self, id: TokenId) -> Error {
        Error::TokenOutOfRange {
            id,
            vocab_size: self.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_vocabulary_is_refused() {
        let err = Vocab::new(Vec::new()).expect_err("an empty vocabulary must be an error");
        assert!(
            err.to_string().contains("empty"),
            "the error should say why: {err}"
        );
    }

    #[test]
    fn lookups_both_ways_and_gguf_kinds() {
        let kinds = [1, 3, 6, 4, 5, 2, 99].map(TokenKind::from_gguf);
        use TokenKind::*;
        assert_eq!(
            kinds,
            [Normal, Control, Byte, UserDefined, Unused, Unknown, Normal]
        );
        let v = Vocab::new(vec![
            ("a".into(), Normal),
            ("<s>".into(), Control),
            ("a".into(), Normal),
        ])
        .unwrap();
        assert_eq!(
            v.id("a"),
            Some(2),
            "a text listed twice: the later id wins, as in llama.cpp"
        );
        assert_eq!(v.text(1).unwrap(), "<s>");
        assert!(v.kind(1).unwrap().is_special());
        assert!(matches!(
            v.text(3),
            Err(Error::TokenOutOfRange {
                id: 3,
                vocab_size: 3
            })
        ));
    }
}
