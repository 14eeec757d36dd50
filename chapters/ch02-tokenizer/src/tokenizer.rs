//! The tokenizer: special tokens, then pre-tokenizing, then merging; and back again.

use crate::bpe::{HEAP_MIN_LEN, HeapMerger, Merges, merge_naive};
use crate::byte_level::ByteLevel;
use crate::error::{Error, Result};
use crate::pretokenize::PreTokenizer;
use crate::special::{Fragment, SpecialToken, partition};
use crate::spm::Spm;
use crate::vocab::{TokenId, TokenKind, Vocab};

/// Stands in for a byte that has no token: in no merge, dropped from the output.
const NO_TOKEN: TokenId = TokenId::MAX;

/// How text becomes tokens between the special-token cuts.
#[derive(Clone, Debug)]
pub enum Model {
    /// GPT-2 style byte-level BPE (SmolLM2).
    ByteLevelBpe {
        merges: Merges,
        /// The single-byte token of every byte: where each piece starts.
        byte_tokens: [Option<TokenId>; 256],
        pre: PreTokenizer,
    },
    /// SentencePiece BPE (Gemma-3, Llama-2).
    SentencePiece(Spm),
}

/// Which merge loop byte-level BPE runs on each piece.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MergeLoop {
    /// Scan all pairs, fuse the best, repeat: O(n²) per piece.
    Naive,
    /// Priority queue + linked list: O(n log n) per piece.
    Heap,
    /// The naive loop for short pieces, the heap for long ones (the default).
    Auto,
}

/// Text -> token ids -> text, as llama.cpp does it for one vocabulary.
#[derive(Clone, Debug)]
pub struct Tokenizer {
    vocab: Vocab,
    model: Model,
    specials: Vec<SpecialToken>, // longest text first
    /// The bytes each token decodes to, end to end, as [`Vocab`] keeps its texts.
    piece_bytes: Vec<u8>,
    piece_ends: Vec<usize>, // (n_vocab) where each token's bytes end in `piece_bytes`
}

impl Tokenizer {
    /// A byte-level BPE tokenizer from its vocabulary (in id order) and merge list (in rank
    /// order). Every merge must join two tokens into a third. A byte whose stand-in character
    /// is not a token is dropped when encoding, as llama.cpp does (SmolLM2 has no token for
    /// 21 bytes, among them the control characters U+0004 and U+0006).
    pub fn byte_level_bpe<S: AsRef<str>, M: AsRef<str>>(
        tokens: impl IntoIterator<Item = (S, TokenKind)>,
        merges: &[(M, M)],
        pre: PreTokenizer,
    ) -> Result<Tokenizer> {
        let vocab = Vocab::new(tokens)?;
        let bl = ByteLevel::new();
        let byte_tokens =
            std::array::from_fn(|b| vocab.id(bl.char_of(b as u8).encode_utf8(&mut [0; 4])));
        let mut triples = Vec::with_capacity(merges.len());
        for (rank, (left, right)) in merges.iter().enumerate() {
            let (left, right) = (left.as_ref(), right.as_ref());
            let find = |t: &str| {
                vocab.id(t).ok_or_else(|| {
                    Error::BadVocab(format!("merge {rank} uses {t:?}, which is not a token"))
                })
            };
            triples.push((find(left)?, find(right)?, find(&format!("{left}{right}"))?));
        }
        let model = Model::ByteLevelBpe {
            merges: Merges::new(&triples),
            byte_tokens,
            pre,
        };
        Ok(Tokenizer::assemble(vocab, model))
    }

    /// A SentencePiece tokenizer from its vocabulary, one score per token, and whether to
    /// put a space before the text (`tokenizer.ggml.add_space_prefix` in a GGUF).
    pub fn sentencepiece<S: AsRef<str>>(
        tokens: impl IntoIterator<Item = (S, TokenKind)>,
        scores: Vec<f32>,
        add_space_prefix: bool,
    ) -> Result<Tokenizer> {
        let vocab = Vocab::new(tokens)?;
        if scores.len() != vocab.len() {
            return Err(Error::BadVocab(format!(
                "{} tokens but {} scores",
                vocab.len(),
                scores.len()
            )));
        }
        let spm = Spm::new(&vocab, scores, add_space_prefix);
        Ok(Tokenizer::assemble(vocab, Model::SentencePiece(spm)))
    }

