#![cfg(feature = "exercises")]
//! One test per exercise: each checks your function against the chapter's own code and
//! against cases worked out by hand.

use ch03_attention::{Heads, Mask};
use ch05_kv_cache::attend::attend;
use ch05_kv_cache::exercises::*;
use ch05_kv_cache::paged::BlockTable;
use ch05_kv_cache::session::reusable;
use ch05_kv_cache::{KvCache, KvLayout, KvStore, RingCache};

fn noise(n: usize, seed: u64) -> Vec<f32> {
    ch01_tensors::random::uniform(n, seed)
}

#[test]
fn ex1_append_to_the_cache() {
    let (heads, max_pos, d) = (3, 5, 4);
    let row: Vec<f32> = (1..=12).map(|i| i as f32).collect(); // head 0: 1..4, head 1: 5..8, head 2: 9..12
    let mut plane = vec![0.0f32; heads * max_pos * d];
    write_row(&mut plane, &row, 2, max_pos, d);
    for h in 0..heads {
        for pos in 0..max_pos {
            let slot = &plane[(h * max_pos + pos) * d..(h * max_pos + pos + 1) * d];
            if pos == 2 {
                assert_eq!(
                    slot,
                    &row[h * d..(h + 1) * d],
                    "head {h}'s slot for position 2 should hold head {h} of the row"
                );
            } else {
                assert_eq!(
                    slot, &[0.0; 4],
                    "head {h}, position {pos} was written, but only position 2 should be"
                );
            }
        }
    }
    // Against the chapter's KvCache (one layer): the same plane, written at several positions.
    let layout = KvLayout {
        n_layers: 1,
        n_kv_heads: heads,
        head_dim: d,
    };
    let mut cache = KvCache::new(layout, max_pos);
    let mut plane = vec![0.0f32; heads * max_pos * d];
    for pos in [4, 0, 3] {
        let r = noise(heads * d, pos as u64);
        cache.write(0, pos, &r, &r);
        write_row(&mut plane, &r, pos, max_pos, d);
    }
    for h in 0..heads {
        assert_eq!(
            &plane[h * max_pos * d..(h + 1) * max_pos * d],
            cache.keys(0, h),
            "head {h}'s plane differs from KvCache's"
        );
    }
}

#[test]
fn ex2_the_block_table_lookup() {
    let table = [7, 2, 5];
    assert_eq!(
        physical_slot(&table, 4, 9),
        21,
        "position 9 is in table entry 2 (block 5), offset 1: slot 5*4+1"
    );
    assert_eq!(
        physical_slot(&table, 4, 0),
        28,
        "position 0 is the first slot of block 7"
    );
    assert_eq!(
        physical_slot(&table, 4, 7),
        11,
        "position 7 is the last slot of block 2"
    );
    let t = BlockTable {
        blocks: vec![3, 0, 9, 4, 1],
    };
    for bs in [1, 4, 16] {
        for pos in 0..t.blocks.len() * bs {
            let (block, offset) = t.locate(pos, bs);
            assert_eq!(
                physical_slot(&t.blocks, bs, pos),
                block * bs + offset,
                "blocks of {bs}: position {pos} should be in block {block} at offset {offset}"
            );
        }
    }
}

#[test]
fn ex3_attention_over_a_paged_cache() {
    // By hand: a zero query weighs every position equally, so the output is the mean value.
    let (k_pool, v_pool) = (vec![1.0, 0.0, 0.0, 1.0], vec![2.0, 4.0, 6.0, 8.0]); // 2 blocks of 1 slot, head_dim 2
    let out = paged_attention(&[0.0, 0.0], &k_pool, &v_pool, &[1, 0], 1, 2);
    assert_eq!(
        out,
        [4.0, 6.0],
        "a zero query should average the two values [6, 8] and [2, 4]"
    );

    // Against the chapter's `attend` over a contiguous cache holding the same keys and values.
    let (d, bs, len) = (8, 4, 10);
    let table = [4, 1, 5];
    let (k, v, q) = (noise(len * d, 1), noise(len * d, 2), noise(d, 3)); // (len, d), (len, d), (d)
    let (mut k_pool, mut v_pool) = (vec![0.0f32; 6 * bs * d], vec![0.0f32; 6 * bs * d]);
    let layout = KvLayout {
        n_layers: 1,
        n_kv_heads: 1,
        head_dim: d,
    };
    let mut cache = KvCache::new(layout, len);
    for j in 0..len {
        let s = table[j / bs] * bs + j % bs;
        k_pool[s * d..(s + 1) * d].copy_from_slice(&k[j * d..(j + 1) * d]);
        v_pool[s * d..(s + 1) * d].copy_from_slice(&v[j * d..(j + 1) * d]);
        cache.write(0, j, &k[j * d..(j + 1) * d], &v[j * d..(j + 1) * d]);
    }
    let mut expected = vec![0.0f32; d];
    attend(
        &mut expected,
        &q,
        &cache,
        0,
        Heads {
            n_heads: 1,
            n_kv_heads: 1,
            head_dim: d,
        },
        len - 1,
        Mask::Causal,
        &mut Vec::new(),
    );
    let got = paged_attention(&q, &k_pool, &v_pool, &table, bs, len);
    assert_eq!(got.len(), d, "the output is one head: {d} floats");
    for (c, (g, e)) in got.iter().zip(&expected).enumerate() {
        assert!(
            (g - e).abs() <= 1e-5 * (1.0 + e.abs()),
            "coordinate {c}: attention through the block table gives {g}, the contiguous cache {e}"
        );
    }
}

