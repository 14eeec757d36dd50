//! The mask: which tokens of the whole vocabulary may come next.
//!
//! Asking the matcher about each of 49 152 (or 262 144) tokens one by one would repeat
//! most of the work: `"name`, `"nam` and `"na` all begin with the same bytes. So the
//! tokens are sorted by their bytes, and the walk keeps the matcher's state after every
//! prefix of the token before; the next token starts from the longest prefix the two
//! share. When a prefix is refused, every token that begins with it is skipped at once
//! (they sit together in sorted order). This is a walk of the vocabulary's trie without
//! building the trie.
//!
//! Inside a string most tokens are plain text that any string takes. Those are set
//! once, when the index is built, and only the few tokens with a quote, a backslash, a
//! control byte or a broken character are walked.

use ch02_tokenizer::{TokenId, Tokenizer};

use crate::matcher::{Frame, Matcher, Stack, step_all};

/// A set of token ids, one bit each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenSet {
    words: Vec<u64>,
    len: usize,
}

impl TokenSet {
    pub fn empty(len: usize) -> TokenSet {
        TokenSet {
            words: vec![0; len.div_ceil(64)],
            len,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }

    pub fn clear(&mut self) {
        self.words.fill(0);
    }

    pub fn insert(&mut self, id: TokenId) {
        self.words[id as usize / 64] |= 1 << (id % 64);
    }

    pub fn contains(&self, id: TokenId) -> bool {
        (id as usize) < self.len && self.words[id as usize / 64] & (1 << (id % 64)) != 0
    }

    pub fn union_with(&mut self, other: &TokenSet) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= b;
        }
    }

    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    pub fn iter(&self) -> impl Iterator<Item = TokenId> + '_ {
        (0..self.len as TokenId).filter(|&id| self.contains(id))
    }

    /// Sets every logit outside the set to minus infinity, so that any sampler picks
    /// from the set alone.
    pub fn apply(&self, logits: &mut [f32]) {
        for (id, logit) in logits.iter_mut().enumerate() {
            if !self.contains(id as TokenId) {
                *logit = f32::NEG_INFINITY;
            }
        }
    }
}

/// Tokens sorted by their bytes, the bytes kept in one buffer.
#[derive(Clone, Debug, Default)]
struct Sorted {
    bytes: Vec<u8>,
    ends: Vec<usize>,
    ids: Vec<TokenId>,
}

impl Sorted {
    fn new(mut tokens: Vec<(&[u8], TokenId)>) -> Sorted {
        tokens.sort();
        let mut s = Sorted::default();
        for (bytes, id) in tokens {
            s.bytes.extend_from_slice(bytes);
            s.ends.push(s.bytes.len());
            s.ids.push(id);
        }
        s
    }

    fn len(&self) -> usize {
        self.ids.len()
    }