    fn assemble(vocab: Vocab, model: Model) -> Tokenizer {
        // llama.cpp's special-token cache: control, user-defined and unknown tokens.
        let mut specials: Vec<SpecialToken> = vocab
            .iter()
            .filter(|&(_, text, kind)| {
                !text.is_empty()
                    && matches!(
                        kind,
                        TokenKind::Control | TokenKind::UserDefined | TokenKind::Unknown
                    )
            })
            .map(|(id, text, kind)| SpecialToken {
                id,
                text: text.to_string(),
                needs_parse_special: kind != TokenKind::UserDefined,
                lstrip: false,
                rstrip: false,
            })
            .collect();
        specials.sort_by_key(|s| (std::cmp::Reverse(s.text.len()), s.id));
        let bl = ByteLevel::new();
        let (mut piece_bytes, mut piece_ends) = (Vec::new(), Vec::with_capacity(vocab.len()));
        for (_, text, kind) in vocab.iter() {
            match (kind, &model) {
                (TokenKind::Unused, _) => {}
                (TokenKind::Byte, _) => match byte_token_value(text) {
                    Some(b) => piece_bytes.push(b),
                    None => piece_bytes.extend_from_slice(text.as_bytes()),
                },
                (TokenKind::Normal, Model::ByteLevelBpe { .. }) => match bl.decode(text) {
                    Some(bytes) => piece_bytes.extend(bytes),
                    None => piece_bytes.extend_from_slice(text.as_bytes()),
                },
                (TokenKind::Normal, Model::SentencePiece(_)) => {
                    piece_bytes.extend_from_slice(text.replace(crate::spm::SPACE, " ").as_bytes())
                }
                _ => piece_bytes.extend_from_slice(text.as_bytes()), // control, user-defined, unknown: their text
            }
            piece_ends.push(piece_bytes.len());
        }
        Tokenizer {
            vocab,
            model,
            specials,
            piece_bytes,
            piece_ends,
        }
    }

    /// Sets the strip flags of an added token (see [`SpecialToken`]).
    pub fn set_strip(&mut self, id: TokenId, lstrip: bool, rstrip: bool) {
        for s in self.specials.iter_mut().filter(|s| s.id == id) {
            s.lstrip = lstrip;
            s.rstrip = rstrip;
        }
    }

    pub fn vocab(&self) -> &Vocab {
        &self.vocab
    }

    /// The added tokens the encoder cuts out of text before merging, longest text first.
    pub fn specials(&self) -> &[SpecialToken] {
        &self.specials
    }

    pub fn model(&self) -> &Model {
        &self.model
    }

    /// Number of tokens: valid ids are `0..vocab_size()`.
    pub fn vocab_size(&self) -> usize {
        self.vocab.len()
    }

    /// The id of a token given its vocabulary text, e.g. `token_id("<|im_end|>")`.
    pub fn token_id(&self, text: &str) -> Option<TokenId> {
        self.vocab.id(text)
    }

    // ANCHOR: encode
    /// Text -> token ids. With `parse_special`, control tokens written in the text
    /// (`<|im_start|>`) become their ids; without, they are tokenized as plain text.
    /// No BOS token is added.
    pub fn encode(&self, text: &str, parse_special: bool) -> Vec<TokenId> {
        self.encode_using(text, parse_special, MergeLoop::Auto)
    }

    /// [`Tokenizer::encode`] with the naive O(n²) merge loop on every piece: the reference
    /// the fast path is tested against.
    pub fn encode_naive(&self, text: &str, parse_special: bool) -> Vec<TokenId> {
        self.encode_using(text, parse_special, MergeLoop::Naive)
    }

