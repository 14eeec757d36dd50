//! Chapter 5 against llama.cpp: cached greedy continuations of SmolLM2-135M in f32 must
//! match llama.cpp's f32 run (`fixtures/reference/greedy-smollm2-f32.json`) for the first
//! 32 tokens of every reference prompt. Past that, tiny float differences between two
//! implementations (summation order, F32 vs our kernels) may tip a near-tie; the test
//! prints where each prompt first diverges within the 64 tokens.
//!
//! Needs `models/smollm2-135m-instruct/hf/`; fails with the fetch command when it is missing.

use ch01_tensors::models;
use ch04_forward::Model;
use ch04_forward::reference::{GreedyFixture, load_named};
use ch05_kv_cache::generate::{cached_greedy, first_difference};
use ch05_kv_cache::{Engine, KvCache};

const MUST_MATCH: usize = 32;

#[test]
fn cached_greedy_matches_llama_cpp_f32() {
    let dir = models::smollm2_hf_dir();
    models::require(&dir.join("model.safetensors")).unwrap_or_else(|e| panic!("{e}"));
    let model = Model::load(&dir).unwrap_or_else(|e| panic!("{e}"));
    let fx: GreedyFixture = load_named("greedy-smollm2-f32.json").unwrap_or_else(|e| panic!("{e}"));
    assert!(!fx.prompts.is_empty(), "the fixture has no prompts");
    let mut failures = Vec::new();
    for p in &fx.prompts {
        let engine = Engine::new(&model);
        let cache = KvCache::new(engine.layout(), p.prompt_ids.len() + p.ids.len());
        let ours = cached_greedy(
            engine,
            cache,
            &p.prompt_ids,
            p.ids.len(),
            false,
            &mut |_| {},
        )
        .unwrap()
        .ids;
        let diverge = first_difference(&ours, &p.ids);
        match diverge {
            None => eprintln!("{:?}: all {} tokens match llama.cpp", p.prompt, p.ids.len()),
            Some(i) => eprintln!(
                "{:?}: first divergence from llama.cpp at generated token {i} of {}",
                p.prompt,
                p.ids.len()
            ),
        }
        if diverge.is_some_and(|i| i < MUST_MATCH) {
            failures.push(format!(
                "{:?} diverges at token {}: ours {:?}, llama.cpp {:?}",
                p.prompt,
                diverge.unwrap(),
                &ours[..MUST_MATCH],
                &p.ids[..MUST_MATCH]
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "cached greedy must match llama.cpp for {MUST_MATCH} tokens:\n{}",
        failures.join("\n")
    );
}
