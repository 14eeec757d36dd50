//! One constrained generation: the matcher for its text so far, the mask before each
//! token, and the promise that the answer is a whole document even when `max_tokens`
//! ends it.
//!
//! The promise rests on one number: the length, in bytes, of the shortest text that
//! finishes the document from here ([`Matcher::completion`]). Every vocabulary this book
//! reads has a token for each single byte, so that many tokens always suffice. Before a
//! token is accepted, the completion after it must fit in the tokens left after it; a
//! token that would break this is replaced by the most likely token on the shortest way
//! out. The first state's completion must fit in the whole budget, and each step keeps
//! it so, so the document always closes in time.

use std::sync::Arc;

use ch02_tokenizer::TokenId;
use ch10_batching::steer::Steer;

use crate::grammar::Grammar;
use crate::mask::{TokenIndex, TokenSet};
use crate::matcher::Matcher;

/// Why a token could not be taken.
#[derive(Clone, Debug, PartialEq)]
pub enum ConstraintError {
    /// The budget is smaller than the shortest document.
    BudgetTooSmall { need: usize, budget: usize },
    /// The token is not allowed here (the caller sampled without the mask).
    NotAllowed(TokenId),
    /// The document is finished; only an end token may follow.
    Finished,
}

impl std::fmt::Display for ConstraintError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConstraintError::BudgetTooSmall { need, budget } => write!(
                f,
                "max_tokens {budget} is too small: the shortest answer the schema allows takes up to {need} tokens"
            ),
            ConstraintError::NotAllowed(id) => {
                write!(f, "token {id} does not continue the document")
            }
            ConstraintError::Finished => write!(f, "the document is already complete"),
        }
    }
}

impl std::error::Error for ConstraintError {}

/// A generation under a grammar.
#[derive(Clone, Debug)]
pub struct Constraint {
    matcher: Matcher,
    index: Arc<TokenIndex>,
    /// Tokens left, `None` for no limit.
    budget: Option<usize>,
    /// The text accepted so far.
    text: Vec<u8>,
    /// The last mask, kept to reuse its memory.
    set: TokenSet,
}

impl Constraint {
    /// A generation of at most `budget` tokens (end token not counted).
    pub fn new(
        grammar: &Grammar,
        index: Arc<TokenIndex>,
        budget: Option<usize>,
    ) -> Result<Self, ConstraintError> {
        let matcher = Matcher::new(grammar);
        if let Some(budget) = budget {
            let need = matcher.completion().len();
            if need > budget {
                return Err(ConstraintError::BudgetTooSmall { need, budget });
            }
        }
        let set = TokenSet::empty(index.vocab_size());
        Ok(Constraint {
            matcher,
            index,
            budget,
            text: Vec::new(),
            set,
        })
    }

    pub fn is_complete(&self) -> bool {
        self.matcher.is_complete()
    }

    /// The text accepted so far.
    pub fn text(&self) -> &[u8] {
        &self.text
    }

    pub fn matcher(&self) -> &Matcher {
        &self.matcher
    }

    /// Every token the grammar allows next (the budget aside).
    pub fn mask(&self, out: &mut TokenSet) {
        self.index.mask(&self.matcher, out);
    }

    // ANCHOR: choose
    /// The token to take, given the one the sampler chose from the masked logits: that
    /// token if the document can still close in time after it, else the likeliest
    /// token (by `logits`) that walks the shortest way out.
    pub fn choose(&self, sampled: TokenId, logits: &[f32]) -> TokenId {
        if self.fits_after(sampled) {
            return sampled;
        }
        let way_out = self.matcher.completion();
        if way_out.is_empty() {
            return self.index.ends().first().copied().unwrap_or(sampled);
        }
        (0..self.index.vocab_size() as TokenId)
            .filter(|&id| {
                let piece = self.index.piece(id);
                !piece.is_empty() && way_out.starts_with(piece)
            })
            .max_by(|&a, &b| logit(logits, a).total_cmp(&logit(logits, b)))
            .unwrap_or(sampled)
    }
    // ANCHOR_END: choose

    // ANCHOR: fits_after
    /// Whether the document can still close within the budget after token `id`.
    fn fits_after(&self, id: TokenId) -> bool {
        let Some(budget) = self.budget else {
            return true;
        };
        if self.index.ends().contains(&id) {
            return self.matcher.is_complete();
        }
        let mut after = self.matcher.clone();
        if !after.accept(self.index.piece(id)) {
            return false;
        }
        after.completion().len() < budget
    }
    // ANCHOR_END: fits_after

