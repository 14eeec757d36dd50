#![cfg(feature = "exercises")]
//! One test per exercise.

use ch10_batching::exercises::*;
use ch10_batching::prefix::PrefixIndex;

#[test]
fn ex1_release() {
    let mut refs = vec![2, 1, 0];
    let mut free = vec![2];
    assert!(
        !release(&mut refs, &mut free, 0),
        "block 0 had two holders: after one lets go it is still in use, not free"
    );
    assert_eq!(refs[0], 1, "releasing block 0 once should leave one holder");
    assert_eq!(free, [2], "a block still held must not go on the free list");
    assert!(
        release(&mut refs, &mut free, 0),
        "the last holder let go of block 0: it is free"
    );
    assert!(
        release(&mut refs, &mut free, 1),
        "block 1 had one holder: releasing it frees it"
    );
    assert_eq!(
        free,
        [2, 0, 1],
        "freed blocks go at the end of the free list, in the order freed"
    );
    assert_eq!(refs, [0, 0, 0]);
}

#[test]
fn ex2_step_rows() {
    for (pending, budget, want) in [
        (vec![1, 1, 1], 8, vec![1, 1, 1]),
        (vec![30, 1, 1], 8, vec![6, 1, 1]),
        (vec![5, 1, 20], 8, vec![5, 1, 2]),
        (vec![5, 1, 20], 1, vec![0, 1, 0]),
        (vec![10, 4], 100, vec![10, 4]),
    ] {
        let got = step_rows(&pending, budget);
        assert!(
            got == want,
            "pending {pending:?} (1 = decoding), budget {budget}: rows {want:?} (decode rows first, then prompts oldest first), you gave {got:?}"
        );
    }
}

#[test]
fn ex3_block_keys() {
    let tokens: Vec<u32> = (100..110).collect();
    let keys = block_keys(&tokens, 4);
    assert_eq!(
        keys.len(),
        2,
        "10 tokens in blocks of 4: two full blocks have keys, the last 2 tokens none"
    );
    let mut ix = PrefixIndex::default();
    let k0 = ix.insert(None, &tokens[0..4], 0);
    let k1 = ix.insert(Some(k0), &tokens[4..8], 1);
    assert_eq!(keys[0], k0, "block 0's key is block_key(None, its tokens)");
    assert_eq!(
        keys[1], k1,
        "block 1's key is block_key(block 0's key, its tokens): the chain"
    );
    let mut other = tokens.clone();
    other[0] = 7;
    assert_ne!(
        block_keys(&other, 4)[1],
        k1,
        "a different first block must change the second block's key too"
    );
}

#[test]
fn ex4_choose_victim() {
    let running = [(0, true), (3, false), (5, false), (7, true)];
    assert_eq!(
        choose_victim(&running, 0),
        Some(5),
        "7 already has its row this step; the youngest without one is 5"
    );
    assert_eq!(
        choose_victim(&running, 5),
        None,
        "for 5, only 3 (older) is left without a row: 5 itself gives way"
    );
    assert_eq!(
        choose_victim(&[(2, false)], 2),
        None,
        "alone, a sequence can only preempt itself"
    );
    assert_eq!(choose_victim(&[(1, false), (4, false)], 1), Some(4));
}
