//! Byte-level BPE merging: the naive loop (the reference) and the heap + linked list version.
//!
//! A piece starts as one token per byte. The merge list says which adjacent pair to fuse
//! first: merge number 0 has the highest priority ("rank"). Encoding repeats "find the
//! adjacent pair with the lowest rank, fuse it" until no adjacent pair is in the list. When
//! two places hold pairs of the same rank, the leftmost goes first.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

use crate::vocab::TokenId;

/// The merge list as a lookup table: (left, right) -> (rank, fused token).
#[derive(Clone, Debug, Default)]
pub struct Merges {
    table: HashMap<u64, (u32, TokenId), BuildHasherDefault<PairHasher>>, // key: left << 32 | right
}

/// A multiply-and-fold hash for the pair keys. std's default, SipHash, resists an attacker
/// choosing keys that collide; these keys are pairs of token ids from a fixed vocabulary, and
/// the lookup sits in the innermost loop, so a hash that costs one multiplication is enough.
#[derive(Default)]
pub struct PairHasher(u64);

impl Hasher for PairHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(self.0.rotate_left(8) ^ u64::from(b));
        }
    }
    fn write_u64(&mut self, key: u64) {
        let x = key.wrapping_mul(0x9E37_79B9_7F4A_7C15); // 2^64 / golden ratio, odd
        self.0 = x ^ (x >> 32); // fold the well-mixed high bits into the low ones
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

fn key(left: TokenId, right: TokenId) -> u64 {
    (u64::from(left) << 32) | u64::from(right)
}

impl Merges {
    /// `pairs[rank] = (left, right, fused)`. A pair listed twice keeps its first rank,
    /// as in llama.cpp.
    pub fn new(pairs: &[(TokenId, TokenId, TokenId)]) -> Merges {
        let mut table = HashMap::with_capacity_and_hasher(pairs.len(), Default::default());
        for (rank, &(left, right, fused)) in pairs.iter().enumerate() {
            table
                .entry(key(left, right))
                .or_insert((rank as u32, fused));
        }
        Merges { table }
    }

    /// Rank and fused token of a pair, if the pair is in the list.
    pub fn get(&self, left: TokenId, right: TokenId) -> Option<(u32, TokenId)> {
        self.table.get(&key(left, right)).copied()
    }

    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }
}

// ANCHOR: merge_naive
/// The reference: scan every adjacent pair, fuse the lowest-ranked one, repeat.
///
/// Each round scans the whole piece and `Vec::remove` shifts its tail, and there can be
/// up to n - 1 rounds: O(n²) for a piece of n bytes.
pub fn merge_naive(merges: &Merges, tokens: &mut Vec<TokenId>) {
    loop {
        let mut best: Option<(u32, usize, TokenId)> = None; // (rank, position, fused)
        for i in 0..tokens.len().saturating_sub(1) {
            if let Some((rank, fused)) = merges.get(tokens[i], tokens[i + 1])
                && best.is_none_or(|(best_rank, _, _)| rank < best_rank)
            {
                best = Some((rank, i, fused)); // strict `<`: the leftmost wins a tie
            }
        }
        let Some((_, i, fused)) = best else { return };
        tokens[i] = fused;
        tokens.remove(i + 1);
    }
}
// ANCHOR_END: merge_naive

// ANCHOR: merge_fast
/// One token of the piece being merged, in a doubly linked list over a `Vec`.
#[derive(Clone, Copy)]
struct Symbol {
    token: TokenId,
    prev: Option<usize>,
    next: Option<usize>,
    alive: bool, // false once fused into its left neighbour
}

/// A candidate merge in the queue, packed as `rank << 32 | left position` so that the
/// smallest value is the lowest rank, then the leftmost pair. `Reverse` turns Rust's max-heap
/// into the min-heap we need. Eight bytes keep the heap's sifting cheap.
type Candidate = Reverse<u64>;

/// The heap + linked list merge. It keeps its two buffers between pieces: most pieces are a
/// few bytes long, and allocating for each would cost more than the merging.
#[derive(Default)]
pub struct HeapMerger {
    syms: Vec<Symbol>,           // (piece_len) the linked list
    heap: BinaryHeap<Candidate>, // candidate merges, stale ones included
}
// ANCHOR_END: merge_fast

