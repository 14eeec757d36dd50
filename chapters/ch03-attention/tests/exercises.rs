#![cfg(feature = "exercises")]
//! Tests for the chapter 3 exercises: `cargo xtask exercises ch03`, or
//! `cargo test -p ch03-attention --features exercises --test exercises`.
//! Each one checks your function against the chapter's implementation and against
//! cases worked out by hand.

use ch01_tensors::ops;
use ch03_attention::attention::{Heads, attention};
use ch03_attention::exercises;
use ch03_attention::mask::{self, Mask};
use ch03_attention::rope::{Pairing, RopeTable};

fn describe(x: f32) -> &'static str {
    if x == 0.0 {
        "0 (may look)"
    } else if x == f32::NEG_INFINITY {
        "-inf (masked)"
    } else {
        "neither 0 nor -inf"
    }
}

#[test]
fn ex1_causal_mask() {
    let ninf = f32::NEG_INFINITY;
    assert_eq!(
        exercises::causal_mask(3),
        [0.0, ninf, ninf, 0.0, 0.0, ninf, 0.0, 0.0, 0.0],
        "the 3-token causal mask, row by row: [0 -inf -inf] [0 0 -inf] [0 0 0]"
    );
    for seq in 0..12 {
        let got = exercises::causal_mask(seq);
        assert_eq!(
            got.len(),
            seq * seq,
            "the mask for {seq} tokens must be ({seq}, {seq})"
        );
        let want = Mask::Causal.additive(seq, seq);
        for i in 0..seq {
            for j in 0..seq {
                let (g, w) = (got[i * seq + j], want[i * seq + j]);
                if g.to_bits() != w.to_bits() {
                    panic!(
                        "row {i} of the {seq}-token causal mask, column {j}: got {g} ({}), want {w} ({}): \
                         token {i} {} see token {j}",
                        describe(g),
                        describe(w),
                        if j <= i { "must" } else { "must not" }
                    );
                }
            }
        }
    }
}

#[test]
fn ex2_sliding_window_mask() {
    // Hand cases: window 3 at position 5 sees 3, 4, 5.
    for (q, k, window, want) in [
        (5, 5, 3, true),
        (5, 3, 3, true),
        (5, 2, 3, false),
        (2, 5, 3, false),
        (0, 0, 1, true),
        (1, 0, 1, false),
        (1000, 489, 512, true),
        (1000, 488, 512, false),
    ] {
        assert_eq!(
            exercises::sliding_window_allowed(q, k, window),
            want,
            "with a window of {window}, position {q} {} see position {k}",
            if want { "must" } else { "must not" }
        );
    }
    for window in 1..8 {
        for q in 0..12 {
            for k in 0..12 {
                let want = mask::sliding_window_allowed(q, k, window);
                assert_eq!(
                    exercises::sliding_window_allowed(q, k, window),
                    want,
                    "window {window}: position {q} {} see position {k}",
                    if want { "must" } else { "must not" }
                );
            }
        }
    }
}

#[test]
fn ex3_rope_one_vector() {
    // d = 4, θ = 10 000, position 1: pair (x0, x2) turns 1 rad, pair (x1, x3) 0.01 rad.
    let mut x = [1.0, 2.0, 3.0, 4.0];
    exercises::rope_split_halves(&mut x, 1, 10_000.0);
    let want = [-1.984_110_6, 1.959_900_7, 2.462_377_9, 4.019_799_7];
    for (i, (g, w)) in x.iter().zip(want).enumerate() {
        // 1e-5: f32 rounding of cos, sin and two products is ~1e-7 relative.
        assert!(
            (g - w).abs() < 1e-5,
            "[1, 2, 3, 4] at position 1: coordinate {i} should be {w}, got {g} \
             (pairs are (x[i], x[i + d/2]), not neighbours)"
        );
    }
    let mut zero = [0.5, -1.5, 2.0, 7.0];
    exercises::rope_split_halves(&mut zero, 0, 10_000.0);
    assert_eq!(
        zero,
        [0.5, -1.5, 2.0, 7.0],
        "position 0 must leave the vector unchanged"
    );

    for theta in [10_000.0f32, 100_000.0, 1_000_000.0] {
        let table = RopeTable::new(64, 600, theta).unwrap();
        for pos in [1, 2, 31, 599] {
            let x: Vec<f32> = (0..64)
                .map(|i| ((i * 37 % 11) as f32 - 5.0) / 3.0)
                .collect();
            let (mut got, mut want) = (x.clone(), x.clone());
            exercises::rope_split_halves(&mut got, pos, theta);
            table.rotate(&mut want, pos, Pairing::SplitHalves);
            for i in 0..64 {
                assert!(
                    (got[i] - want[i]).abs() < 1e-5,
                    "θ = {theta}, position {pos}: coordinate {i} is {} but the chapter's RoPE gives {}",
                    got[i],
                    want[i]
                );
            }
        }
    }
}

