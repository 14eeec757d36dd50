//! RoPE: hand-computed rotations, the table, and the properties that make it work.

mod common;

use approx::assert_relative_eq;
use ch01_tensors::ops;
use ch03_attention::rope::{Pairing, RopeTable, halves_to_adjacent, permute_qk_rows};
use common::{Rng, max_diff};

#[test]
fn position_zero_is_the_identity() {
    let rope = RopeTable::new(8, 4, 10_000.0).unwrap();
    let x: Vec<f32> = (1..=8).map(|v| v as f32).collect();
    for pairing in [Pairing::Adjacent, Pairing::SplitHalves] {
        let mut y = x.clone();
        rope.rotate(&mut y, 0, pairing);
        // cos 0 = 1 and sin 0 = 0 exactly, so nothing moves, not even by a rounding.
        assert_eq!(
            y, x,
            "{pairing:?}: position 0 must leave the vector untouched"
        );
    }
}

#[test]
fn hand_computed_rotation_d4() {
    // d = 4, θ = 10 000: pair 0 turns θ^0 = 1 rad per position, pair 1 θ^(−2/4) = 0.01 rad.
    // At position 1, with cos 1 = 0.540302306, sin 1 = 0.841470985,
    // cos 0.01 = 0.999950000, sin 0.01 = 0.009999833:
    let rope = RopeTable::new(4, 2, 10_000.0).unwrap();

    // Split halves: pairs (x0, x2) = (1, 3) by 1 rad and (x1, x3) = (2, 4) by 0.01 rad.
    //   x0' = 1·cos1 − 3·sin1 = −1.984110649    x2' = 1·sin1 + 3·cos1 = 2.462377903
    //   x1' = 2·cos.01 − 4·sin.01 = 1.959900667 x3' = 2·sin.01 + 4·cos.01 = 4.019799668
    let mut x = [1.0, 2.0, 3.0, 4.0];
    rope.rotate(&mut x, 1, Pairing::SplitHalves);
    let want = [-1.984_110_6, 1.959_900_7, 2.462_377_9, 4.019_799_7];
    // 1e-6: the f32 table entries and two products each round to ~6e-8 relative.
    for (got, want) in x.iter().zip(want) {
        assert_relative_eq!(*got, want, max_relative = 1e-6);
    }

    // Adjacent pairs: (x0, x1) = (1, 2) by 1 rad and (x2, x3) = (3, 4) by 0.01 rad.
    //   x0' = cos1 − 2·sin1 = −1.142639664     x1' = sin1 + 2·cos1 = 1.922075597
    //   x2' = 3·cos.01 − 4·sin.01 = 2.959850667 x3' = 3·sin.01 + 4·cos.01 = 4.029799500
    let mut x = [1.0, 2.0, 3.0, 4.0];
    rope.rotate(&mut x, 1, Pairing::Adjacent);
    let want = [-1.142_639_7, 1.922_075_6, 2.959_850_7, 4.029_799_5];
    for (got, want) in x.iter().zip(want) {
        assert_relative_eq!(*got, want, max_relative = 1e-6);
    }
}

#[test]
fn table_holds_the_angles_for_each_base() {
    for theta in [10_000.0f32, 100_000.0, 1_000_000.0] {
        let (d, max_pos) = (64, 300);
        let rope = RopeTable::new(d, max_pos, theta).unwrap();
        assert_eq!(
            rope.cos.len(),
            max_pos * d / 2,
            "cos is (max_pos, head_dim/2)"
        );
        for (p, i) in [(1, 0), (7, 5), (299, 31), (123, 16)] {
            let angle = p as f64 * (theta as f64).powf(-2.0 * i as f64 / d as f64);
            // 1e-6 absolute: an f32 holding a value in [−1, 1] is within 6e-8 of it.
            assert!(
                (rope.cos[p * d / 2 + i] as f64 - angle.cos()).abs() < 1e-6,
                "θ={theta} p={p} i={i}"
            );
            assert!(
                (rope.sin[p * d / 2 + i] as f64 - angle.sin()).abs() < 1e-6,
                "θ={theta} p={p} i={i}"
            );
        }
        // The slowest pair turns θ^(−62/64) rad per token: a bigger base, a slower clock,
        // which is how long-context models keep far-apart positions distinguishable.
        let slowest = RopeTable::frequency_of(31, d, theta);
        assert_relative_eq!(
            slowest,
            (theta as f64).powf(-62.0 / 64.0),
            max_relative = 1e-12
        );
    }
    assert!(RopeTable::frequency_of(31, 64, 1e6) < RopeTable::frequency_of(31, 64, 1e4));
}

