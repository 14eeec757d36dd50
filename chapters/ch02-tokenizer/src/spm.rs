//! SentencePiece BPE, the way llama.cpp's `llama` vocabulary type (SPM) runs it.
//!
//! Differences from byte-level BPE:
//! - no byte <-> unicode table: the text stays UTF-8, and a space is written `▁` (U+2581);
//! - with `add_space_prefix`, a space is put before the text, so "Hello" and " Hello"
//!   start the same way ("▁Hello");
//! - no merge list: each token has a *score*, and the adjacent pair whose concatenation is
//!   the highest-scoring token is fused first (the leftmost on a tie);
//! - no pre-tokenizer: the whole text is one piece;
//! - a character that ends up in no token is spelled with byte tokens `<0xE2>` `<0x82>` ...
//!   ("byte fallback"), or becomes `<unk>` when the vocabulary has no byte tokens.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::vocab::{TokenId, TokenKind, Vocab};

/// SentencePiece's whitespace stand-in, "LOWER ONE EIGHTH BLOCK".
pub const SPACE: char = '\u{2581}';

/// The scores and fallbacks SentencePiece encoding needs beside the vocabulary.
#[derive(Clone, Debug)]
pub struct Spm {
    scores: Vec<f32>, // (n_vocab)
    pub(crate) add_space_prefix: bool,
    byte_tokens: [Option<TokenId>; 256], // <0xXX>, or failing that the one-byte token
    unknown: Option<TokenId>,
}

impl Spm {
    pub fn new(vocab: &Vocab, scores: Vec<f32>, add_space_prefix: bool) -> Spm {
        let mut byte_tokens = [None; 256];
        for (b, slot) in byte_tokens.iter_mut().enumerate() {
            let one_byte = std::str::from_utf8(&[b as u8])
                .ok()
                .and_then(|s| vocab.id(s));
            *slot = vocab.id(&format!("<0x{b:02X}>")).or(one_byte);
        }
        let unknown = vocab
            .iter()
            .find(|&(_, _, k)| k == TokenKind::Unknown)
            .map(|(id, _, _)| id);
        Spm {
            scores,
            add_space_prefix,
            byte_tokens,
            unknown,
        }
    }

    /// The text with spaces escaped, and the prefix space when `add_prefix` says so
    /// (llama.cpp adds it at the start of the input and after every special token).
    pub fn escape(text: &str, add_prefix: bool) -> String {
        let prefix = if add_prefix { " " } else { "" };
        format!("{prefix}{text}").replace(' ', "▁")
    }

    // ANCHOR: spm_tokenize
    /// Encodes already escaped text (see [`Spm::escape`]).
    pub fn tokenize(&self, vocab: &Vocab, text: &str, out: &mut Vec<TokenId>) {
        // One symbol per character: byte ranges into `text`, in a linked list.
        let mut syms: Vec<Symbol> = Vec::new();
        for (i, (start, c)) in text.char_indices().enumerate() {
            syms.push(Symbol {
                start,
                len: c.len_utf8(),
                prev: i.checked_sub(1),
                next: None,
            });
            if i > 0 {
                syms[i - 1].next = Some(i);
            }
        }
        let mut heap = BinaryHeap::new();
        for left in 0..syms.len().saturating_sub(1) {
            self.push_bigram(vocab, text, &syms, &mut heap, left);
        }
        while let Some(Bigram {
            left, right, len, ..
        }) = heap.pop()
        {
            // Stale: a side was fused away or has grown since the bigram was queued.
            if syms[left].len == 0
                || syms[right].len == 0
                || syms[left].len + syms[right].len != len
            {
                continue;
            }
            syms[left].len = len;
            syms[right].len = 0;
            syms[left].next = syms[right].next;
            if let Some(after) = syms[right].next {
                syms[after].prev = Some(left);
            }
            if let Some(before) = syms[left].prev {
                self.push_bigram(vocab, text, &syms, &mut heap, before);
            }
            self.push_bigram(vocab, text, &syms, &mut heap, left);
        }
        for s in syms.iter().filter(|s| s.len > 0) {
            let piece = &text[s.start..s.start + s.len];
            match vocab.id(piece) {
                Some(id) => out.push(id),
                None => self.byte_fallback(piece, out),
            }
        }
    }

