//! Cached == uncached, on a tiny random Llama: every cache, every way of feeding tokens in,
//! must give chapter 4's logits bit for bit (the same kernels do the same additions in the
//! same order, so anything short of exact equality is a bug).

mod common;

use ch03_attention::Mask;
use ch04_forward::generate::{Stop, greedy};
use ch05_kv_cache::ring::interleaved_windows;
use ch05_kv_cache::{Engine, Error, KvCache, KvStore, PagedCache, RingCache, Session};
use common::{LAYERS, MAX_POS, VOCAB, ids, tiny_model};

/// Chapter 4's logits for every position, row `t` after token `t`: `(seq, vocab)`.
fn uncached_rows(model: &ch04_forward::Model, ids: &[u32]) -> Vec<Vec<f32>> {
    model
        .logits(ids)
        .unwrap()
        .chunks(VOCAB)
        .map(<[f32]>::to_vec)
        .collect()
}

#[test]
fn token_by_token_decode_equals_chapter_4_at_every_position() {
    let model = tiny_model("decode");
    let engine = Engine::new(&model);
    let seq = ids(40, 1);
    let expected = uncached_rows(&model, &seq);
    let mut cache = KvCache::new(engine.layout(), MAX_POS);
    for (t, id) in seq.iter().enumerate() {
        let got = engine
            .forward(&mut cache, std::slice::from_ref(id), t)
            .unwrap();
        assert_eq!(
            got, expected[t],
            "decode step at position {t} differs from the uncached forward pass"
        );
    }
}

#[test]
fn prefill_in_any_chunk_size_equals_chapter_4() {
    let model = tiny_model("chunks");
    let seq = ids(37, 2);
    let expected = uncached_rows(&model, &seq);
    for chunk in [1, 2, 5, 16, 37, 100] {
        let mut engine = Engine::new(&model);
        engine.chunk = chunk;
        let mut cache = KvCache::new(engine.layout(), MAX_POS);
        let got = engine.forward(&mut cache, &seq, 0).unwrap();
        assert_eq!(got, expected[36], "prefill in chunks of {chunk} differs");
    }
}

#[test]
fn cached_greedy_generation_equals_chapter_4_greedy() {
    let model = tiny_model("greedy");
    let prompt = ids(7, 3);
    let reference = greedy(&model, &prompt, 40, Stop::Never, &mut |_| Ok(()))
        .unwrap()
        .ids;
    let engine = Engine::new(&model);
    let mut session = Session::new(engine, KvCache::new(Engine::new(&model).layout(), MAX_POS));
    session.extend(&prompt).unwrap();
    let got = session.generate(40, false, &mut |_| {}).unwrap();
    assert_eq!(
        got, reference,
        "cached greedy tokens differ from chapter 4's uncached greedy loop"
    );
}

#[test]
fn paged_cache_equals_contiguous_even_with_interleaved_sequences() {
    let model = tiny_model("paged");
    let engine = Engine::new(&model);
    let (a, b) = (ids(45, 4), ids(30, 5));
    let mut pool = PagedCache::new(engine.layout(), 32, 4, MAX_POS);
    let (sa, sb) = (pool.new_seq(), pool.new_seq());
    // Prefill both, then decode them alternately so their blocks interleave in the pool.
    let mut last_a = engine.forward(&mut pool.seq(sa), &a[..9], 0).unwrap();
    let mut last_b = engine.forward(&mut pool.seq(sb), &b[..5], 0).unwrap();
    for t in 9..a.len() {
        last_a = engine.forward(&mut pool.seq(sa), &a[t..t + 1], t).unwrap();
        if t - 4 < b.len() {
            last_b = engine
                .forward(&mut pool.seq(sb), &b[t - 4..t - 3], t - 4)
                .unwrap();
        }
    }
    let blocks_a = &pool.table(sa).blocks;
    assert!(
        blocks_a.windows(2).any(|w| w[1] != w[0] + 1),
        "the blocks of a should not be consecutive: {blocks_a:?}"
    );
    assert_eq!(
        last_a,
        uncached_rows(&model, &a)[44],
        "paged sequence a differs from the uncached forward"
    );
    assert_eq!(
        last_b,
        uncached_rows(&model, &b)[29],
        "paged sequence b differs from the uncached forward"
    );
}

#[test]
fn ring_buffers_equal_a_full_cache_with_sliding_window_masks() {
    let model = tiny_model("ring");
    let seq = ids(60, 6);
    for window in [1, 4, 7] {
        let windows = interleaved_windows(LAYERS, window, 3); // layers 0, 1 windowed; 2 global
        let engine = Engine::with_windows(&model, &windows);
        assert_eq!(
            engine.masks,
            [
                Mask::SlidingWindow(window),
                Mask::SlidingWindow(window),
                Mask::Causal
            ]
        );
        let mut full = KvCache::new(engine.layout(), MAX_POS);
        let mut ring = RingCache::new(engine.layout(), &windows, MAX_POS).unwrap();
        assert!(ring.reserved_bytes() < full.reserved_bytes());
        // A prefill chunk longer than the window, then decode steps.
        let expect_prefill = engine.forward(&mut full, &seq[..20], 0).unwrap();
        assert_eq!(
            engine.forward(&mut ring, &seq[..20], 0).unwrap(),
            expect_prefill,
            "window {window}, prefill"
        );
        for t in 20..seq.len() {
            let expected = engine.forward(&mut full, &seq[t..t + 1], t).unwrap();
            let got = engine.forward(&mut ring, &seq[t..t + 1], t).unwrap();
            assert_eq!(
                got, expected,
                "window {window}: ring buffer differs at position {t}"
            );
        }
    }
}

