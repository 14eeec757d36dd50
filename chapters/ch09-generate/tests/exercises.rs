#![cfg(feature = "exercises")]
//! One test per exercise.

use ch09_generate::exercises::*;

#[test]
fn ex1_top_p() {
    let probs = [0.4, 0.3, 0.2, 0.1];
    for (p, want) in [
        (0.35, 1),
        (0.4, 1),
        (0.65, 2),
        (0.7, 2),
        (0.85, 3),
        (1.0, 4),
        (0.01, 1),
    ] {
        let got = top_p_keep(&probs, p);
        assert!(
            got == want,
            "probabilities {probs:?}, p = {p}: keep {want}, you kept {got}"
        );
    }
}

#[test]
fn ex2_min_p() {
    let logits = [4f32.ln(), 3f32.ln(), 2f32.ln(), 0.0]; // probabilities 0.4 0.3 0.2 0.1
    for (m, want) in [
        (0.5f32, vec![0, 1, 2]),
        (0.8, vec![0]),
        (0.25, vec![0, 1, 2, 3]),
        (0.0, vec![0, 1, 2, 3]),
    ] {
        let got = min_p_keep(&logits, m);
        assert!(
            got == want,
            "probabilities 0.4 0.3 0.2 0.1, min-p {m}: keep {want:?}, you kept {got:?}"
        );
    }
}

#[test]
fn ex3_a_stop_string_matcher_across_token_boundaries() {
    let cases: [(&str, &[&str], usize); 6] = [
        ("Hello\nUs", &["\nUser:"], 3),
        ("Hello", &["\nUser:"], 0),
        ("a##", &["###"], 2),
        ("a##", &["###", "#x"], 2),
        ("café", &["é!"], 2),
        ("done", &[], 0),
    ];
    for (text, stops, want) in cases {
        let got = hold_back(text, stops);
        assert!(
            got == want,
            "text {text:?}, stops {stops:?}: hold back {want} bytes, you held {got}"
        );
    }
}

#[test]
fn ex4_the_repetition_penalty() {
    let cases = [
        (2.0f32, 1u32, 2.0f32, 0.0f32, 0.0f32, 1.0f32),
        (-2.0, 1, 2.0, 0.0, 0.0, -4.0),
        (0.0, 1, 2.0, 0.0, 0.0, 0.0),
        (3.0, 0, 2.0, 1.0, 1.0, 3.0),
        (2.0, 3, 1.0, 0.5, 0.25, 2.0 - 1.5 - 0.25),
    ];
    for (logit, count, r, f, p, want) in cases {
        let got = penalize(logit, count, r, f, p);
        assert!(
            (got - want).abs() < 1e-6,
            "logit {logit}, seen {count} times, repeat {r}, frequency {f}, presence {p}: expected {want}, you returned {got}"
        );
    }
}