    // ANCHOR_END: spm_tokenize

    /// A piece with no token of its own: one byte token per UTF-8 byte, else `<unk>`.
    fn byte_fallback(&self, piece: &str, out: &mut Vec<TokenId>) {
        let bytes: Option<Vec<TokenId>> = piece
            .bytes()
            .map(|b| self.byte_tokens[b as usize])
            .collect();
        match (bytes, self.unknown) {
            (Some(ids), _) => out.extend(ids),
            (None, Some(unk)) => out.push(unk),
            (None, None) => {} // nothing can spell it; llama.cpp would throw here
        }
    }

    fn push_bigram(
        &self,
        vocab: &Vocab,
        text: &str,
        syms: &[Symbol],
        heap: &mut BinaryHeap<Bigram>,
        left: usize,
    ) {
        let Some(right) = syms[left].next else { return };
        let len = syms[left].len + syms[right].len;
        let start = syms[left].start;
        if let Some(id) = vocab.id(&text[start..start + len]) {
            heap.push(Bigram {
                score: self.scores[id as usize],
                left,
                right,
                len,
            });
        }
    }
}

/// One character (later: one fused run of characters) of the text being encoded.
#[derive(Clone, Copy, Debug)]
struct Symbol {
    start: usize, // byte offset into the escaped text
    len: usize,   // bytes; 0 once fused into the left neighbour
    prev: Option<usize>,
    next: Option<usize>,
}

/// A candidate fusion: the highest score pops first, then the leftmost.
#[derive(Clone, Copy, Debug)]
struct Bigram {
    score: f32,
    left: usize,
    right: usize,
    len: usize, // bytes of the fused text, to recognise stale entries
}

impl Ord for Bigram {
    fn cmp(&self, other: &Self) -> Ordering {
        // BinaryHeap pops the greatest: a higher score, then a smaller position.
        self.score
            .total_cmp(&other.score)
            .then(other.left.cmp(&self.left))
    }
}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Bigram {}

// ANCHOR: toy_vocabulary
/// A hand-made SentencePiece vocabulary, small enough to follow by hand:
/// `<unk>`, `<s>`, `</s>`, the 256 byte tokens, single letters, and the pieces that build
/// "▁hello" and "▁world". A higher score fuses earlier, so "hello" is built as
/// ll (-2), he (-3), hell (-4), hello (-5), ▁hello (-6).
pub fn toy_vocabulary() -> Vec<(String, f32, TokenKind)> {
    let mut v = vec![
        ("<unk>".to_string(), 0.0, TokenKind::Unknown),
        ("<s>".to_string(), 0.0, TokenKind::Control),
        ("</s>".to_string(), 0.0, TokenKind::Control),
    ];
    v.extend((0..=255u8).map(|b| (format!("<0x{b:02X}>"), 0.0, TokenKind::Byte)));
    let pieces = [
        ("▁", -1.0),
        ("h", -1.0),
        ("e", -1.0),
        ("l", -1.0),
        ("o", -1.0),
        ("w", -1.0),
        ("r", -1.0),
        ("d", -1.0),
        ("ll", -2.0),
        ("he", -3.0),
        ("hell", -4.0),
        ("hello", -5.0),
        ("▁hello", -6.0),
        ("▁w", -7.0),
        ("or", -8.0),
        ("▁wor", -9.0),
        ("ld", -10.0),
        ("▁world", -11.0),
    ];
    v.extend(
        pieces
            .iter()
            .map(|&(p, s)| (p.to_string(), s, TokenKind::Normal)),
    );
    v
}
// ANCHOR_END: toy_vocabulary