    /// Takes token `id` (an end token only when the document is complete).
    pub fn accept(&mut self, id: TokenId) -> Result<(), ConstraintError> {
        if self.index.ends().contains(&id) {
            return if self.matcher.is_complete() {
                Ok(())
            } else {
                Err(ConstraintError::NotAllowed(id))
            };
        }
        let piece = self.index.piece(id);
        if piece.is_empty() || !self.matcher.accept(piece) {
            return Err(ConstraintError::NotAllowed(id));
        }
        self.text.extend_from_slice(piece);
        if let Some(budget) = &mut self.budget {
            *budget = budget.saturating_sub(1);
        }
        Ok(())
    }
}

// ANCHOR: steer
/// The grammar as chapter 10's engine asks for it, around each sampling.
impl Steer for Constraint {
    fn allows(&mut self, id: u32) -> bool {
        self.index.allows(&self.matcher, id)
    }

    fn mask(&mut self, logits: &mut [f32]) {
        let mut set = std::mem::replace(&mut self.set, TokenSet::empty(0));
        self.index.mask(&self.matcher, &mut set);
        set.apply(logits);
        self.set = set;
    }

    fn choose(&mut self, sampled: u32, logits: &[f32]) -> u32 {
        Constraint::choose(self, sampled, logits)
    }

    fn accept(&mut self, id: u32) {
        // The engine takes only what `allows` or the mask let through, and `choose` gave.
        let taken = Constraint::accept(self, id);
        debug_assert!(taken.is_ok(), "{taken:?}");
    }
}
// ANCHOR_END: steer

fn logit(logits: &[f32], id: TokenId) -> f32 {
    logits
        .get(id as usize)
        .copied()
        .unwrap_or(f32::NEG_INFINITY)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Limits, compile_text};

    /// A toy vocabulary: every single byte a JSON text needs, and some longer pieces.
    fn vocabulary() -> TokenIndex {
        let mut pieces: Vec<Option<Vec<u8>>> = (0x20u8..0x7f).map(|b| Some(vec![b])).collect();
        for long in [
            "{\"", "\":", "\",\"", "name", "age", " a", "aaaa", "[{\"", "}]", "123",
        ] {
            pieces.push(Some(long.as_bytes().to_vec()));
        }
        pieces.push(None); // the end token
        let end = pieces.len() as TokenId - 1;
        TokenIndex::new(pieces, vec![end])
    }

    /// A tiny "model": always prefers the longest allowed token that keeps a string
    /// going, so left alone it would never close the string.
    fn wander(index: &TokenIndex, set: &TokenSet) -> (TokenId, Vec<f32>) {
        let logits: Vec<f32> = (0..index.vocab_size() as TokenId)
            .map(|id| {
                if set.contains(id) {
                    index.piece(id).iter().filter(|&&b| b == b'a').count() as f32
                } else {
                    f32::NEG_INFINITY
                }
            })
            .collect();
        let best = (0..index.vocab_size() as TokenId)
            .max_by(|&a, &b| logits[a as usize].total_cmp(&logits[b as usize]))
            .unwrap();
        (best, logits)
    }

    #[test]
    fn every_budget_ends_in_a_whole_document() {
        let grammar = compile_text(
            r#"{"type":"object","properties":{"name":{"type":"string"},"tags":{"type":"array","items":{"type":"string"},"minItems":1}},"required":["name","tags"]}"#,
            Limits::default(),
        )
        .unwrap();
        let index = Arc::new(vocabulary());
        let need = Matcher::new(&grammar).completion().len();
        for budget in need..need + 40 {
            let mut c = Constraint::new(&grammar, index.clone(), Some(budget)).unwrap();
            let mut set = TokenSet::empty(index.vocab_size());
            for _ in 0..budget {
                c.mask(&mut set);
                let (sampled, logits) = wander(&index, &set);
                let id = c.choose(sampled, &logits);
                if index.ends().contains(&id) {
                    break;
                }
                c.accept(id).unwrap();
            }
            assert!(
                c.is_complete(),
                "budget {budget}: {}",
                String::from_utf8_lossy(c.text())
            );
            let parsed: serde_json::Value = serde_json::from_slice(c.text()).unwrap();
            assert!(parsed["tags"].as_array().is_some_and(|t| !t.is_empty()));
        }
        assert!(Constraint::new(&grammar, index.clone(), Some(need - 1)).is_err());
    }
}
