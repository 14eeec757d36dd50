//! Exercises for chapter 5. Fill in each `todo!()`, then run `cargo xtask exercises ch05`
//! (or `cargo test -p ch05-kv-cache --features exercises --test exercises`). Each test
//! compares your function with the chapter's implementation and with cases worked out by hand.
#![allow(unused_variables)]

use ch01_tensors::ops;

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
    for (h, head) in row.chunks_exact(head_dim).enumerate() {
        let at = (h * max_pos + pos) * head_dim;
        plane[at..at + head_dim].copy_from_slice(head);
    }
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
    table[pos / block_size] * block_size + pos % block_size
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
    let d = q.len();
    let scale = 1.0 / (d as f32).sqrt();
    let slots: Vec<usize> = (0..len)
        .map(|j| physical_slot(table, block_size, j))
        .collect();
    let mut w: Vec<f32> = slots
        .iter()
        .map(|&s| ops::dot(q, &k_pool[s * d..(s + 1) * d]) * scale)
        .collect();
    ops::softmax_inplace(&mut w);
    let mut out = vec![0.0f32; d];
    for (&w_j, &s) in w.iter().zip(&slots) {
        for (o, &v) in out.iter_mut().zip(&v_pool[s * d..(s + 1) * d]) {
            *o += w_j * v;
        }
    }
    out
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
    let mut slots = vec![None; window];
    for p in written.saturating_sub(window)..written {
        slots[p % window] = Some(p);
    }
    slots
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
    let shared = cached
        .iter()
        .zip(wanted)
        .take_while(|(a, b)| a == b)
        .count();
    if shared == wanted.len() {
        shared.saturating_sub(1)
    } else {
        shared
    }
}

/// Exercise 6: which keys a window reads.
///
/// The last `window` positions up to `pos`, each with its slot `p % capacity`.
pub fn window_slots(pos: usize, window: usize, capacity: usize) -> Vec<(usize, usize)> {
    ((pos + 1).saturating_sub(window)..=pos)
        .map(|p| (p, p % capacity))
        .collect()
}