#[test]
fn ex4_what_the_ring_buffer_holds() {
    assert_eq!(
        ring_contents(7, 3),
        [Some(6), Some(4), Some(5)],
        "window 3 after 7 writes: slot 0 holds 6, slot 1 holds 4, slot 2 holds 5"
    );
    assert_eq!(
        ring_contents(2, 4),
        [Some(0), Some(1), None, None],
        "2 writes into 4 slots leave slots 2 and 3 empty"
    );
    assert_eq!(
        ring_contents(0, 2),
        [None, None],
        "nothing written, nothing held"
    );
    // Against the chapter's RingCache: write position p as the key value p + 1 (0 = empty).
    for (written, window) in [(1, 1), (9, 4), (12, 4), (5, 8), (100, 7)] {
        let layout = KvLayout {
            n_layers: 1,
            n_kv_heads: 1,
            head_dim: 1,
        };
        let mut ring = RingCache::new(layout, &[Some(window)], 1000).unwrap();
        for p in 0..written {
            ring.write(0, p, &[p as f32 + 1.0], &[0.0]);
        }
        let held: Vec<Option<usize>> = (0..window)
            .map(|s| {
                Some(ring.key(0, 0, s)[0] as usize)
                    .filter(|&v| v > 0)
                    .map(|v| v - 1)
            })
            .collect();
        assert_eq!(
            ring_contents(written, window),
            held,
            "window {window} after {written} writes"
        );
    }
}

#[test]
fn ex5_how_much_of_a_session_to_keep() {
    assert_eq!(
        positions_to_keep(&[5, 6, 7, 8], &[5, 6, 9]),
        2,
        "[5, 6] is shared; 9 is new"
    );
    assert_eq!(
        positions_to_keep(&[5, 6, 7, 8], &[5, 6]),
        1,
        "all of [5, 6] is cached, but 6 must be recomputed for its logits"
    );
    assert_eq!(
        positions_to_keep(&[], &[1, 2]),
        0,
        "an empty session keeps nothing"
    );
    assert_eq!(
        positions_to_keep(&[1, 2], &[]),
        0,
        "wanting nothing keeps nothing"
    );
    assert_eq!(
        positions_to_keep(&[3, 1, 2], &[1, 2, 3]),
        0,
        "the prefix must match from position 0"
    );
    // Against the rule Session::sync uses.
    let ids = |seed: u64, n: usize| {
        noise(n, seed)
            .iter()
            .map(|x| (x.abs() * 3.0) as u32)
            .collect::<Vec<u32>>()
    };
    for seed in 0..200 {
        let (a, b) = (
            ids(seed, (seed % 7) as usize),
            ids(seed + 1000, (seed % 5) as usize),
        );
        assert_eq!(
            positions_to_keep(&a, &b),
            reusable(&a, &b),
            "cached {a:?}, wanted {b:?}"
        );
    }
}

#[test]
fn ex6_which_keys_a_window_reads() {
    assert_eq!(
        window_slots(9, 4, 6),
        [(6, 0), (7, 1), (8, 2), (9, 3)],
        "position 9 with a window of 4 sees positions 6 to 9; in 6 slots they sit in slots 0 to 3"
    );
    assert_eq!(
        window_slots(2, 4, 4),
        [(0, 0), (1, 1), (2, 2)],
        "position 2 sees only positions 0, 1 and 2: the text has nothing before position 0"
    );
    assert_eq!(
        window_slots(13, 4, 4),
        [(10, 2), (11, 3), (12, 0), (13, 1)],
        "position 13 with a window of 4 in 4 slots: positions 10 to 13, and the ring has wrapped \
         (12 and 13 went back to slots 0 and 1)"
    );
    assert_eq!(
        window_slots(5, 1, 3),
        [(5, 2)],
        "a window of 1 sees only its own position"
    );
    // Against the chapter's mask and ring, with as many slots as the window.
    let layout = KvLayout {
        n_layers: 1,
        n_kv_heads: 1,
        head_dim: 1,
    };
    for window in [1, 3, 4, 7] {
        let ring = RingCache::new(layout, &[Some(window)], 1000).unwrap();
        for pos in 0..30 {
            let seen = Mask::SlidingWindow(window).visible(pos, pos + 1);
            let want: Vec<(usize, usize)> = seen.map(|p| (p, ring.slot(0, p))).collect();
            assert_eq!(
                window_slots(pos, window, window),
                want,
                "position {pos}, window {window}: the mask sees {:?}, in the ring's slots",
                Mask::SlidingWindow(window).visible(pos, pos + 1)
            );
        }
    }
    // Why chapter 8's ring has window + chunk slots: a prefill chunk writes all its keys
    // before any of them attends, and no key a query of the chunk reads may have been
    // overwritten by then (the latest write to slot s is the one that stays).
    let (window, chunk) = (4, 3);
    for c0 in (0..20).step_by(chunk) {
        let written = c0 + chunk; // positions 0..written are in the ring
        for pos in c0..written {
            for (p, slot) in window_slots(pos, window, window + chunk) {
                assert!(
                    p + window + chunk >= written,
                    "chunk {c0}..{written}: position {pos} reads position {p} in slot {slot}, \
                     but position {} overwrote that slot when the chunk was written",
                    p + window + chunk
                );
            }
        }
    }
}