    /// [`Tokenizer::encode`] with a chosen merge loop (the benchmark compares them).
    /// SentencePiece has a single merge loop and ignores the choice.
    pub fn encode_using(
        &self,
        text: &str,
        parse_special: bool,
        merge_loop: MergeLoop,
    ) -> Vec<TokenId> {
        let mut heap = HeapMerger::default(); // its buffers serve every piece of the text
        let mut merge = |merges: &Merges, piece: &mut Vec<TokenId>| match merge_loop {
            MergeLoop::Naive => merge_naive(merges, piece),
            MergeLoop::Heap => heap.merge(merges, piece),
            MergeLoop::Auto if piece.len() < HEAP_MIN_LEN => merge_naive(merges, piece),
            MergeLoop::Auto => heap.merge(merges, piece),
        };
        self.encode_with(text, parse_special, &mut merge)
    }
    // ANCHOR_END: encode

    // ANCHOR: encode_with
    fn encode_with(
        &self,
        text: &str,
        parse_special: bool,
        merge: &mut dyn FnMut(&Merges, &mut Vec<TokenId>),
    ) -> Vec<TokenId> {
        let mut out = Vec::with_capacity(text.len() / 3);
        let mut piece_ids = Vec::new(); // scratch: the tokens of one piece
        let mut after_special = true; // SentencePiece: a prefix space at the start and after specials
        for fragment in partition(text, &self.specials, parse_special) {
            let text = match fragment {
                Fragment::Token(id) => {
                    out.push(id);
                    after_special = true;
                    continue;
                }
                Fragment::Text(text) => text,
            };
            match &self.model {
                Model::ByteLevelBpe {
                    merges,
                    byte_tokens,
                    pre,
                } => {
                    // Llama 3: a piece that is a token as it stands needs no merging.
                    let whole = pre.ignores_merges().then(ByteLevel::new);
                    for piece in pre.split(text) {
                        if let Some(bl) = &whole
                            && let Some(id) = self.vocab.id(&bl.encode(piece.as_bytes()))
                        {
                            out.push(id); // the whole piece is a token: no merging
                            continue;
                        }
                        piece_ids.clear();
                        piece_ids.extend(
                            piece
                                .bytes()
                                .map(|b| byte_tokens[b as usize].unwrap_or(NO_TOKEN)),
                        );
                        merge(merges, &mut piece_ids);
                        // A byte without a token blocked merges across it; now it vanishes.
                        out.extend(piece_ids.iter().filter(|&&id| id != NO_TOKEN));
                    }
                }
                Model::SentencePiece(spm) => {
                    let escaped = Spm::escape(text, spm.add_space_prefix && after_special);
                    spm.tokenize(&self.vocab, &escaped, &mut out);
                }
            }
            after_special = false;
        }
        out
    }
    // ANCHOR_END: encode_with

    /// The bytes one token stands for. Control tokens give their text (`<|im_end|>`).
    pub fn piece(&self, id: TokenId) -> Result<&[u8]> {
        if id as usize >= self.piece_ends.len() {
            return Err(self.vocab.out_of_range(id));
        }
        Ok(&self.piece_bytes[crate::vocab::span(&self.piece_ends, id as usize)])
    }

    /// The bytes of the token at position `index` of a sequence: SentencePiece drops the
    /// prefix space it added, from the first token only.
    pub(crate) fn piece_at(&self, id: TokenId, index: usize) -> Result<&[u8]> {
        let piece = self.piece(id)?;
        match &self.model {
            Model::SentencePiece(spm) if spm.add_space_prefix && index == 0 => {
                Ok(piece.strip_prefix(b" ").unwrap_or(piece))
            }
            _ => Ok(piece),
        }
    }

    // ANCHOR: decode
    /// Token ids -> bytes. Not always UTF-8: a byte-level token can hold half a character.
    pub fn decode_bytes(&self, ids: &[TokenId]) -> Result<Vec<u8>> {
        let mut bytes = Vec::new();
        for (index, &id) in ids.iter().enumerate() {
            bytes.extend_from_slice(self.piece_at(id, index)?);
        }
        Ok(bytes)
    }

    /// Token ids -> text; a broken UTF-8 sequence becomes U+FFFD.
    pub fn decode(&self, ids: &[TokenId]) -> Result<String> {
        Ok(String::from_utf8_lossy(&self.decode_bytes(ids)?).into_owned())
    }
    // ANCHOR_END: decode
}

/// `<0xE2>` -> 0xE2.
fn byte_token_value(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}