// ANCHOR: merge_fast_loop
impl HeapMerger {
    /// The same result as [`merge_naive`] in O(n log n): every adjacent pair goes into a
    /// priority queue once, and a fusion only creates the two new pairs around it. Entries
    /// that went stale (a side was fused since) are recognised and skipped when popped.
    pub fn merge(&mut self, merges: &Merges, tokens: &mut Vec<TokenId>) {
        let n = tokens.len();
        if n < 2 {
            return; // nothing to pair up
        }
        if n > u32::MAX as usize {
            return merge_naive(merges, tokens); // positions must fit in the packed candidate
        }
        let (syms, heap) = (&mut self.syms, &mut self.heap);
        syms.clear();
        heap.clear();
        syms.extend((0..n).map(|i| Symbol {
            token: tokens[i],
            prev: i.checked_sub(1),
            next: (i + 1 < n).then_some(i + 1),
            alive: true,
        }));
        for i in 0..n - 1 {
            push_candidate(merges, syms, heap, i);
        }
        while let Some(Reverse(packed)) = heap.pop() {
            let (rank, left) = ((packed >> 32) as u32, (packed & 0xFFFF_FFFF) as usize);
            // Stale if the left symbol was fused away or its pair is no longer this merge:
            // a rank names exactly one pair of tokens.
            let l = syms[left];
            let Some(right) = l.next.filter(|_| l.alive) else {
                continue;
            };
            let r = syms[right];
            let Some((_, fused)) = merges.get(l.token, r.token).filter(|&(rk, _)| rk == rank)
            else {
                continue;
            };
            syms[left].token = fused;
            syms[left].next = r.next;
            syms[right].alive = false;
            if let Some(after) = r.next {
                syms[after].prev = Some(left);
            }
            if let Some(before) = l.prev {
                push_candidate(merges, syms, heap, before);
            }
            push_candidate(merges, syms, heap, left);
        }
        tokens.clear();
        tokens.extend(syms.iter().filter(|s| s.alive).map(|s| s.token));
    }
}
// ANCHOR_END: merge_fast_loop

// ANCHOR: merge_fast_push
fn push_candidate(merges: &Merges, syms: &[Symbol], heap: &mut BinaryHeap<Candidate>, left: usize) {
    let Some(right) = syms[left].next else { return };
    if let Some((rank, _)) = merges.get(syms[left].token, syms[right].token) {
        heap.push(Reverse((u64::from(rank) << 32) | left as u64));
    }
}

/// [`HeapMerger::merge`] for a single piece.
pub fn merge_fast(merges: &Merges, tokens: &mut Vec<TokenId>) {
    HeapMerger::default().merge(merges, tokens);
}

/// Pieces shorter than this many bytes go through the naive loop even in the fast encoder:
/// for a handful of tokens, one scan of a short array beats the heap's bookkeeping
/// (measured with the `ch02_encode` bench; the crossover is around 12 to 24 bytes).
pub const HEAP_MIN_LEN: usize = 16;
// ANCHOR_END: merge_fast_push

#[cfg(test)]
mod tests {
    use super::*;

    // Tokens 0..=3 are a, b, c, d; the merges build ab (4), cd (5), abcd (6), bc (7).
    fn toy() -> Merges {
        Merges::new(&[(0, 1, 4), (2, 3, 5), (4, 5, 6), (1, 2, 7)])
    }

    #[test]
    fn lowest_rank_first() {
        // "abcd": ab (rank 0) beats bc (rank 3), then cd, then ab+cd.
        let mut t = vec![0, 1, 2, 3];
        merge_naive(&toy(), &mut t);
        assert_eq!(t, [6]);
        // "bcd": ab is impossible, cd (rank 1) beats bc (rank 3).
        let mut t = vec![1, 2, 3];
        merge_naive(&toy(), &mut t);
        assert_eq!(t, [1, 5]);
    }

    #[test]
    fn ties_go_to_the_leftmost_pair() {
        // a a a with "aa" -> 9: the left pair fuses first, leaving [aa, a].
        let m = Merges::new(&[(0, 0, 9)]);
        for merge in [merge_naive, merge_fast] {
            let mut t = vec![0, 0, 0];
            merge(&m, &mut t);
            assert_eq!(t, [9, 0]);
        }
    }

    #[test]
    fn fast_equals_naive_on_every_short_piece() {
        let m = Merges::new(&[
            (0, 1, 4),
            (2, 3, 5),
            (4, 5, 6),
            (1, 2, 7),
            (7, 3, 8),
            (0, 0, 9),
            (9, 9, 10),
        ]);
        // Every string of length 0..=6 over {a, b, c, d}.
        for len in 0..=6u32 {
            for code in 0..4u32.pow(len) {
                let piece: Vec<TokenId> = (0..len).map(|i| (code / 4u32.pow(i)) % 4).collect();
                let (mut slow, mut fast) = (piece.clone(), piece.clone());
                merge_naive(&m, &mut slow);
                merge_fast(&m, &mut fast);
                assert_eq!(fast, slow, "piece {piece:?}");
            }
        }
    }
}
