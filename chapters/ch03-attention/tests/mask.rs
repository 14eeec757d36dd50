//! Masks: hand-drawn small cases, and the predicate, range and matrix forms agreeing.

use ch03_attention::mask::{Mask, causal_allowed, sliding_window_allowed};

/// Renders which keys each query may see, one row per query, `#` allowed, `.` masked.
fn picture(mask: Mask, seq: usize) -> Vec<String> {
    (0..seq)
        .map(|q| {
            (0..seq)
                .map(|k| if mask.allowed(q, k) { '#' } else { '.' })
                .collect()
        })
        .collect()
}

#[test]
fn causal_mask_by_hand() {
    assert_eq!(picture(Mask::Causal, 4), ["#...", "##..", "###.", "####"]);
    assert!(causal_allowed(3, 3), "a token sees itself");
    assert!(!causal_allowed(2, 3), "token 2 must not see token 3");
}

#[test]
fn sliding_window_by_hand() {
    // window 3: each token sees itself and the two before it.
    assert_eq!(
        picture(Mask::SlidingWindow(3), 6),
        ["#.....", "##....", "###...", ".###..", "..###.", "...###"]
    );
    assert!(
        sliding_window_allowed(5, 3, 3),
        "position 5 sees 3 with window 3"
    );
    assert!(
        !sliding_window_allowed(5, 2, 3),
        "position 5 must not see 2 with window 3"
    );
    assert!(
        !sliding_window_allowed(2, 5, 3),
        "no future keys, however wide the window"
    );
    // Gemma-3's local layers: 512 positions, itself included.
    assert!(sliding_window_allowed(1000, 489, 512));
    assert!(!sliding_window_allowed(1000, 488, 512));
}

#[test]
fn sliding_window_equals_causal_when_it_covers_the_sequence() {
    for seq in 1..24 {
        for window in [seq, seq + 1, 512] {
            assert_eq!(
                picture(Mask::SlidingWindow(window), seq),
                picture(Mask::Causal, seq),
                "window {window} ≥ seq {seq} must be plain causal"
            );
        }
        if seq > 1 {
            assert_ne!(
                picture(Mask::SlidingWindow(seq - 1), seq),
                picture(Mask::Causal, seq)
            );
        }
    }
}

#[test]
fn visible_range_is_exactly_the_allowed_keys() {
    for mask in [
        Mask::Causal,
        Mask::SlidingWindow(1),
        Mask::SlidingWindow(3),
        Mask::SlidingWindow(8),
    ] {
        for seq_k in 1..12 {
            for q in 0..seq_k {
                let range = mask.visible(q, seq_k);
                for k in 0..seq_k {
                    assert_eq!(
                        range.contains(&k),
                        mask.allowed(q, k),
                        "{mask:?} q={q} k={k}"
                    );
                }
            }
        }
    }
}

#[test]
fn additive_mask_is_zero_or_minus_infinity() {
    let m = Mask::Causal.additive(3, 3);
    let ninf = f32::NEG_INFINITY;
    assert_eq!(m, [0.0, ninf, ninf, 0.0, 0.0, ninf, 0.0, 0.0, 0.0]);

    // Two new queries over five keys: they are positions 3 and 4.
    let m = Mask::SlidingWindow(2).additive(2, 5);
    assert_eq!(m, [ninf, ninf, 0.0, 0.0, ninf, ninf, ninf, ninf, 0.0, 0.0]);

    for mask in [Mask::Causal, Mask::SlidingWindow(4)] {
        let (seq_q, seq_k) = (6, 10);
        let m = mask.additive(seq_q, seq_k);
        for i in 0..seq_q {
            for j in 0..seq_k {
                let want = if mask.allowed(seq_k - seq_q + i, j) {
                    0.0
                } else {
                    ninf
                };
                assert_eq!(m[i * seq_k + j], want, "{mask:?} row {i} column {j}");
            }
        }
    }
}