#[test]
fn ex4_gqa_decode_step() {
    // Which KV head each query head reads: make KV head g's values all equal to g, so that
    // every output coordinate of query head h names the KV head it read.
    let heads = Heads::new(9, 3, 4).unwrap();
    let seq_k = 5;
    let k: Vec<f32> = (0..seq_k * 12)
        .map(|i| ((i * 7 % 13) as f32 - 6.0) / 6.0)
        .collect();
    let v: Vec<f32> = (0..seq_k * 12).map(|i| ((i % 12) / 4) as f32).collect(); // KV head g → g
    let q: Vec<f32> = (0..36).map(|i| ((i * 5 % 9) as f32 - 4.0) / 4.0).collect();
    let mut out = vec![0.0; 36];
    exercises::decode_step(&mut out, &q, &k, &v, heads);
    for h in 0..9 {
        let read = out[h * 4];
        assert!(
            (read - (h / 3) as f32).abs() < 1e-5,
            "query head {h} read the values of KV head {read:.2}, but with 9 query heads over 3 KV \
             heads it shares KV head {}",
            h / 3
        );
    }

    // One head, two keys, by hand: scores (1/√2, 0) → weights (0.669762, 0.330238),
    // out = 0.669762·(1, 2) + 0.330238·(3, 4) = (1.660477, 2.660477).
    let one = Heads::new(1, 1, 2).unwrap();
    let mut out = [0.0; 2];
    exercises::decode_step(
        &mut out,
        &[1.0, 0.0],
        &[1.0, 0.0, 0.0, 1.0],
        &[1.0, 2.0, 3.0, 4.0],
        one,
    );
    assert!(
        (out[0] - 1.660_477).abs() < 1e-5 && (out[1] - 2.660_477).abs() < 1e-5,
        "q=(1,0) over keys (1,0),(0,1) with values (1,2),(3,4) should give (1.660477, 2.660477), got {out:?} \
         (did you scale the scores by 1/√head_dim?)"
    );

    // Against the chapter's kernel, SmolLM2's and Gemma-3's layouts.
    for (nh, nkv, d, seq_k) in [(9, 3, 64, 17), (4, 1, 256, 9), (2, 2, 8, 1)] {
        let heads = Heads::new(nh, nkv, d).unwrap();
        let q: Vec<f32> = (0..heads.q_dim())
            .map(|i| ((i * 31 % 17) as f32 - 8.0) / 8.0)
            .collect();
        let k: Vec<f32> = (0..seq_k * heads.kv_dim())
            .map(|i| ((i * 13 % 19) as f32 - 9.0) / 9.0)
            .collect();
        let v: Vec<f32> = (0..seq_k * heads.kv_dim())
            .map(|i| ((i * 11 % 23) as f32 - 11.0) / 11.0)
            .collect();
        let mut got = vec![0.0; heads.q_dim()];
        let mut want = vec![0.0; heads.q_dim()];
        exercises::decode_step(&mut got, &q, &k, &v, heads);
        attention(&mut want, &q, &k, &v, heads, Mask::Causal);
        for i in 0..got.len() {
            // 1e-5: the same arithmetic, possibly summed in another order.
            assert!(
                (got[i] - want[i]).abs() < 1e-5,
                "{nh} query heads over {nkv} KV heads, {seq_k} cached tokens: output {i} (head {}) is {} \
                 but attention() gives {}",
                i / d,
                got[i],
                want[i]
            );
        }
    }
}

#[test]
fn ex5_online_softmax() {
    // By hand: scores 1, 3: max 3, sum e^(1−3) + e^0 = 1.1353353.
    let (m, l) = exercises::online_max_sum(&[1.0, 3.0]);
    assert_eq!(m, 3.0, "the max of [1, 3] is 3");
    assert!(
        (l - 1.135_335_3).abs() < 1e-6,
        "Σ exp(x − 3) over [1, 3] is 1.1353353, got {l}"
    );

    let (m, l) = exercises::online_max_sum(&[1000.0, 1001.0, 999.0]);
    assert!(
        l.is_finite(),
        "scores near 1000 overflowed: exp(1000) is infinite in f32, subtract the running max"
    );
    assert_eq!(m, 1001.0);
    let want = (-1.0f32).exp() + 1.0 + (-2.0f32).exp();
    assert!(
        (l - want).abs() < 1e-5,
        "for [1000, 1001, 999] the sum is e^-1 + 1 + e^-2 = {want}, got {l}"
    );

    assert_eq!(
        exercises::online_max_sum(&[]),
        (f32::NEG_INFINITY, 0.0),
        "nothing seen: (-inf, 0)"
    );

    // Increasing scores move the max at every step: each one needs the rescale.
    let rising: Vec<f32> = (0..40).map(|i| i as f32 * 0.5).collect();
    let rows = [
        rising,
        vec![2.0, -1.0, 5.0, 5.0, 0.5, -7.0, 4.9],
        vec![-3.0; 6],
    ];
    for row in rows {
        let (m, l) = exercises::online_max_sum(&row);
        let two_pass_max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let two_pass_sum: f32 = row.iter().map(|x| (x - two_pass_max).exp()).sum();
        assert_eq!(
            m, two_pass_max,
            "the running max must end at the max of {row:?}"
        );
        // 1e-5 relative: rescaled partial sums round a few ulps differently from the direct sum.
        assert!(
            (l - two_pass_sum).abs() <= 1e-5 * two_pass_sum,
            "for {row:?} the sum should be {two_pass_sum}, got {l}: was the old sum rescaled \
             by exp(old max − new max) each time the max grew?"
        );
        // The pair gives the softmax: exp(x − m) / l.
        let mut sm = row.clone();
        ops::softmax_inplace(&mut sm);
        for (x, p) in row.iter().zip(&sm) {
            assert!(((x - m).exp() / l - p).abs() < 1e-6);
        }
    }
}
