//! The sampling chain's own tests: each stage on hand-made logits, the trace, top-k's
//! selection against a full sort, and greedy. (`tests/` checks the draws' distribution.)

use super::*;

fn cands(logits: &[f32]) -> Vec<Candidate> {
    logits
        .iter()
        .enumerate()
        .map(|(i, &l)| Candidate {
            id: i as u32,
            logit: l,
        })
        .collect()
}

#[test]
fn each_stage_on_hand_made_logits() {
    let mut c = cands(&[1.0, 3.0, 2.0, 0.0]);
    top_k(&mut c, 2);
    assert_eq!(c.iter().map(|c| c.id).collect::<Vec<_>>(), [1, 2]);

    // probabilities of [ln 4, ln 3, ln 2, ln 1] are 0.4, 0.3, 0.2, 0.1
    let mut c = cands(&[4f32.ln(), 3f32.ln(), 2f32.ln(), 0.0]);
    top_k(&mut c, 0);
    top_p(&mut c, 0.65);
    assert_eq!(c.iter().map(|c| c.id).collect::<Vec<_>>(), [0, 1]);
    let mut c = cands(&[4f32.ln(), 3f32.ln(), 2f32.ln(), 0.0]);
    min_p(&mut c, 0.5); // keep p ≥ 0.2
    assert_eq!(c.iter().map(|c| c.id).collect::<Vec<_>>(), [0, 1, 2]);

    let mut l = vec![2.0, -2.0, 1.0];
    let cfg = SamplerConfig {
        repeat_penalty: 2.0,
        frequency_penalty: 0.5,
        presence_penalty: 0.25,
        ..Default::default()
    };
    apply_penalties(&mut l, &[0, 1, 1], &cfg);
    assert_eq!(l, [2.0 / 2.0 - 0.5 - 0.25, -2.0 * 2.0 - 1.0 - 0.25, 1.0]);
}

#[test]
fn the_trace_sees_every_stage_in_order_and_ends_with_the_survivors() {
    let cfg = SamplerConfig {
        temperature: 0.5,
        top_k: 3,
        top_p: 0.9,
        min_p: 0.2,
        ..Default::default()
    };
    let s = Sampler::new(cfg);
    let logits = [1.0, 3.0, 2.0, 0.0, 2.5];
    let mut seen = Vec::new();
    let out = s.survivors_traced(&logits, &[], &mut |stage, c| seen.push((stage, c.to_vec())));
    let names: Vec<&str> = seen.iter().map(|(s, _)| s.name()).collect();
    assert_eq!(
        names,
        ["penalties", "top-k", "top-p", "min-p", "temperature"]
    );
    assert_eq!(
        seen[0].1.len(),
        5,
        "the first stage sees the whole vocabulary"
    );
    assert_eq!(seen[1].1.len(), 3, "top-k 3 keeps three");
    assert_eq!(
        seen[4].1, out,
        "the last stage is what the draw chooses from"
    );
    assert_eq!(out, s.survivors(&logits, &[]));
    assert_eq!(out[0].logit, 3.0 / 0.5, "temperature divides the logits");
}

#[test]
fn top_k_selects_what_a_full_sort_keeps() {
    // many ties and a spread of values, in a scrambled order
    let logits: Vec<f32> = (0..5000u32)
        .map(|i| ((i.wrapping_mul(2_654_435_761) >> 20) % 97) as f32 / 7.0 - 5.0)
        .collect();
    for k in [1, 2, 40, 96, 97, 500, 4999, 5000, 6000, 0] {
        let mut want = cands(&logits);
        want.sort_by(|a, b| b.logit.total_cmp(&a.logit).then(a.id.cmp(&b.id)));
        if k > 0 && k < want.len() {
            want.truncate(k);
        }
        let mut got = cands(&logits);
        top_k(&mut got, k);
        assert_eq!(got, want, "top-k {k}");
    }
}

#[test]
fn greedy_is_the_chains_first_survivor() {
    let logits: Vec<f32> = (0..3000u32)
        .map(|i| ((i.wrapping_mul(40_503) >> 7) % 61) as f32 / 3.0)
        .collect();
    for (history, repeat_penalty) in [(vec![], 1.0), (vec![5, 9, 9, 2999], 1.3)] {
        let cfg = SamplerConfig {
            temperature: 0.0,
            repeat_penalty,
            frequency_penalty: 0.2,
            ..Default::default()
        };
        let mut s = Sampler::new(cfg);
        let first = s.survivors(&logits, &history)[0].id;
        assert_eq!(s.sample(&logits, &history), first);
    }
}

