//! Attention: hand-computed cases, the kernel against the textbook formula, GQA against
//! MHA with copied K/V heads, and masking that is exact.

mod common;

use approx::assert_relative_eq;
use ch01_tensors::Tensor;
use ch03_attention::attention::{Heads, attention, attention_weights, repeat_kv};
use ch03_attention::mask::Mask;
use ch03_attention::rope::{Pairing, RopeTable, halves_to_adjacent};
use ch03_attention::sdpa::sdpa;
use common::{Rng, max_diff};

// Tolerances: the kernel and the references add the same products in different orders
// (the blocked matmul vs a dot product; different softmax denominators), so outputs of
// size ~1 differ by a few f32 ulps, ~1e-7 each, accumulating over ≤ 64 terms. 1e-5 leaves
// room for that and still catches any real mistake, which moves results by 1e-2 or more.
const TOL: f32 = 1e-5;

#[test]
fn hand_computed_one_query_two_keys() {
    // d = 2, q = (1, 0), k0 = (1, 0), k1 = (0, 1): scores (1/√2, 0) = (0.707107, 0).
    // weights = (e^0.707107, 1) / (e^0.707107 + 1) = (2.028115, 1) / 3.028115
    //         = (0.669762, 0.330238)
    // out = 0.669762·(1, 2) + 0.330238·(3, 4) = (1.660477, 2.660477)
    let heads = Heads::new(1, 1, 2).unwrap();
    let (q, k, v) = ([1.0, 0.0], [1.0, 0.0, 0.0, 1.0], [1.0, 2.0, 3.0, 4.0]);
    let w = attention_weights(&q, &k, heads, Mask::Causal);
    assert_relative_eq!(w[0], 0.669_762, max_relative = 1e-5);
    assert_relative_eq!(w[1], 0.330_238, max_relative = 1e-5);
    let mut out = [0.0; 2];
    attention(&mut out, &q, &k, &v, heads, Mask::Causal);
    assert_relative_eq!(out[0], 1.660_477, max_relative = 1e-5);
    assert_relative_eq!(out[1], 2.660_477, max_relative = 1e-5);
}

#[test]
fn the_first_token_can_only_copy_its_own_value() {
    // Prefill of two tokens: token 0 sees only key 0, so its output is v0 exactly.
    let heads = Heads::new(1, 1, 2).unwrap();
    let (q, k, v) = (
        [5.0, -3.0, 1.0, 1.0],
        [0.5, 2.0, -1.0, 4.0],
        [7.0, 8.0, 9.0, 10.0],
    );
    let mut out = [0.0; 4];
    attention(&mut out, &q, &k, &v, heads, Mask::Causal);
    assert_eq!(&out[..2], &[7.0, 8.0], "token 0 must see only itself");
    assert!(out[2] > 7.0 && out[2] < 9.0, "token 1 mixes both values");
}

/// Per-head textbook attention (`sdpa` with an additive mask), K/V heads chosen by the GQA rule.
fn reference(q: &[f32], k: &[f32], v: &[f32], heads: Heads, mask: Mask) -> Vec<f32> {
    let d = heads.head_dim;
    let (seq_q, seq_k) = (q.len() / heads.q_dim(), k.len() / heads.kv_dim());
    let q_t = Tensor::from_vec(q.to_vec(), &[seq_q, heads.q_dim()]).unwrap();
    let k_t = Tensor::from_vec(k.to_vec(), &[seq_k, heads.kv_dim()]).unwrap();
    let v_t = Tensor::from_vec(v.to_vec(), &[seq_k, heads.kv_dim()]).unwrap();
    let m = mask.additive(seq_q, seq_k);
    let mut out = vec![0.0; q.len()];
    for h in 0..heads.n_heads {
        let g = heads.kv_head(h);
        let qh = q_t.narrow(1, h * d, d).unwrap().contiguous();
        let kh = k_t.narrow(1, g * d, d).unwrap().contiguous();
        let vh = v_t.narrow(1, g * d, d).unwrap().contiguous();
        let (o, _) = sdpa(&qh, &kh, &vh, &m).unwrap(); // (seq_q, d)
        for i in 0..seq_q {
            for c in 0..d {
                out[i * heads.q_dim() + h * d + c] = o.get(&[i, c]);
            }
        }
    }
    out
}

