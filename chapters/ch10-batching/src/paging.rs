//! The engine's side of the pool: what the scheduler is told about each request, and how
//! a plan becomes blocks — admission through the prefix cache, new blocks as a sequence
//! grows, copy on write of a shared block about to be written, full blocks indexed for the
//! next request, and every block given back on preemption or the end.

use crate::engine::{BatchEngine, Seq};
use crate::prefix::{BlockKey, block_key};
use crate::scheduler::SeqState;

impl BatchEngine<'_> {
    /// The cached blocks `s` would start from: `(tokens computed, blocks taken for free)`.
    pub(crate) fn cached_prefix(&self, s: &Seq) -> (usize, Vec<(usize, BlockKey)>) {
        if !self.cfg.prefix_sharing {
            return (0, Vec::new());
        }
        let mut found = self.prefix.lookup(&s.tokens, self.cfg.block_size);
        // the last token is always run again: its logits are not cached
        let computed = (found.len() * self.cfg.block_size).min(s.tokens.len() - 1);
        found.truncate(computed.div_ceil(self.cfg.block_size));
        (computed, found)
    }

    /// What the scheduler sees of `s`.
    pub(crate) fn state(&self, s: &Seq) -> SeqState {
        let (computed, blocks) = if s.running {
            (s.computed, s.table.len())
        } else {
            let (computed, found) = self.cached_prefix(s);
            let mut free = found.iter().filter(|(b, _)| self.pool.refs(*b) > 0).count();
            // a shared last block that will be written is copied: it costs a new block
            if !computed.is_multiple_of(self.cfg.block_size)
                && found.last().is_some_and(|(b, _)| self.pool.refs(*b) > 0)
            {
                free -= 1;
            }
            (computed, free)
        };
        SeqState {
            id: s.id,
            running: s.running,
            tokens: s.tokens.len(),
            computed,
            blocks,
            freeable: s.table.iter().filter(|&&b| self.pool.refs(b) == 1).count(),
        }
    }

    /// Gives all of `seq`'s blocks back (indexed ones stay findable until reused).
    pub(crate) fn release_all(&mut self, at: usize) {
        for b in std::mem::take(&mut self.seqs[at].table) {
            self.pool.release(b);
        }
        self.seqs[at].keys.clear();
        self.seqs[at].computed = 0;
    }

    pub(crate) fn preempt(&mut self, id: usize) {
        let at = self.index(id);
        self.release_all(at);
        let s = &mut self.seqs[at];
        s.running = false;
        s.preemptions += 1;
    }

    /// Admits a waiting request, sharing the cached blocks of its prefix.
    pub(crate) fn admit(&mut self, id: usize) {
        let at = self.index(id);
        let (computed, found) = self.cached_prefix(&self.seqs[at]);
        for &(b, _) in &found {
            self.pool.retain(b);
        }
        let s = &mut self.seqs[at];
        s.table = found.iter().map(|&(b, _)| b).collect();
        s.keys = found
            .iter()
            .map(|&(_, k)| k)
            .take(computed / self.cfg.block_size)
            .collect();
        s.computed = computed;
        s.running = true;
        s.cached_tokens.get_or_insert(computed);
    }

    // ANCHOR: make_room
    /// Makes positions `start..start + len` of `seqs[at]` writable: new blocks at the end,
    /// and a copy of a block other sequences share before it is written into. False when
    /// the pool ran out.
    pub(crate) fn make_room(&mut self, at: usize, start: usize, len: usize) -> bool {
        let bs = self.cfg.block_size;
        let first = start / bs;
        if !start.is_multiple_of(bs) && first < self.seqs[at].table.len() {
            let b = self.seqs[at].table[first];
            if self.pool.refs(b) > 1 {
                let Some(copy) = self.alloc() else {
                    return false;
                };
                self.kv.copy_block(b, copy);
                self.pool.release(b);
                self.seqs[at].table[first] = copy;
            } else {
                self.prefix.forget(b); // ours alone now: it will change
            }
            self.seqs[at].keys.truncate(first);
        }
        while self.seqs[at].table.len() * bs < start + len {
            let Some(b) = self.alloc() else { return false };
            self.seqs[at].table.push(b);
        }
        true
    }
    // ANCHOR_END: make_room

    pub(crate) fn alloc(&mut self) -> Option<usize> {
        let b = self.pool.alloc()?;
        self.prefix.forget(b); // whatever it held before is gone
        Some(b)
    }

    /// `seqs[at]` has positions `0..computed`: index the blocks that became full.
    pub(crate) fn computed(&mut self, at: usize, computed: usize) {
        let bs = self.cfg.block_size;
        let s = &mut self.seqs[at];
        s.computed = computed;
        while s.keys.len() < computed / bs {
            let i = s.keys.len();
            let prev = s.keys.last().copied();
            let tokens = &s.tokens[i * bs..(i + 1) * bs];
            let key = if self.cfg.prefix_sharing {
                self.prefix.insert(prev, tokens, s.table[i])
            } else {
                block_key(prev, tokens)
            };
            s.keys.push(key);
        }
    }
}
