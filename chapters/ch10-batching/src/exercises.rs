//! Exercises for chapter 10. Fill in each `todo!()`, then run `cargo xtask exercises ch10`.
#![allow(unused_variables)]

/// Exercise 1: letting go of a shared block.
///
/// `refs[b]` is how many sequences hold block `b`; `free` is the free list. One holder lets
/// go of `block`: lower its count, and when nobody holds it any more put it at the end of
/// `free` and return `true`. Return `false` while someone still holds it.
///
/// Hint: the block is free only when the count reaches 0 — a block that two requests share
/// through their common prefix must survive the first one finishing. See "Paged memory for
/// many".
#[allow(clippy::ptr_arg)] // your solution pushes onto `free`
pub fn release(refs: &mut [u32], free: &mut Vec<usize>, block: usize) -> bool {
    // TODO: decrement, and push to `free` at zero.
    todo!("exercise 1: a block's reference count on free")
}

/// Exercise 2: the rows of the next step.
///
/// `pending[i]` is how many tokens running sequence `i` (oldest first) still has to run: 1
/// for a sequence that is decoding, more for one in the middle of its prompt. Return how
/// many rows each gets in a step of at most `budget` rows: every decoding sequence first
/// (oldest first, one row each), then the prompts, oldest first, as many rows as are left.
///
/// Hint: two passes over `pending`, the first for the ones equal to 1. See "The scheduler's
/// order".
pub fn step_rows(pending: &[usize], budget: usize) -> Vec<usize> {
    // TODO: decode rows first, then prefill chunks, never more than `budget` in all.
    todo!("exercise 2: the rows of the next step under a token budget")
}

/// Exercise 3: the keys of a prompt's blocks.
///
/// Return the prefix-cache key of every *full* block of `tokens` (blocks of `block_size`),
/// in order: block `i`'s key is `crate::prefix::block_key(previous, tokens of block i)`,
/// where `previous` is block `i − 1`'s key (`None` for block 0). A partial last block has
/// no key.
///
/// Hint: `chunks_exact` gives exactly the full blocks. See "Sharing a prefix".
pub fn block_keys(tokens: &[u32], block_size: usize) -> Vec<u64> {
    // TODO: a chain of keys, each from the one before.
    todo!("exercise 3: the prefix key of a block")
}

/// Exercise 4: whom to preempt.
///
/// Sequence `for_id` needs a block and none is free. `running` lists the running sequences
/// as `(id, has_row)`: ids are arrival numbers (smaller is older), `has_row` says the
/// sequence already has its row in this step. Return the sequence to preempt: the youngest
/// one without a row, other than `for_id`, and only if it is younger than `for_id`; `None`
/// otherwise (then `for_id` itself gives way).
///
/// Hint: filter, then `max`. See "When the pool runs out".
pub fn choose_victim(running: &[(usize, bool)], for_id: usize) -> Option<usize> {
    // TODO: the youngest sequence that can still give its blocks back.
    todo!("exercise 4: the preemption choice")
}