#[test]
fn kernel_matches_the_textbook_formula() {
    let mut rng = Rng::new(10);
    for (nh, nkv, d, seq_q, seq_k, mask) in [
        (1, 1, 8, 5, 5, Mask::Causal),
        (4, 4, 16, 6, 6, Mask::Causal),           // plain multi-head
        (9, 3, 64, 7, 7, Mask::Causal),           // SmolLM2's layout
        (4, 1, 32, 9, 9, Mask::SlidingWindow(3)), // Gemma-3's local layers, small window
        (9, 3, 64, 1, 12, Mask::Causal),          // decode: one query, a cache of 12
        (4, 2, 16, 3, 10, Mask::SlidingWindow(4)),
    ] {
        let heads = Heads::new(nh, nkv, d).unwrap();
        let q = rng.vec(seq_q * heads.q_dim());
        let k = rng.vec(seq_k * heads.kv_dim());
        let v = rng.vec(seq_k * heads.kv_dim());
        let mut out = vec![0.0; q.len()];
        attention(&mut out, &q, &k, &v, heads, mask);
        let want = reference(&q, &k, &v, heads, mask);
        let diff = max_diff(&out, &want);
        assert!(
            diff < TOL,
            "{heads:?} {mask:?} seq {seq_q}x{seq_k}: off by {diff}"
        );
    }
}

#[test]
fn gqa_equals_mha_with_repeated_kv_heads() {
    let mut rng = Rng::new(11);
    for (nh, nkv, d) in [(9, 3, 64), (4, 1, 256), (6, 2, 8)] {
        let seq = 8;
        let gqa = Heads::new(nh, nkv, d).unwrap();
        let mha = Heads::new(nh, nh, d).unwrap();
        let q = rng.vec(seq * gqa.q_dim());
        let k = rng.vec(seq * gqa.kv_dim());
        let v = rng.vec(seq * gqa.kv_dim());
        let mut out_gqa = vec![0.0; q.len()];
        let mut out_mha = vec![0.0; q.len()];
        attention(&mut out_gqa, &q, &k, &v, gqa, Mask::Causal);
        let (k_rep, v_rep) = (
            repeat_kv(&k, nkv, nh / nkv, d),
            repeat_kv(&v, nkv, nh / nkv, d),
        );
        assert_eq!(
            k_rep.len(),
            k.len() * nh / nkv,
            "repeated K has one head per query head"
        );
        attention(&mut out_mha, &q, &k_rep, &v_rep, mha, Mask::Causal);
        // Bit-identical: the same numbers meet in the same order; only where K/V are read differs.
        assert_eq!(
            out_gqa, out_mha,
            "GQA {nh}/{nkv} differs from MHA on repeated K/V"
        );
    }
}

#[test]
fn gqa_head_mapping() {
    let smol = Heads::new(9, 3, 64).unwrap();
    let map: Vec<usize> = (0..9).map(|h| smol.kv_head(h)).collect();
    assert_eq!(
        map,
        [0, 0, 0, 1, 1, 1, 2, 2, 2],
        "SmolLM2: three query heads per KV head"
    );
    let gemma = Heads::new(4, 1, 256).unwrap();
    assert!(
        (0..4).all(|h| gemma.kv_head(h) == 0),
        "Gemma-3-270M: every query head reads KV head 0"
    );
    assert!(
        Heads::new(9, 4, 64).is_err(),
        "4 KV heads cannot be shared evenly by 9 query heads"
    );
    assert!(Heads::new(9, 0, 64).is_err());
}

#[test]
fn masked_keys_get_exactly_zero_weight() {
    let mut rng = Rng::new(12);
    let heads = Heads::new(2, 1, 16).unwrap();
    let seq = 10;
    let q = rng.vec(seq * heads.q_dim());
    let k = rng.vec(seq * heads.kv_dim());
    for mask in [Mask::Causal, Mask::SlidingWindow(4)] {
        let w = attention_weights(&q, &k, heads, mask); // (n_heads, seq, seq)
        for h in 0..2 {
            for i in 0..seq {
                let row = &w[(h * seq + i) * seq..(h * seq + i + 1) * seq];
                for (j, &wj) in row.iter().enumerate() {
                    if !mask.allowed(i, j) {
                        assert_eq!(
                            wj, 0.0,
                            "{mask:?}: head {h} token {i} puts weight on masked token {j}"
                        );
                    } else {
                        assert!(wj > 0.0, "{mask:?}: allowed weight ({i},{j}) is {wj}");
                    }
                }
                // 1e-6: ten weights of size ~0.1, each rounded by the division.
                assert!(
                    (row.iter().sum::<f32>() - 1.0).abs() < 1e-6,
                    "row {i} does not sum to 1"
                );
            }
        }
    }
    // The textbook form gives exact zeros too: −∞ + anything = −∞, exp(−∞) = 0.
    let q0 = Tensor::from_vec(q, &[seq, 32])
        .unwrap()
        .narrow(1, 0, 16)
        .unwrap()
        .contiguous(); // head 0
    let k0 = Tensor::from_vec(k, &[seq, 16]).unwrap();
    let (_, w) = sdpa(&q0, &k0, &k0, &Mask::Causal.additive(seq, seq)).unwrap();
    for i in 0..seq {
        for j in i + 1..seq {
            assert_eq!(
                w.get(&[i, j]),
                0.0,
                "textbook form: token {i} puts weight on future token {j}"
            );
        }
    }
}

