//! Chapter 4's forward pass against the oracles: llama.cpp on an F32 copy of SmolLM2
//! (logits and greedy continuations), a float64 numpy pass (the residual stream after every
//! layer), and, for information, llama.cpp on the Q4_1 file.
//!
//! `cargo test --release -p llm-book --test forward_oracle -- --nocapture` shows the
//! measured differences. A missing model fails with the command that fetches it.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use ch01_tensors::models;
use ch02_tokenizer::Tokenizer;
use ch04_forward::Model;
use ch04_forward::check::{self, GREEDY_CHECKED, LOGIT_TOLERANCE, LogitsComparison};
use ch04_forward::generate::{self, Stop};
use ch04_forward::reference::{self, GreedyFixture, HiddenFixture, LogitsFixture, LogitsPrompt};

fn model() -> &'static Model {
    static MODEL: OnceLock<Model> = OnceLock::new();
    MODEL.get_or_init(|| {
        let file = models::require(&models::smollm2_hf_dir().join("model.safetensors"))
            .unwrap_or_else(|e| panic!("{e}"));
        Model::load(file.parent().unwrap()).unwrap_or_else(|e| panic!("loading SmolLM2: {e}"))
    })
}

/// A fixture, or a failure that says what is missing.
fn ok<T>(loaded: Result<T, ch04_forward::Error>) -> T {
    loaded.unwrap_or_else(|e| panic!("{e}"))
}

/// Our logits for `ids`, `(seq, vocab)`, computed once per id sequence: the f32 and Q4_1
/// fixtures use the same prompts.
fn logits(ids: &[u32]) -> Vec<f32> {
    static CACHE: OnceLock<Mutex<HashMap<Vec<u32>, Vec<f32>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(l) = cache.lock().unwrap().get(ids) {
        return l.clone();
    }
    let l = model()
        .logits(ids)
        .unwrap_or_else(|e| panic!("forward pass: {e}"));
    cache.lock().unwrap().insert(ids.to_vec(), l.clone());
    l
}

fn compare_all(fx: &LogitsFixture) -> Vec<(LogitsComparison, &LogitsPrompt)> {
    let vocab = model().config.vocab_size;
    fx.prompts
        .iter()
        .map(|p| (check::compare_logits(&logits(&p.ids), vocab, p), p))
        .collect()
}

#[test]
fn logits_match_llama_cpp_f32() {
    let fx: LogitsFixture = ok(reference::load_named("logits-smollm2-f32.json"));
    assert_eq!(
        fx.variant, "f32",
        "logits-smollm2-f32.json must come from the F32 model"
    );
    let mut overall: f64 = 0.0;
    for (c, p) in compare_all(&fx) {
        eprintln!(
            "f32 oracle, {:<26} {:3} positions, argmax {}/{}, max |Δ logit| {:.2e} (position {}, id {})",
            check::short(&p.prompt),
            c.positions,
            c.argmax_agree,
            c.positions,
            c.max_diff,
            c.worst.0,
            c.worst.1
        );
        if let Some(&t) = c.argmax_differ.first() {
            let vocab = model().config.vocab_size;
            let ours = ch04_forward::model::argmax(&logits(&p.ids)[t * vocab..(t + 1) * vocab]);
            panic!(
                "prompt {}: at position {t} our top token is {ours}, llama.cpp's is {} ({} positions differ)",
                check::short(&p.prompt),
                p.positions[t].argmax,
                c.argmax_differ.len()
            );
        }
        assert!(
            c.max_diff <= LOGIT_TOLERANCE,
            "prompt {}: logit of id {} at position {} differs from llama.cpp f32 by {:.2e} (> {LOGIT_TOLERANCE})",
            check::short(&p.prompt),
            c.worst.1,
            c.worst.0,
            c.max_diff
        );
        overall = overall.max(c.max_diff);
    }
    eprintln!(
        "f32 oracle: max |Δ logit| over all prompts, positions and top-20 ids: {overall:.2e}"
    );
}

#[test]
fn greedy_matches_llama_cpp_f32() {
    let fx: GreedyFixture = ok(reference::load_named("greedy-smollm2-f32.json"));
    for p in &fx.prompts {
        // One forward pass over prompt + continuation gives the greedy pick at every step
        // (see generate::first_divergence); the real uncached loop is tested below.
        let d = generate::first_divergence(model(), &p.prompt_ids, &p.ids).unwrap();
        match d {
            None => eprintln!(
                "f32 oracle greedy, {:<26} all {} tokens identical",
                check::short(&p.prompt),
                p.ids.len()
            ),
            Some(i) => eprintln!(
                "f32 oracle greedy, {:<26} first divergence at token {i} of {}",
                check::short(&p.prompt),
                p.ids.len()
            ),
        }
        if let Some(i) = d {
            assert!(
                i >= GREEDY_CHECKED,
                "prompt {}: greedy decoding leaves llama.cpp's continuation at token {i} (< {GREEDY_CHECKED})",
                check::short(&p.prompt)
            );
        }
    }
}

