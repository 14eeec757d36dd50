//! Cached == uncached on the real model, SmolLM2-135M in f32, for every reference prompt.
//!
//! These tests need `models/smollm2-135m-instruct/hf/` and fail (they do not skip) when it
//! is missing, with the command that fetches it.

use std::path::PathBuf;
use std::sync::OnceLock;

use ch01_tensors::models;
use ch04_forward::Model;
use ch04_forward::generate::{Stop, first_divergence, greedy};
use ch04_forward::reference::{GreedyFixture, load_named};
use ch05_kv_cache::generate::cached_greedy;
use ch05_kv_cache::{Engine, KvCache, KvStore, PagedCache, Session};

/// Tokens of chapter 4's uncached loop per prompt: each step is a whole forward pass, so
/// this is what keeps the test near a minute on two cores. The teacher-forced check below
/// covers all 64.
const UNCACHED_STEPS: usize = 8;

fn model() -> &'static Model {
    static MODEL: OnceLock<Model> = OnceLock::new();
    MODEL.get_or_init(|| {
        let dir: PathBuf = models::smollm2_hf_dir();
        models::require(&dir.join("model.safetensors")).unwrap_or_else(|e| panic!("{e}"));
        Model::load(&dir).unwrap_or_else(|e| panic!("loading {}: {e}", dir.display()))
    })
}

fn prompts() -> Vec<Vec<u32>> {
    let fx: GreedyFixture = load_named("greedy-smollm2-f32.json").unwrap_or_else(|e| panic!("{e}"));
    fx.prompts.into_iter().map(|p| p.prompt_ids).collect()
}

#[test]
fn cached_generation_equals_chapter_4_uncached_generation() {
    let m = model();
    for prompt in prompts() {
        let engine = Engine::new(m);
        let cache = KvCache::new(engine.layout(), prompt.len() + 64);
        let cached = cached_greedy(engine, cache, &prompt, 64, false, &mut |_| {})
            .unwrap()
            .ids;
        // Chapter 4's loop, literally, for the first tokens.
        let uncached = greedy(m, &prompt, UNCACHED_STEPS, Stop::Never, &mut |_| Ok(()))
            .unwrap()
            .ids;
        assert_eq!(
            cached[..UNCACHED_STEPS],
            uncached[..],
            "prompt {prompt:?}: cached and uncached greedy tokens differ"
        );
        // All 64: one uncached forward pass over prompt + continuation says, at every
        // position, which token chapter 4's greedy loop would pick there.
        let diverges = first_divergence(m, &prompt, &cached).unwrap();
        assert_eq!(
            diverges, None,
            "prompt {prompt:?}: chapter 4 would pick another token at step {diverges:?}"
        );
    }
}

#[test]
fn cached_logits_are_bitwise_the_uncached_logits() {
    let m = model();
    let prompt = &prompts()[1]; // the chat prompt, 37 tokens
    let engine = Engine::new(m);
    let mut cache = KvCache::new(engine.layout(), prompt.len());
    // Prefill all but the last token in chunks of 8, then decode the last.
    let mut chunked = Engine::new(m);
    chunked.chunk = 8;
    chunked
        .forward(&mut cache, &prompt[..prompt.len() - 1], 0)
        .unwrap();
    let cached = engine
        .forward(&mut cache, &prompt[prompt.len() - 1..], prompt.len() - 1)
        .unwrap();
    let uncached = m.next_token_logits(prompt).unwrap();
    let max_diff = cached
        .iter()
        .zip(&uncached)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert_eq!(
        max_diff, 0.0,
        "the cached forward pass should do exactly the uncached arithmetic"
    );
}

#[test]
fn paged_equals_contiguous_on_the_real_model() {
    let m = model();
    let prompt = &prompts()[2];
    let engine = Engine::new(m);
    let contiguous = cached_greedy(
        Engine::new(m),
        KvCache::new(engine.layout(), 256),
        prompt,
        20,
        false,
        &mut |_| {},
    )
    .unwrap();
    let mut pool = PagedCache::new(engine.layout(), 32, 16, 256);
    let other = pool.new_seq();
    pool.seq(other).reserve(40).unwrap(); // another sequence holds the first blocks
    let id = pool.new_seq();
    let paged =
        cached_greedy(Engine::new(m), pool.seq(id), prompt, 20, false, &mut |_| {}).unwrap();
    assert_eq!(
        paged.ids, contiguous.ids,
        "paged and contiguous caches chose different tokens"
    );
    assert_eq!(
        pool.table(id).blocks[0],
        3,
        "the paged sequence starts after the other's 3 blocks"
    );
}

#[test]
fn a_conversation_in_turns_equals_one_pass() {
    let m = model();
    let ps = prompts();
    let mut s = Session::new(Engine::new(m), KvCache::new(Engine::new(m).layout(), 512));
    s.extend(&ps[1]).unwrap();
    let reply = s.generate(10, true, &mut |_| {}).unwrap();
    s.extend(&ps[0]).unwrap();
    let all: Vec<u32> = [ps[1].as_slice(), &reply, &ps[0]].concat();
    assert_eq!(s.ids(), all.as_slice());
    let once = m.next_token_logits(&all).unwrap();
    assert_eq!(
        s.logits(),
        once.as_slice(),
        "two turns must equal one pass over the concatenation"
    );
}