#[test]
fn rotation_preserves_length() {
    let rope = RopeTable::new(64, 512, 100_000.0).unwrap();
    let mut rng = Rng::new(1);
    for pos in [1, 17, 511] {
        let x = rng.vec(64);
        let mut y = x.clone();
        rope.rotate(&mut y, pos, Pairing::SplitHalves);
        // 1e-5 relative: a rotation is exact in real numbers; f32 adds ~1e-7 per coordinate.
        assert_relative_eq!(ops::dot(&y, &y), ops::dot(&x, &x), max_relative = 1e-5);
    }
}

#[test]
fn the_two_pairings_agree_under_the_permutation() {
    // adjacent-pairs RoPE of the permuted vector == the permutation of split-halves RoPE
    let (d, n_heads) = (64, 3);
    let rope = RopeTable::new(d, 100, 100_000.0).unwrap();
    let mut rng = Rng::new(2);
    let x = rng.vec(5 * n_heads * d); // (seq 5, n_heads * d)
    let mut split = x.clone();
    rope.apply(&mut split, n_heads, 40, Pairing::SplitHalves);
    let mut adjacent = halves_to_adjacent(&x, d);
    rope.apply(&mut adjacent, n_heads, 40, Pairing::Adjacent);
    // Exactly equal: both compute the same products of the same numbers in the same order;
    // only where they are stored differs.
    assert_eq!(
        adjacent,
        halves_to_adjacent(&split, d),
        "pairings disagree after the permutation"
    );
}

#[test]
fn permuting_weight_rows_permutes_the_projection() {
    // What a Hugging Face → GGUF converter does to q_proj/k_proj: W' = permute_rows(W),
    // so W'·x = permute(W·x), and adjacent RoPE on W'·x matches split RoPE on W·x.
    let (n_heads, d, cols) = (2, 8, 5);
    let mut rng = Rng::new(3);
    let w = rng.vec(n_heads * d * cols); // (n_heads * d, cols)
    let x = rng.vec(cols);
    let mut y = vec![0.0; n_heads * d];
    let mut y_perm = vec![0.0; n_heads * d];
    ops::matvec(&mut y, &w, &x);
    ops::matvec(&mut y_perm, &permute_qk_rows(&w, n_heads, d, cols), &x);
    assert_eq!(
        y_perm,
        halves_to_adjacent(&y, d),
        "row permutation of W must permute W·x"
    );
}

#[test]
fn scores_depend_only_on_relative_position() {
    // Rotating q to m and k to n gives the same q·k as rotating them to m+s and n+s.
    let d = 64;
    let rope = RopeTable::new(d, 4096, 100_000.0).unwrap();
    let mut rng = Rng::new(4);
    let (q, k) = (rng.vec(d), rng.vec(d));
    let score = |m: usize, n: usize, pairing| {
        let (mut qm, mut kn) = (q.clone(), k.clone());
        rope.rotate(&mut qm, m, pairing);
        rope.rotate(&mut kn, n, pairing);
        ops::dot(&qm, &kn)
    };
    for pairing in [Pairing::Adjacent, Pairing::SplitHalves] {
        for (m, n) in [(5, 2), (10, 10), (3, 0)] {
            let base = score(m, n, pairing);
            for shift in [1, 100, 4000] {
                // 2e-4 absolute on a score of size ~|q||k| ≈ 20: the two sides use different
                // table entries, each rounded to f32, over 64 products. That is ~1e-5 relative.
                let shifted = score(m + shift, n + shift, pairing);
                assert!(
                    (shifted - base).abs() < 2e-4,
                    "{pairing:?}: q·k at ({m},{n}) = {base} but at (+{shift}) = {shifted}"
                );
            }
        }
    }
    // And it really does depend on the distance, or the test above proves nothing.
    assert!((score(5, 2, Pairing::SplitHalves) - score(5, 4, Pairing::SplitHalves)).abs() > 1e-3);
}

#[test]
fn split_halves_permutation_moves_the_right_coordinates() {
    // d = 4: [a0 a1 | b0 b1] → [a0 b0 a1 b1]
    assert_eq!(
        halves_to_adjacent(&[1.0, 2.0, 3.0, 4.0], 4),
        vec![1.0, 3.0, 2.0, 4.0]
    );
    assert_eq!(max_diff(&halves_to_adjacent(&[0.0; 8], 4), &[0.0; 8]), 0.0);
}

#[test]
fn bad_tables_are_errors() {
    assert!(
        RopeTable::new(63, 8, 10_000.0).is_err(),
        "odd head_dim has an unpaired coordinate"
    );
    assert!(RopeTable::new(0, 8, 10_000.0).is_err());
    assert!(
        RopeTable::new(64, 8, 1.0).is_err(),
        "θ = 1 makes every pair turn at the same speed"
    );
    assert!(RopeTable::new(64, 8, f32::NAN).is_err());
}