    /// The first index after `i` whose token does not begin with `prefix` (which token
    /// `i` begins with): the tokens that do sit together, so a binary search finds it.
    fn block_end(&self, i: usize, prefix: &[u8]) -> usize {
        let (mut lo, mut hi) = (i + 1, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.token(mid).starts_with(prefix) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    fn token(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }
}

/// The vocabulary, prepared for masking: built once per model.
#[derive(Clone, Debug)]
pub struct TokenIndex {
    vocab_size: usize,
    /// Every token a document can hold (text tokens, not control tokens), sorted.
    all: Sorted,
    /// The tokens any free string takes whole.
    plain: TokenSet,
    /// The text tokens that are not plain, sorted.
    special: Sorted,
    /// Each token's bytes (empty for tokens a document cannot hold).
    pieces: Vec<Vec<u8>>,
    /// The tokens that end a generation.
    ends: Vec<TokenId>,
}

/// Whether a token continues any string that is between characters and has no length limit.
fn is_plain(bytes: &[u8]) -> bool {
    !bytes.is_empty()
        && std::str::from_utf8(bytes).is_ok()
        && !bytes.iter().any(|&b| b == b'"' || b == b'\\' || b < 0x20)
}

impl TokenIndex {
    /// `pieces[id]`: the bytes of token `id`, `None` for tokens a document may not contain
    /// (control tokens); `ends`: the tokens that end a generation.
    pub fn new(pieces: Vec<Option<Vec<u8>>>, ends: Vec<TokenId>) -> TokenIndex {
        let vocab_size = pieces.len();
        let pieces: Vec<Vec<u8>> = pieces.into_iter().map(Option::unwrap_or_default).collect();
        let mut plain = TokenSet::empty(vocab_size);
        let (mut all, mut special) = (Vec::new(), Vec::new());
        for (id, bytes) in pieces.iter().enumerate() {
            if bytes.is_empty() {
                continue;
            }
            let id = id as TokenId;
            all.push((bytes.as_slice(), id));
            if is_plain(bytes) {
                plain.insert(id);
            } else {
                special.push((bytes.as_slice(), id));
            }
        }
        let (all, special) = (Sorted::new(all), Sorted::new(special));
        TokenIndex {
            vocab_size,
            all,
            plain,
            special,
            pieces,
            ends,
        }
    }

    /// From a tokenizer: every non-control token, by the bytes it decodes to.
    pub fn from_tokenizer(tok: &Tokenizer, ends: Vec<TokenId>) -> TokenIndex {
        let pieces = (0..tok.vocab_size() as TokenId)
            .map(|id| {
                let kind = tok.vocab().kind(id).ok()?;
                if kind.is_special() {
                    return None;
                }
                tok.piece(id).ok().map(<[u8]>::to_vec)
            })
            .collect();
        TokenIndex::new(pieces, ends)
    }

    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// The bytes of token `id` (empty for a control token).
    pub fn piece(&self, id: TokenId) -> &[u8] {
        self.pieces.get(id as usize).map_or(&[], Vec::as_slice)
    }

    pub fn ends(&self) -> &[TokenId] {
        &self.ends
    }

    /// How many tokens the walk can skip when the matcher sits in a free string.
    pub fn plain_count(&self) -> usize {
        self.plain.count()
    }

    // ANCHOR: mask
    /// Every token that may come next after `matcher`'s text, into `out`.
    pub fn mask(&self, matcher: &Matcher, out: &mut TokenSet) {
        out.clear();
        let stacks = matcher.stacks();
        if in_free_string(stacks) {
            out.union_with(&self.plain);
            walk(matcher, stacks, &self.special, out);
        } else {
            walk(matcher, stacks, &self.all, out);
        }
        if matcher.is_complete() {
            for &end in &self.ends {
                out.insert(end);
            }
        }
    }
    // ANCHOR_END: mask

    /// Whether token `id` may come next: the fast question, asked of one token.
    pub fn allows(&self, matcher: &Matcher, id: TokenId) -> bool {
        if self.ends.contains(&id) {
            return matcher.is_complete();
        }
        let piece = self.piece(id);
        !piece.is_empty() && matcher.allows(piece)
    }
}

// ANCHOR: walk
/// The sorted walk: `levels[d]` holds the matcher's stacks after the first `d` bytes of
/// the token last looked at (and whether they all sit in a free string).
fn walk(matcher: &Matcher, start: &[Stack], tokens: &Sorted, out: &mut TokenSet) {
    let g = matcher.grammar();
    let mut levels: Vec<(Vec<Stack>, bool)> = vec![(start.to_vec(), in_free_string(start))];
    let mut previous: &[u8] = &[];
    let mut i = 0;
    while i < tokens.len() {
        let token = tokens.token(i);
        // Keep the levels this token shares with the one before.
        let shared = token
            .iter()
            .zip(previous)
            .take_while(|(a, b)| a == b)
            .count();
        levels.truncate(shared.min(levels.len() - 1) + 1);
        previous = token;
        let mut refused_at = None;
        while levels.len() <= token.len() {
            let depth = levels.len() - 1;
            // Inside a free string, plain text is taken whole: no need to go byte by byte.
            if levels[depth].1 && is_plain(&token[depth..]) {
                break;
            }
            let mut next = Vec::new();
            step_all(g, &levels[depth].0, token[depth], &mut next);
            if next.is_empty() {
                refused_at = Some(depth);
                break;
            }
            let free = in_free_string(&next);
            levels.push((next, free));
        }
        match refused_at {
            None => {
                out.insert(tokens.ids[i]);
                i += 1;
            }
            Some(depth) => {
                // Skip every token that begins with the refused prefix: they sit together.
                let prefix = &token[..=depth];
                i = tokens.block_end(i, prefix);
            }
        }
    }
}
// ANCHOR_END: walk

/// Whether every stack sits in a string between characters with no upper bound.
fn in_free_string(stacks: &[Stack]) -> bool {
    stacks
        .iter()
        .all(|s| matches!(s.last(), Some(Frame::Str(str)) if str.is_free()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::Grammar;

    fn index(words: &[&str]) -> TokenIndex {
        let pieces = words.iter().map(|w| Some(w.as_bytes().to_vec())).collect();
        TokenIndex::new(pieces, vec![])
    }

    /// The walk's answer equals asking about every token one by one.
    fn check_against_one_by_one(ix: &TokenIndex, m: &Matcher) {
        let mut set = TokenSet::empty(ix.vocab_size());
        ix.mask(m, &mut set);
        for id in 0..ix.vocab_size() as TokenId {
            assert_eq!(
                set.contains(id),
                ix.allows(m, id),
                "token {:?}",
                String::from_utf8_lossy(ix.piece(id))
            );
        }
    }

    #[test]
    fn the_walk_equals_one_by_one() {
        let words = [
            "{", "{\"", "\"", "\"a", "a", "ab", "abc", "\":", ":", " ", "1", "12", "-", ".", "e",
            "}", "]", "[", ",", "null", "nu", "true", "\\", "\\n", "\\u", "é", "\u{1}", "\",\"",
            "}}",
        ];
        let ix = index(&words);
        let g = Grammar::any_object();
        for prefix in [
            "",
            "{",
            "{\"",
            "{\"a\"",
            "{\"a\":",
            "{\"a\":1",
            "{\"a\":\"x",
            "{\"a\":[",
            "{\"a\":\"x\\",
        ] {
            let mut m = Matcher::new(&g);
            assert!(m.accept(prefix.as_bytes()), "{prefix}");
            check_against_one_by_one(&ix, &m);
        }
    }

    #[test]
    fn ends_only_when_complete() {
        let pieces = vec![Some(b"{}".to_vec()), None];
        let ix = TokenIndex::new(pieces, vec![1]);
        let g = Grammar::any_object();
        let mut m = Matcher::new(&g);
        let mut set = TokenSet::empty(2);
        ix.mask(&m, &mut set);
        assert!(set.contains(0) && !set.contains(1));
        assert!(m.accept(b"{}"));
        ix.mask(&m, &mut set);
        assert!(!set.contains(0) && set.contains(1));
    }
}
