//! Exercises for chapter 5. Fill in each `todo!()`, then run `cargo xtask exercises ch05`
//! (or `cargo test -p ch05-kv-cache --features exercises --test exercises`). Each test
//! compares your function with the chapter's implementation and with cases worked out by hand.
#![allow(unused_variables)]

/// Exercise 1: append to the cache.
///
/// One layer of the contiguous cache is a plane `(n_kv_heads, max_pos, head_dim)`: for each
/// KV head, `max_pos` slots of `head_dim` floats, one per position. The K projection gives
/// a token's keys as one row `(n_kv_heads * head_dim)`, heads side by side. Copy head `h`
/// of `row` (floats `h*head_dim .. (h+1)*head_dim`) into slot `pos` of head `h`'s part of
/// `plane`, for every head. Touch nothing else.
///
/// Hint: `n_kv_heads = row.len() / head_dim`. Head `h`'s slot `pos` starts at
/// `(h * max_pos + pos) * head_dim`; `copy_from_slice` does the copy.
pub fn write_row(plane: &mut [f32], row: &[f32], pos: usize, max_pos: usize, head_dim: usize) {
    // TODO: scatter the row's heads into their planes at `pos`.
    todo!("exercise 1: append to the cache")
}

/// Exercise 2: the block-table lookup.
///
/// A paged cache keeps a sequence's positions in blocks of `block_size` slots scattered
/// over a pool; `table[i]` is the physical block holding positions
/// `i*block_size .. (i+1)*block_size`. Return the physical slot of position `pos`: its
/// block's number times `block_size`, plus its offset inside the block.
/// With `table = [7, 2, 5]` and blocks of 4, position 9 is in block 5 at offset 1: slot 21.
///
/// Hint: `pos / block_size` picks the table entry, `pos % block_size` the offset.
pub fn physical_slot(table: &[usize], block_size: usize, pos: usize) -> usize {
    // TODO: table entry, times block_size, plus the offset.
    todo!("exercise 2: the block-table lookup")
}

/// Exercise 3: attention over a paged cache.
///
/// One query head `q` (`head_dim` floats) attends over positions `0..len` of a sequence
/// whose keys and values live in pools `k_pool` and `v_pool`, each
/// `(n_blocks, block_size, head_dim)`, reached through `table` as in exercise 2.
/// Return the values `v_j` summed with the weights `softmax over j of q·k_j / √head_dim`:
/// `head_dim` floats.
///
/// Hint: nothing about attention changes, only where the rows are: the pools are not in
/// position order, so position `j`'s key is at the slot the block table gives (your
/// exercise 2), `k_pool[s*head_dim..(s+1)*head_dim]`. Once each row is found this is chapter
/// 3's single-query attention: scale by `1/√head_dim` before the softmax. See "A paged
/// cache" in the chapter.
pub fn paged_attention(
    q: &[f32],
    k_pool: &[f32],
    v_pool: &[f32],
    table: &[usize],
    block_size: usize,
    len: usize,
) -> Vec<f32> {
    // TODO: scores through the block table, softmax, weighted sum of values.
    todo!("exercise 3: attention over a paged cache")
}

/// Exercise 4: what the ring buffer holds.
///
/// A sliding-window layer keeps its keys in a ring of `window` slots: position `p` is
/// written to slot `p % window`, overwriting whatever was there. After positions
/// `0..written` have been written in order, return for every slot the position it holds
/// (`None` if nothing was ever written there).
/// With `window = 3` and `written = 7`: `[Some(6), Some(4), Some(5)]`.
///
/// Hint: slot `s` holds the largest `p < written` with `p % window == s`, if there is one.
/// Or simply replay the writes.
pub fn ring_contents(written: usize, window: usize) -> Vec<Option<usize>> {
    // TODO: which position sits in each slot.
    todo!("exercise 4: what the ring buffer holds")
}

/// Exercise 5: how much of a session to keep.
///
/// A session's cache holds the keys and values of `cached`; the caller now wants the
/// session to hold `wanted` (say, a chat front end re-sent the whole conversation with an
/// edited last message). Return how many leading positions can be kept: the length of
/// the common prefix of the two, except that when that prefix is all of `wanted`, the
/// last wanted token must still be recomputed (the cache keeps K and V, not the logits
/// the caller needs next).
/// `cached = [5, 6, 7, 8]`, `wanted = [5, 6, 9]` → 2; `wanted = [5, 6]` → 1.
///
/// Hint: count while the ids agree; then check whether that count reached `wanted.len()`.
pub fn positions_to_keep(cached: &[u32], wanted: &[u32]) -> usize {
    // TODO: the common prefix, minus one if it covers all of `wanted`.
    todo!("exercise 5: how much of a session to keep")
}

/// Exercise 6: which keys a window reads.
///
/// A query at position `pos` in a layer with a sliding window of `window` positions sees the
/// last `window` positions up to and including its own (fewer near the start of the text).
/// Their keys sit in a ring of `capacity` slots (`capacity >= window`: chapter 8 adds one
/// prefill chunk of slots to the window), position `p` in slot `p % capacity`. Return, in
/// position order, each position the query sees paired with its slot.
/// With `pos = 9`, `window = 4`, `capacity = 6`: `[(6, 0), (7, 1), (8, 2), (9, 3)]`.
///
/// Hint: the first position seen is `pos + 1 - window`, which must not go below 0
/// (`saturating_sub`). See "A ring buffer for sliding windows" in the chapter.
pub fn window_slots(pos: usize, window: usize, capacity: usize) -> Vec<(usize, usize)> {
    // TODO: the positions the window keeps, each with its slot in the ring.
    todo!("exercise 6: which keys a window reads")
}
