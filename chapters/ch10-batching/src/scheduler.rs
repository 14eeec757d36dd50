//! The scheduler: which rows go into the next step, who is admitted, who is preempted.
//!
//! A pure function of plain numbers ([`plan`]): no model, no memory, no clock. The engine
//! describes every sequence as a [`SeqState`], the pool as a free-block count, and applies
//! the [`Plan`] it gets back. The order of a step:
//!
//! 1. **decode rows first**: every running sequence that needs one token (its next one)
//!    gets a row, oldest first. When a new block is needed and none is free, the youngest
//!    running sequence not yet given a row is preempted (its blocks go back, it will be
//!    recomputed from its tokens); if there is none, the sequence itself is.
//! 2. **prefill chunks** of running sequences, oldest first, as many tokens as the
//!    budget and the free blocks allow;
//! 3. **admission**, first come first served: the oldest waiting sequence is admitted when
//!    the rest of its prompt fits in the free blocks; nobody overtakes it, so nobody waits
//!    forever (a request that cannot fit even an empty pool is refused at submission).
//!
//! A preempted sequence keeps its place in the queue (its arrival number), and nobody is
//! admitted in the step that preempted it, so it comes back before anyone younger.

/// What the scheduler knows of one sequence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeqState {
    /// Arrival order: smaller is older.
    pub id: usize,
    /// Admitted (holds blocks), or waiting.
    pub running: bool,
    /// Tokens known: the prompt and what has been generated.
    pub tokens: usize,
    /// Positions whose keys and values are in its blocks; for a waiting sequence, the
    /// cached prefix it would start from.
    pub computed: usize,
    /// Blocks it holds; for a waiting sequence, the cached blocks it would share without
    /// taking any from the free list.
    pub blocks: usize,
    /// Blocks that would go back to the free list if it were preempted (not shared).
    pub freeable: usize,
}

/// The step's limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub block_size: usize,
    pub free_blocks: usize,
    /// Rows in one step (decode tokens and prefill tokens together).
    pub max_batch_tokens: usize,
    /// Sequences running at once; at most `max_batch_tokens`, so every running sequence
    /// always has room for its decode row.
    pub max_seqs: usize,
}

/// Positions `start..start + len` of sequence `id` go through the model in this step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    pub id: usize,
    pub start: usize,
    pub len: usize,
}

/// What the next step does.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Preempted first (their blocks are freed before anything is allocated).
    pub preempted: Vec<usize>,
    pub admitted: Vec<usize>,
    /// Decode rows first, then prefill chunks, each group oldest first.
    pub rows: Vec<Chunk>,
}

impl Plan {
    pub fn tokens(&self) -> usize {
        self.rows.iter().map(|c| c.len).sum()
    }
}

/// New blocks sequence `s` needs for its next `n` positions.
fn need(s: &SeqState, n: usize, bs: usize) -> usize {
    (s.computed + n).div_ceil(bs).saturating_sub(s.blocks)
}

/// How many of its next positions `s` can take with `free` blocks.
fn fits(s: &SeqState, free: usize, bs: usize) -> usize {
    ((s.blocks + free) * bs).saturating_sub(s.computed)
}

// ANCHOR: victim
/// The sequence to preempt when `for_id` needs a block: the youngest running sequence that
/// has no row in this step yet and is not preempted already; `None` when that would be
/// `for_id` itself (nobody younger is left).
pub fn victim(seqs: &[SeqState], for_id: usize, taken: &[usize]) -> Option<usize> {
    seqs.iter()
        .filter(|s| s.running && s.id != for_id && !taken.contains(&s.id))
        .map(|s| s.id)
        .max()
        .filter(|&v| v > for_id)
}
// ANCHOR_END: victim

// ANCHOR: plan
/// The next step's plan.
pub fn plan(seqs: &[SeqState], limits: Limits) -> Plan {
    let bs = limits.block_size;
    let mut free = limits.free_blocks;
    let mut budget = limits.max_batch_tokens;
    let mut p = Plan::default();
    let mut order: Vec<&SeqState> = seqs.iter().collect();
    order.sort_by_key(|s| s.id); // oldest first
    // ids with a row, or preempted: not to be chosen as victims
    let mut taken: Vec<usize> = Vec::new();
    let by_id = |id: usize| seqs.iter().find(|s| s.id == id).expect("an id from seqs");
    // 1. decode rows, then 2. prefill chunks, of running sequences
    for decode in [true, false] {
        for s in order.iter().filter(|s| s.running) {
            let pending = s.tokens - s.computed;
            if (pending == 1) != decode || p.preempted.contains(&s.id) || budget == 0 {
                continue;
            }
            // preempt younger sequences until at least one position fits
            while fits(s, free, bs) == 0 {
                match victim(seqs, s.id, &taken) {
                    Some(v) => {
                        free += by_id(v).freeable;
                        p.preempted.push(v);
                        taken.push(v);
                    }
                    None => break,
                }
            }
            let n = pending.min(budget).min(fits(s, free, bs));
            if n == 0 {
                free += s.freeable;
                p.preempted.push(s.id);
                taken.push(s.id);
                continue;
            }
            free -= need(s, n, bs);
            budget -= n;
            taken.push(s.id);
            p.rows.push(Chunk {
                id: s.id,
                start: s.computed,
                len: n,
            });
        }
    }
    // ANCHOR_END: plan
    // ANCHOR: admission
    // 3. admission, first come first served; not in a step that preempted (the preempted
    // come back first)
    if !p.preempted.is_empty() {
        return p;
    }
    let running = seqs.iter().filter(|s| s.running).count() - p.preempted.len();
    for (running, s) in (running..).zip(order.iter().filter(|s| !s.running)) {
        let pending = s.tokens - s.computed;
        if budget == 0 || running >= limits.max_seqs || need(s, pending, bs) > free {
            break; // nobody overtakes the oldest waiting sequence
        }
        let n = pending.min(budget);
        free -= need(s, pending, bs); // the whole prompt's blocks are set aside
        budget -= n;
        p.admitted.push(s.id);
        p.rows.push(Chunk {
            id: s.id,
            start: s.computed,
            len: n,
        });
    }
    p
}
// ANCHOR_END: admission

#[cfg(test)]
mod tests;