#[test]
fn extend_in_turns_equals_one_pass_over_everything() {
    let model = tiny_model("turns");
    let (turn1, turn2, turn3) = (ids(11, 7), ids(6, 8), ids(9, 9));
    let mut s = Session::new(
        Engine::new(&model),
        KvCache::new(Engine::new(&model).layout(), MAX_POS),
    );
    s.extend(&turn1).unwrap();
    let reply = s.generate(5, false, &mut |_| {}).unwrap();
    s.extend(&turn2).unwrap();
    s.extend(&turn3).unwrap();
    let all: Vec<u32> = [turn1.as_slice(), &reply, &turn2, &turn3].concat();
    assert_eq!(
        s.ids(),
        all.as_slice(),
        "the session holds every token, generated ones included"
    );
    let expected = uncached_rows(&model, &all);
    assert_eq!(
        s.logits(),
        expected[all.len() - 1].as_slice(),
        "three turns differ from one pass"
    );
}

#[test]
fn sync_reuses_the_common_prefix() {
    let model = tiny_model("sync");
    let mut s = Session::new(
        Engine::new(&model),
        KvCache::new(Engine::new(&model).layout(), MAX_POS),
    );
    let first = ids(20, 10);
    assert_eq!(s.sync(&first).unwrap(), 0);
    // The conversation is re-sent with its last 5 tokens edited and 8 appended.
    let mut second = first[..15].to_vec();
    second.extend(ids(13, 11));
    assert_eq!(s.sync(&second).unwrap(), 15, "15 positions are shared");
    assert_eq!(s.logits(), uncached_rows(&model, &second)[27].as_slice());
    // Same ids again: everything but the last token is reused.
    assert_eq!(s.sync(&second).unwrap(), 27);
}

#[test]
fn a_full_context_is_an_error_that_leaves_the_session_usable() {
    let model = tiny_model("full");
    let mut s = Session::new(
        Engine::new(&model),
        KvCache::new(Engine::new(&model).layout(), 16),
    );
    s.extend(&ids(10, 12)).unwrap();
    let before = s.logits().to_vec();
    let err = s.extend(&ids(7, 13)).unwrap_err();
    assert!(
        matches!(
            err,
            Error::ContextFull {
                limit: 16,
                needed: 17
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("holds 16 positions"),
        "the error names the limit: {err}"
    );
    assert_eq!(s.len(), 10, "a refused turn adds nothing");
    assert_eq!(s.logits(), before.as_slice());
    s.extend(&ids(6, 13)).unwrap(); // exactly fills the cache
    assert_eq!(s.len(), 16);
    s.reset().unwrap();
    assert!(s.is_empty());
}

#[test]
fn a_paged_pool_that_runs_dry_says_so() {
    let model = tiny_model("dry");
    let engine = Engine::new(&model);
    let mut pool = PagedCache::new(engine.layout(), 2, 4, MAX_POS);
    let s = pool.new_seq();
    let err = engine
        .forward(&mut pool.seq(s), &ids(9, 14), 0)
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::OutOfBlocks {
                blocks: 2,
                block_size: 4
            }
        ),
        "{err}"
    );
}

#[test]
fn bad_token_ids_are_errors_not_panics() {
    let model = tiny_model("badid");
    let engine = Engine::new(&model);
    let mut cache = KvCache::new(engine.layout(), MAX_POS);
    let err = engine
        .forward(&mut cache, &[3, VOCAB as u32], 0)
        .unwrap_err();
    assert!(err.to_string().contains("outside the vocabulary"), "{err}");
    let err = engine.forward(&mut cache, &[], 0).unwrap_err();
    assert!(err.to_string().contains("at least one token"), "{err}");
}

#[test]
fn a_bad_id_late_in_a_turn_is_refused_before_anything_is_written() {
    let model = tiny_model("badlate");
    let windows = interleaved_windows(LAYERS, 4, 3);
    let mut engine = Engine::with_windows(&model, &windows);
    engine.chunk = 2; // the bad id sits in the third chunk
    let ring = RingCache::new(engine.layout(), &windows, MAX_POS).unwrap();
    let mut s = Session::new(engine, ring);
    let (first, mut bad, then) = (ids(10, 15), ids(6, 16), ids(3, 17));
    s.extend(&first).unwrap();
    bad[5] = VOCAB as u32;
    let err = s.extend(&bad).unwrap_err();
    assert!(
        matches!(err, Error::BadToken { id, .. } if id == VOCAB as u32),
        "{err}"
    );
    assert_eq!(s.len(), 10);
    // Had the first chunks been written, they would have overwritten ring slots still in use.
    s.extend(&then).unwrap();
    let reference = Engine::with_windows(&model, &windows);
    let mut full = KvCache::new(reference.layout(), MAX_POS);
    let expected = reference
        .forward(&mut full, &[first, then].concat(), 0)
        .unwrap();
    assert_eq!(s.logits(), expected.as_slice());
}
