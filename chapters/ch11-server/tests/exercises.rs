#![cfg(feature = "exercises")]
//! One test per exercise.

use ch11_server::exercises::*;

#[test]
fn ex1_sse_frame() {
    assert_eq!(
        sse_frame("a"),
        "data: a\n\n",
        "one line of data is one `data: ` line and a blank line"
    );
    assert_eq!(
        sse_frame("{\"x\":1}\n{\"y\":2}"),
        "data: {\"x\":1}\ndata: {\"y\":2}\n\n",
        "each line of the data needs its own `data: ` prefix, or the client sees one line of garbage"
    );
    assert_eq!(sse_frame("[DONE]"), "data: [DONE]\n\n");
}

#[test]
fn ex2_status_for() {
    use ch10_batching::Error as E;
    let client = [
        E::EmptyPrompt,
        E::ZeroMaxTokens,
        E::ContextTooSmall {
            prompt: 9000,
            max_tokens: 1,
            context: 8192,
        },
        E::PoolTooSmall {
            prompt: 10,
            max_tokens: 10,
            blocks_needed: 2,
            pool_blocks: 1,
            block_size: 16,
        },
    ];
    for e in &client {
        assert_eq!(
            status_for(e),
            400,
            "{e:?} is the client's mistake: a 400 tells them to change the request"
        );
    }
    for e in [
        E::UnknownRequest(3),
        E::Config("bad".into()),
        E::Model("nan".into()),
    ] {
        assert_eq!(
            status_for(&e),
            500,
            "{e:?} is the server's failure: a 500, not the client's fault"
        );
    }
}

#[test]
fn ex3_token_bucket() {
    let mut b = TokenBucket::new(2.0, 1.0);
    assert!(
        b.try_take(0.0),
        "a new bucket is full: the first request passes"
    );
    assert!(b.try_take(0.0), "a bucket of 2 lets a burst of 2 through");
    assert!(
        !b.try_take(0.0),
        "the third request of the burst finds the bucket empty: refuse it"
    );
    assert!(
        !b.try_take(0.5),
        "after half a second at 1 a second there is half a token: not enough"
    );
    assert!(b.try_take(1.0), "after a whole second one token is back");
    assert!(b.try_take(100.0), "a long quiet spell refills the bucket");
    assert!(b.try_take(100.0), "the bucket holds 2 after a quiet spell");
    assert!(
        !b.try_take(100.0),
        "but never more than its capacity of 2, however long the quiet spell"
    );
}

#[test]
fn ex4_logprob() {
    let l = [1.0f32, 2.0, 3.0];
    let z = (1f32.exp() + 2f32.exp() + 3f32.exp()).ln();
    assert!(
        (logprob(&l, 2) - (3.0 - z)).abs() < 1e-5,
        "logprob of [1, 2, 3] at 2 should be 3 - ln(e + e² + e³) = {}",
        3.0 - z
    );
    let p: f32 = (0..3).map(|i| logprob(&l, i).exp()).sum();
    assert!(
        (p - 1.0).abs() < 1e-5,
        "the probabilities should add up to 1, not {p}"
    );
    let big = [1000.0f32, 999.0];
    let lp = logprob(&big, 0);
    assert!(
        lp.is_finite(),
        "logits of 1000 overflow exp: subtract the largest logit first (got {lp})"
    );
    assert!((lp - (-(1.0 + (-1f32).exp()).ln())).abs() < 1e-4);
}
