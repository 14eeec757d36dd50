//! Online softmax: one pass over the scores gives the same softmax and the same attention.

mod common;

use approx::assert_relative_eq;
use ch01_tensors::ops;
use ch03_attention::attention::{Heads, attention};
use ch03_attention::mask::Mask;
use ch03_attention::online::{OnlineSoftmax, attention_online, online_softmax_inplace};
use common::{Rng, max_diff};

#[test]
fn running_state_by_hand() {
    // Scores 1 then 3. After 1: max 1, sum e^0 = 1. Then 3 beats the max: the sum is
    // rescaled by e^(1−3) = 0.135335 and e^0 = 1 is added: 1.135335 = e^(1−3) + e^(3−3).
    let mut s = OnlineSoftmax::new();
    assert_eq!(
        s.push(1.0),
        (0.0, 1.0),
        "the first score: nothing to rescale, p = e^0"
    );
    let (rescale, p) = s.push(3.0);
    assert_relative_eq!(rescale, 0.135_335_28, max_relative = 1e-6);
    assert_eq!(p, 1.0);
    assert_eq!(s.max, 3.0);
    assert_relative_eq!(s.sum, 1.135_335_3, max_relative = 1e-6);
    // A smaller score later needs no rescale.
    let (rescale, p) = s.push(2.0);
    assert_eq!(rescale, 1.0);
    assert_relative_eq!(p, (-1.0f32).exp(), max_relative = 1e-6);
}

#[test]
fn online_softmax_equals_two_pass() {
    let mut rng = Rng::new(20);
    let mut rows: Vec<Vec<f32>> = (0..20)
        .map(|n| rng.vec(1 + n * 7).iter().map(|x| x * 8.0).collect())
        .collect();
    rows.push((0..50).map(|i| i as f32).collect()); // increasing: the max moves on every score
    rows.push((0..50).map(|i| -(i as f32)).collect()); // decreasing: the max never moves
    rows.push(vec![1000.0, 999.0, -1000.0, 1001.0]); // e^1000 would overflow
    for row in rows {
        let mut two_pass = row.clone();
        ops::softmax_inplace(&mut two_pass);
        let mut one_pass = row.clone();
        online_softmax_inplace(&mut one_pass);
        // 1e-6 absolute on probabilities ≤ 1: the running sum is rescaled a different
        // number of times than the two-pass sum, a few ulps apart.
        assert!(
            max_diff(&two_pass, &one_pass) < 1e-6,
            "online softmax differs on {row:?}"
        );
        assert!(one_pass.iter().all(|p| p.is_finite()));
    }
}

#[test]
fn online_attention_equals_two_pass_attention() {
    let mut rng = Rng::new(21);
    for (nh, nkv, d, seq_q, seq_k, mask) in [
        (9, 3, 64, 16, 16, Mask::Causal),
        (4, 1, 32, 12, 12, Mask::SlidingWindow(5)),
        (9, 3, 64, 1, 300, Mask::Causal), // decode against a long cache
        (2, 2, 8, 4, 9, Mask::SlidingWindow(2)),
    ] {
        let heads = Heads::new(nh, nkv, d).unwrap();
        // Scale by 3 so that scores spread widely and the running max moves often.
        let q: Vec<f32> = rng
            .vec(seq_q * heads.q_dim())
            .iter()
            .map(|x| x * 3.0)
            .collect();
        let k: Vec<f32> = rng
            .vec(seq_k * heads.kv_dim())
            .iter()
            .map(|x| x * 3.0)
            .collect();
        let v = rng.vec(seq_k * heads.kv_dim());
        let mut two_pass = vec![0.0; q.len()];
        let mut one_pass = vec![0.0; q.len()];
        attention(&mut two_pass, &q, &k, &v, heads, mask);
        attention_online(&mut one_pass, &q, &k, &v, heads, mask);
        // 1e-5 on outputs of size ≤ 1: a weighted sum of up to 300 values, each weight a
        // few ulps different after rescaling (see the two-pass tolerance in attention.rs).
        let diff = max_diff(&two_pass, &one_pass);
        assert!(
            diff < 1e-5,
            "{heads:?} {mask:?} {seq_q}x{seq_k}: online differs by {diff}"
        );
    }
}
