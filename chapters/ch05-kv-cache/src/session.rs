//! A conversation that keeps its cache between turns.
//!
//! A chat is a sequence that only grows: each turn appends the user's message and the
//! model's reply. With a cache, the next turn costs only its new tokens; everything
//! before is already in the cache. [`Session`] owns a cache and the ids it holds, and
//! refuses — with the limit named — to go past the cache's capacity.

use ch04_forward::model::argmax;

use crate::Error;
use crate::forward::Engine;
use crate::store::KvStore;

// ANCHOR: session
/// A sequence being generated, with its KV cache.
pub struct Session<'m, S: KvStore> {
    engine: Engine<'m>,
    cache: S,
    /// Every id whose K/V is in the cache, in order: position `i` holds `ids[i]`.
    ids: Vec<u32>,
    /// The logits after the last id, `(vocab)`; empty before the first token.
    logits: Vec<f32>,
}

impl<'m, S: KvStore> Session<'m, S> {
    /// An empty session over an empty `cache`.
    pub fn new(engine: Engine<'m>, cache: S) -> Session<'m, S> {
        Session {
            engine,
            cache,
            ids: Vec::new(),
            logits: Vec::new(),
        }
    }

    /// Appends `ids` after everything already in the session and runs only them through
    /// the model. Returns the logits for the token after the last one.
    ///
    /// # Errors
    /// [`Error::ContextFull`] when the session would outgrow the cache; the session is
    /// then unchanged, and still usable.
    pub fn extend(&mut self, ids: &[u32]) -> Result<&[f32], Error> {
        let pos0 = self.ids.len();
        let limit = self.cache.max_positions();
        if pos0 + ids.len() > limit {
            return Err(Error::ContextFull {
                limit,
                needed: pos0 + ids.len(),
            });
        }
        self.logits = self.engine.forward(&mut self.cache, ids, pos0)?;
        self.ids.extend_from_slice(ids);
        Ok(&self.logits)
    }
    // ANCHOR_END: session

    // ANCHOR: generate
    /// Greedy decoding: appends up to `n` tokens, each the argmax of the logits so far,
    /// calling `on_token` as each is chosen. Stops early after an end-of-sequence id if
    /// `stop_at_eos`. Returns the new ids, which are also in the session (and its cache).
    pub fn generate(
        &mut self,
        n: usize,
        stop_at_eos: bool,
        on_token: &mut dyn FnMut(u32),
    ) -> Result<Vec<u32>, Error> {
        if self.logits.is_empty() {
            return Err(Error::Config(
                "generate needs a prompt first: call extend".into(),
            ));
        }
        let mut new = Vec::with_capacity(n.min(self.cache.max_positions()));
        for _ in 0..n {
            let next = argmax(&self.logits) as u32;
            new.push(next);
            on_token(next);
            // One token in: a decode step. Even the last token goes into the cache, so
            // that the next turn's `extend` continues right after it.
            self.extend(&[next])?;
            if stop_at_eos && self.engine.model.config.eos_token_ids.contains(&next) {
                break;
            }
        }
        Ok(new)
    }
    // ANCHOR_END: generate

    // ANCHOR: sync
    /// Makes the session hold exactly `ids`, reusing the longest prefix it already has:
    /// a chat front end that re-sends the whole conversation each turn pays only for what
    /// changed. Returns how many positions were reused.
    pub fn sync(&mut self, ids: &[u32]) -> Result<usize, Error> {
        let limit = self.cache.max_positions();
        if ids.len() > limit {
            return Err(Error::ContextFull {
                limit,
                needed: ids.len(),
            }); // checked before any change
        }
        let mut keep = reusable(&self.ids, ids);
        match self.cache.rewind(self.ids.len(), keep) {
            Ok(()) => {}
            Err(Error::CannotRewind { .. }) => {
                keep = 0; // a ring buffer that has wrapped over what we would keep: start over
                self.cache.rewind(self.ids.len(), 0)?;
            }
            Err(e) => return Err(e),
        }
        self.ids.truncate(keep);
        self.logits.clear();
        if keep < ids.len() {
            self.extend(&ids[keep..])?;
        }
        Ok(keep)
    }
    // ANCHOR_END: sync

    /// Forgets everything: the next `extend` starts at position 0.
    pub fn reset(&mut self) -> Result<(), Error> {
        self.cache.rewind(self.ids.len(), 0)?;
        self.ids.clear();
        self.logits.clear();
        Ok(())
    }

    /// The ids in the cache.
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    /// Positions used.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Nothing in the cache yet.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The logits after the last id (empty before the first `extend`).
    pub fn logits(&self) -> &[f32] {
        &self.logits
    }

    /// The cache.
    pub fn cache(&self) -> &S {
        &self.cache
    }

    /// The engine (model, masks, chunk size).
    pub fn engine(&self) -> &Engine<'m> {
        &self.engine
    }
}

// ANCHOR: reusable
/// How many leading ids `a` and `b` share.
pub fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// How many cached positions a session holding `cached` can keep when asked for
/// `wanted`: the common prefix, except that the last wanted token is always recomputed,
/// because its logits are what the caller wants next (and the cache keeps K and V, not
/// logits).
pub fn reusable(cached: &[u32], wanted: &[u32]) -> usize {
    let shared = common_prefix(cached, wanted);
    if shared == wanted.len() {
        shared.saturating_sub(1)
    } else {
        shared
    }
}
// ANCHOR_END: reusable