#[test]
fn changing_a_future_token_changes_nothing_before_it() {
    let mut rng = Rng::new(13);
    let heads = Heads::new(9, 3, 64).unwrap();
    let seq = 6;
    let q = rng.vec(seq * heads.q_dim());
    let mut k = rng.vec(seq * heads.kv_dim());
    let mut v = rng.vec(seq * heads.kv_dim());
    let mut before = vec![0.0; q.len()];
    attention(&mut before, &q, &k, &v, heads, Mask::Causal);
    // Scribble over token 5's key and value.
    let kd = heads.kv_dim();
    k[5 * kd..].iter_mut().for_each(|x| *x = 1e6);
    v[5 * kd..].iter_mut().for_each(|x| *x = -1e6);
    let mut after = vec![0.0; q.len()];
    attention(&mut after, &q, &k, &v, heads, Mask::Causal);
    let qd = heads.q_dim();
    assert_eq!(
        &after[..5 * qd],
        &before[..5 * qd],
        "tokens 0..5 must not see token 5"
    );
    assert_ne!(&after[5 * qd..], &before[5 * qd..], "token 5 sees itself");
}

#[test]
fn decode_step_equals_the_last_row_of_prefill() {
    let mut rng = Rng::new(14);
    let heads = Heads::new(9, 3, 64).unwrap();
    let seq = 9;
    let q = rng.vec(seq * heads.q_dim());
    let k = rng.vec(seq * heads.kv_dim());
    let v = rng.vec(seq * heads.kv_dim());
    for mask in [Mask::Causal, Mask::SlidingWindow(4)] {
        let mut prefill = vec![0.0; q.len()];
        attention(&mut prefill, &q, &k, &v, heads, mask);
        let qd = heads.q_dim();
        for t in 0..seq {
            // Decode token t: one query row, the cache holding tokens 0..=t.
            let mut step = vec![0.0; qd];
            let kv_len = (t + 1) * heads.kv_dim();
            attention(
                &mut step,
                &q[t * qd..(t + 1) * qd],
                &k[..kv_len],
                &v[..kv_len],
                heads,
                mask,
            );
            assert_eq!(
                step,
                &prefill[t * qd..(t + 1) * qd],
                "{mask:?}: decode of token {t} ≠ prefill row"
            );
        }
    }
}

#[test]
fn huge_scores_stay_finite() {
    // Scores around 10⁴: e^10000 is infinite in f32, so only a max-subtracting softmax
    // survives. The largest score wins all the weight.
    let heads = Heads::new(1, 1, 4).unwrap();
    let q = [100.0, 100.0, 100.0, 100.0];
    let k = [50.0, 50.0, 50.0, 50.0, 51.0, 51.0, 51.0, 51.0]; // scores 10 000 and 10 200
    let v = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
    let mut out = [0.0; 4];
    attention(&mut out, &q, &k, &v, heads, Mask::Causal);
    assert!(
        out.iter().all(|x| x.is_finite()),
        "softmax overflowed: {out:?}"
    );
    assert_eq!(
        out,
        [5.0, 6.0, 7.0, 8.0],
        "a 200-point lead takes all the weight"
    );
}

#[test]
fn rope_layout_does_not_change_the_pattern() {
    // Split-halves RoPE on q, k and adjacent-pairs RoPE on the permuted q, k give the same
    // attention: every q·k is a sum of the same pair products, only stored elsewhere.
    let mut rng = Rng::new(15);
    let heads = Heads::new(9, 3, 64).unwrap();
    let seq = 8;
    let rope = RopeTable::new(64, seq, 100_000.0).unwrap();
    let (mut q, mut k) = (rng.vec(seq * heads.q_dim()), rng.vec(seq * heads.kv_dim()));
    let (mut qp, mut kp) = (halves_to_adjacent(&q, 64), halves_to_adjacent(&k, 64));
    rope.apply(&mut q, 9, 0, Pairing::SplitHalves);
    rope.apply(&mut k, 3, 0, Pairing::SplitHalves);
    rope.apply(&mut qp, 9, 0, Pairing::Adjacent);
    rope.apply(&mut kp, 3, 0, Pairing::Adjacent);
    let w = attention_weights(&q, &k, heads, Mask::Causal);
    let wp = attention_weights(&qp, &kp, heads, Mask::Causal);
    // 1e-6: the dot products add the same terms in a different order (a few ulps of a score).
    assert!(
        max_diff(&w, &wp) < 1e-6,
        "pattern changed with the RoPE layout"
    );
}
