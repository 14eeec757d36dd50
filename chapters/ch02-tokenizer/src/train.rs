//! Learning merges from text: where a merge list comes from.
//!
//! Start with the 256 byte tokens. Count every adjacent pair of tokens inside every piece of
//! the training text; the most frequent pair becomes merge number 0 and a new token. Replace
//! it everywhere, count again, repeat. The order in which pairs were learned *is* the rank:
//! encoding later replays the merges in that order. (This is minbpe's `BasicTokenizer` plus
//! the GPT-2 split, on a scale that runs in milliseconds.)

use std::collections::HashMap;

use crate::byte_level::ByteLevel;
use crate::error::Result;
use crate::pretokenize::PreTokenizer;
use crate::tokenizer::Tokenizer;
use crate::vocab::{TokenId, TokenKind};

/// What training produced: the merges in rank order, as token texts.
#[derive(Clone, Debug)]
pub struct Trained {
    pub tokenizer: Tokenizer,
    /// `(left, right, count)` per merge, in the byte-level spelling (`Ġ` for a space).
    pub merges: Vec<(String, String, usize)>,
}

// ANCHOR: train
/// Learns up to `n_merges` merges from `text`, split by `pre`.
pub fn train(text: &str, n_merges: usize, pre: PreTokenizer) -> Result<Trained> {
    let bl = ByteLevel::new();
    let mut texts: Vec<String> = (0..=255u8).map(|b| bl.char_of(b).to_string()).collect();
    // Every distinct piece once, with how often it occurs: (tokens, count).
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for piece in pre.split(text) {
        *counts.entry(piece).or_default() += 1;
    }
    let mut words: Vec<(Vec<TokenId>, usize)> = counts
        .into_iter()
        .map(|(p, n)| (p.bytes().map(TokenId::from).collect(), n))
        .collect();
    words.sort(); // HashMap order is random; make training deterministic
    // ANCHOR_END: train

    // ANCHOR: train_rounds
    let mut merges = Vec::new();
    for _ in 0..n_merges {
        let mut pairs: HashMap<(TokenId, TokenId), usize> = HashMap::new();
        for (tokens, n) in &words {
            for w in tokens.windows(2) {
                *pairs.entry((w[0], w[1])).or_default() += n;
            }
        }
        // The most frequent pair; on a tie, the smallest ids.
        let Some((&(left, right), &count)) = pairs
            .iter()
            .max_by_key(|&(&(l, r), &n)| (n, std::cmp::Reverse((l, r))))
        else {
            break; // every piece is a single token
        };
        let fused_text = format!("{}{}", texts[left as usize], texts[right as usize]);
        let fused = match texts.iter().position(|t| *t == fused_text) {
            Some(existing) => existing as TokenId, // "a"+"bc" after "ab"+"c": same token
            None => {
                texts.push(fused_text);
                (texts.len() - 1) as TokenId
            }
        };
        for (tokens, _) in &mut words {
            replace_pair(tokens, (left, right), fused);
        }
        merges.push((
            texts[left as usize].clone(),
            texts[right as usize].clone(),
            count,
        ));
    }
    let pairs: Vec<(String, String)> = merges
        .iter()
        .map(|(l, r, _)| (l.clone(), r.clone()))
        .collect();
    let tokens = texts.into_iter().map(|t| (t, TokenKind::Normal));
    let tokenizer = Tokenizer::byte_level_bpe(tokens, &pairs, pre)?;
    Ok(Trained { tokenizer, merges })
}

/// Replaces every non-overlapping occurrence of `pair`, left to right.
fn replace_pair(tokens: &mut Vec<TokenId>, pair: (TokenId, TokenId), fused: TokenId) {
    let mut out = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        if i + 1 < tokens.len() && (tokens[i], tokens[i + 1]) == pair {
            out.push(fused);
            i += 2;
        } else {
            out.push(tokens[i]);
            i += 1;
        }
    }
    *tokens = out;
}
// ANCHOR_END: train_rounds

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learns_the_most_frequent_pairs_first() {
        let t = train("aaab aaab aaab", 3, PreTokenizer::Gpt2).unwrap();
        // pieces: "aaab", " aaab", " aaab". Pairs: aa x6 (2 per piece), ab x3, Ġa x2.
        assert_eq!(t.merges[0], ("a".into(), "a".into(), 6));
        let tok = &t.tokenizer;
        assert_eq!(
            tok.decode(&tok.encode("aaab aaab", false)).unwrap(),
            "aaab aaab"
        );
        assert!(
            tok.encode(" aaab", false).len() < 5,
            "merges shorten the encoding"
        );
    }

    #[test]
    fn stops_when_nothing_is_left_to_merge() {
        let t = train("ab", 10, PreTokenizer::Gpt2).unwrap();
        assert_eq!(t.merges.len(), 1);
        assert_eq!(t.tokenizer.encode("ab", false), [256]);
    }
}
