//! The vocabulary: token id <-> token text, and what kind of token each one is.

use std::hash::{BuildHasher, RandomState};

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
///
/// The texts sit one after another in a single `String`, and the reverse map is a hash
/// table of ids alone, which finds a text's id by comparing with the text it already has.
/// A `Vec<String>` and a `HashMap<String, TokenId>` would store every text twice, each
/// copy in a heap block of its own behind a 24-byte header: for Gemma-3's 262 144 tokens,
/// 2 MB of text would take about 45 MB; this way it takes about 7.
#[derive(Clone, Debug)]
pub struct Vocab {
    text: String,          // every token's text, in id order, end to end
    ends: Vec<usize>,      // (n_vocab) where each token's text ends in `text`
    kinds: Vec<TokenKind>, // (n_vocab)
    ids: IdTable,
}

impl Vocab {
    /// Builds a vocabulary from `(text, kind)` in id order. If a text occurs twice, the later
    /// id wins the reverse lookup, as in llama.cpp.
    pub fn new<S: AsRef<str>>(entries: impl IntoIterator<Item = (S, TokenKind)>) -> Result<Vocab> {
        let entries = entries.into_iter();
        let n = entries.size_hint().0;
        let (mut text, mut ends, mut kinds) =
            (String::new(), Vec::with_capacity(n), Vec::with_capacity(n));
        for (t, kind) in entries {
            if ends.len() >= u32::MAX as usize - 1 {
                return Err(Error::BadVocab(
                    "more tokens than u32 ids can number".into(),
                ));
            }
            text.push_str(t.as_ref());
            ends.push(text.len());
            kinds.push(kind);
        }
        if ends.is_empty() {
            return Err(Error::BadVocab("the vocabulary is empty".into()));
        }
        let mut ids = IdTable::with_room_for(ends.len());
        let text_of = |id: TokenId| &text[span(&ends, id as usize)];
        for id in 0..ends.len() as TokenId {
            ids.insert(id, text_of);
        }
        Ok(Vocab {
            text,
            ends,
            kinds,
            ids,
        })
    }

    /// The text of `id`, which must be in range.
    fn text_of(&self, id: TokenId) -> &str {
        &self.text[span(&self.ends, id as usize)]
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The id of a token text, if it is in the vocabulary.
    pub fn id(&self, text: &str) -> Option<TokenId> {
        self.ids.get(text, |id| self.text_of(id))
    }

    /// The stored text of a token (byte-level spelling for BPE, `▁` spelling for SentencePiece).
    pub fn text(&self, id: TokenId) -> Result<&str> {
        if (id as usize) < self.len() {
            Ok(self.text_of(id))
        } else {
            Err(self.out_of_range(id))
        }
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
            .zip(&self.kinds)
            .map(|(id, &k)| (id, self.text_of(id), k))
    }

    pub(crate) fn out_of_range(&self, id: TokenId) -> Error {
        Error::TokenOutOfRange {
            id,
            vocab_size: self.len(),
        }
    }
}

/// Where item `i` lies in a buffer of items stored end to end, given where each ends
/// (`ends[i]`, which must exist): the vocabulary's texts, and the tokenizer's pieces.
pub(crate) fn span(ends: &[usize], i: usize) -> std::ops::Range<usize> {
    let start = if i == 0 { 0 } else { ends[i - 1] };
    start..ends[i]
}

/// The reverse map, text -> id: a hash table whose slots hold ids only. The text a slot
/// stands for is its id's text in the vocabulary, which the caller passes in as `text_of`.
/// Slots are twice the ids or more (a power of two), so a probe always meets an empty
/// slot; a collision moves on to the next slot ("linear probing").
#[derive(Clone, Debug)]
struct IdTable {
    slots: Vec<TokenId>, // (a power of two ≥ 2 · n_vocab) an id, or EMPTY
    hasher: RandomState,
}

const EMPTY: TokenId = TokenId::MAX;

impl IdTable {
    fn with_room_for(n: usize) -> IdTable {
        IdTable {
            slots: vec![EMPTY; (2 * n).next_power_of_two()],
            hasher: RandomState::new(),
        }
    }

    /// The slot holding `text`'s id, or else the empty slot where it would go.
    fn find<'v>(&self, text: &str, text_of: impl Fn(TokenId) -> &'v str) -> usize {
        let mask = self.slots.len() - 1;
        let mut slot = self.hasher.hash_one(text) as usize & mask;
        while self.slots[slot] != EMPTY && text_of(self.slots[slot]) != text {
            slot = (slot + 1) & mask;
        }
        slot
    }

    fn get<'v>(&self, text: &str, text_of: impl Fn(TokenId) -> &'v str) -> Option<TokenId> {
        let id = self.slots[self.find(text, text_of)];
        (id != EMPTY).then_some(id)
    }

    /// Maps `id`'s text to `id` (a text already present now maps to the later id).
    fn insert<'v>(&mut self, id: TokenId, text_of: impl Fn(TokenId) -> &'v str) {
        let slot = self.find(text_of(id), &text_of);
        self.slots[slot] = id;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_vocabulary_is_refused() {
        let err = Vocab::new(Vec::<(String, TokenKind)>::new())
            .expect_err("an empty vocabulary must be an error");
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
        let v = Vocab::new(vec![("a", Normal), ("<s>", Control), ("a", Normal)]).unwrap();
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