#[test]
fn uncached_generation_says_paris() {
    let fx: GreedyFixture = ok(reference::load_named("greedy-smollm2-f32.json"));
    let p = fx
        .prompts
        .iter()
        .find(|p| p.prompt == "The capital of France is")
        .expect("the capital prompt is in the fixture");
    let tok = Tokenizer::from_file(models::smollm2_hf_dir().join("tokenizer.json"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        tok.encode(&p.prompt, true),
        p.prompt_ids,
        "chapter 2's tokenizer must give llama.cpp's prompt ids"
    );

    let g = generate::greedy(
        model(),
        &p.prompt_ids,
        GREEDY_CHECKED,
        Stop::Never,
        &mut |_| Ok(()),
    )
    .unwrap();
    let text = tok.decode(&g.ids).unwrap();
    eprintln!(
        "uncached greedy: {:?} ({} tokens, {:.1} tokens/s)",
        text,
        g.ids.len(),
        g.tokens_per_second()
    );
    assert_eq!(
        g.ids,
        p.ids[..GREEDY_CHECKED],
        "the generation loop must reproduce llama.cpp's first {GREEDY_CHECKED} tokens"
    );
    assert!(
        text.starts_with(" Paris"),
        "\"The capital of France is\" must continue with \" Paris\", got {text:?}"
    );
}

#[test]
fn hidden_states_match_float64() {
    let fx: HiddenFixture = ok(reference::load_named("hidden-smollm2-f64.json"));
    let lines = check::check_hidden(model(), &fx).unwrap();
    assert_eq!(lines.len(), model().config.num_layers + 1);
    let worst = lines.iter().map(|l| l.max_diff).fold(0.0, f64::max);
    eprintln!("float64 reference: worst residual-stream error {worst:.2e} of the row RMS");
    if let Some(bad) = lines.iter().find(|l| !l.ok()) {
        panic!(
            "the residual stream {} differs from float64 by {:.2e} of its RMS (> {:.0e})",
            bad.label, bad.max_diff, bad.tolerance
        );
    }
    // The float64 pass's own logits, at the last position.
    let last = model().next_token_logits(&fx.ids).unwrap();
    let d = fx
        .last_top
        .iter()
        .map(|&(id, l)| (last[id as usize] as f64 - l).abs())
        .fold(0.0, f64::max);
    eprintln!("float64 reference: max |Δ logit| over the last position's top-20: {d:.2e}");
    assert!(
        d <= LOGIT_TOLERANCE,
        "last-position logits differ from float64 by {d:.2e}"
    );
}

/// llama.cpp's Q4_1 run is not an oracle for us (it also rounds the activations to 8 bits
/// before each matrix product), so this test reports the differences and checks only that
/// they stay at the size quantization explains.
#[test]
fn q4_1_differences_are_quantization_sized() {
    let fx: LogitsFixture = ok(reference::load_named("logits-smollm2-q4_1.json"));
    let (mut overall, mut agree, mut total): (f64, usize, usize) = (0.0, 0, 0);
    for (c, p) in compare_all(&fx) {
        eprintln!(
            "q4_1 llama.cpp, {:<26} argmax {}/{}, max |Δ logit| {:.3} (position {}, id {})",
            check::short(&p.prompt),
            c.argmax_agree,
            c.positions,
            c.max_diff,
            c.worst.0,
            c.worst.1
        );
        overall = overall.max(c.max_diff);
        (agree, total) = (agree + c.argmax_agree, total + c.positions);
    }
    eprintln!(
        "q4_1 llama.cpp: max |Δ logit| {overall:.3}, argmax agrees at {agree}/{total} positions"
    );
    assert!(
        overall < 3.0,
        "a logit differs from llama.cpp's Q4_1 run by {overall:.2}: more than 8-bit activations explain"
    );
    assert!(
        agree * 10 >= total * 9,
        "the argmax agrees with llama.cpp's Q4_1 run at only {agree}/{total} positions"
    );

    let greedy: GreedyFixture = ok(reference::load_named("greedy-smollm2-q4_1.json"));
    for p in &greedy.prompts {
        let d = generate::first_divergence(model(), &p.prompt_ids, &p.ids).unwrap();
        let d = d.map_or(format!("all {} tokens identical", p.ids.len()), |i| {
            format!("first divergence at token {i}")
        });
        eprintln!("q4_1 llama.cpp greedy, {:<26} {d}", check::short(&p.prompt));
    }
    let capital = &greedy.prompts[0];
    assert_eq!(
        generate::first_divergence(model(), &capital.prompt_ids, &capital.ids[..1]).unwrap(),
        None,
        "both runs must continue \"The capital of France is\" with the same first token"
    );
}