#[test]
fn temperature_zero_is_greedy_and_ties_go_to_the_lower_id() {
    let cfg = SamplerConfig {
        temperature: 0.0,
        ..Default::default()
    };
    let mut s = Sampler::new(cfg);
    assert_eq!(s.sample(&[0.5, 2.0, 2.0, 1.0], &[]), 1);
}

/// `first_max` against the one-pass loop it replaced (`total_cmp`, the first of equals), on
/// ties, signed zeros, infinities and NaN.
#[test]
fn first_max_is_the_first_largest_by_total_cmp() {
    let loop_max = |x: &[f32]| {
        let mut best = 0;
        for (i, l) in x.iter().enumerate() {
            if l.total_cmp(&x[best]).is_gt() {
                best = i;
            }
        }
        best
    };
    let mut rng = crate::rng::Rng::new(11);
    let specials = [
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        1e-45,
    ];
    for case in 0..500 {
        let n = (rng.next_u64() % 300) as usize;
        let levels = 1 + rng.next_u64() % 20;
        let mut x: Vec<f32> = (0..n)
            .map(|_| (rng.next_u64() % levels) as f32 * 0.5 - 4.0)
            .collect();
        if case % 3 == 0 && n > 0 {
            for _ in 0..3 {
                let at = (rng.next_u64() % n as u64) as usize;
                x[at] = specials[(rng.next_u64() % specials.len() as u64) as usize];
            }
        }
        assert_eq!(
            first_max(&x),
            loop_max(&x),
            "case {case}: greedy picks a different token from {x:?}"
        );
    }
    assert_eq!(first_max(&[]), 0, "no logits: token 0, as before");
}

#[test]
fn survivors_in_one_pass_equal_the_full_chain() {
    let mut rng = crate::rng::Rng::new(7);
    for case in 0..300 {
        let n = 1 + (rng.next_u64() % 3000) as usize;
        // few distinct values, so ties (and ties at the k-th place) are common
        let levels = 1 + rng.next_u64() % 50;
        let logits: Vec<f32> = (0..n)
            .map(|_| (rng.next_u64() % levels) as f32 * 0.25 - 3.0)
            .collect();
        let history: Vec<u32> = (0..rng.next_u64() % 80)
            .map(|_| (rng.next_u64() % n as u64) as u32)
            .collect();
        let penalties = case % 2 == 0;
        let cfg = SamplerConfig {
            top_k: 1 + (rng.next_u64() % 70) as usize,
            top_p: [1.0, 0.95, 0.5][case % 3],
            min_p: [0.0, 0.05, 0.3][(case / 3) % 3],
            temperature: [0.8, 1.0, 1.7][(case / 9) % 3],
            repeat_penalty: if penalties { 1.3 } else { 1.0 },
            frequency_penalty: if penalties { 0.2 } else { 0.0 },
            ..SamplerConfig::default()
        };
        let s = Sampler::new(cfg);
        let fast = s.survivors(&logits, &history);
        let full = s.survivors_traced(&logits, &history, &mut |_, _| {});
        assert_eq!(
            fast, full,
            "case {case}: the one-pass top-k kept other candidates than the chain's sort \
             (n {n}, top-k {})",
            s.config.top_k
        );
    }
}

/// Logits that are not numbers (a model whose weights overflow, or a GPU's run of one)
/// leave the chain one survivor, never none: a draw is a token, not a panic.
#[test]
fn nan_logits_leave_a_survivor() {
    for logits in [
        vec![f32::NAN; 6],
        vec![f32::NAN, 1.0, f32::NAN, 0.5, f32::NAN, 0.0],
    ] {
        for (top_k, min_p) in [(0, 0.05), (3, 0.05), (0, 0.0), (3, 0.9)] {
            let mut s = Sampler::new(SamplerConfig {
                temperature: 0.8,
                top_k,
                min_p,
                ..SamplerConfig::default()
            });
            let id = s.sample(&logits, &[]);
            assert!(
                (id as usize) < logits.len(),
                "top-k {top_k}, min-p {min_p}: token {id} of {:?}",
                logits
            );
        }
    }
}
