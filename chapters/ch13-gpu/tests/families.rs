//! Every family chapter 8 runs, on the GPU: chapter 8's small synthetic Q8_0 file of each
//! architecture (`fixtures/families/ARCH-q8_0.json` names its arguments of `ch08-gguf
//! synth`) either runs teacher-forced on the GPU's step and on chapter 8's CPU engine, over
//! the fixture's prompts (llama.cpp's token ids), with every top-1 miss a near-tie in the
//! CPU's logits (`common/e2e.rs`); or it is refused, by name, for what the step lacks.
//!
//! [`EXPECTED`] is the list of which are run and which refused: a change to the step that
//! starts running a family, or stops, fails here until the list says so.
//!
//! The files are small (two layers of width 64), but each step computes and reads back a
//! whole vocabulary's logits (32 000 to 262 144), a third of a second or more on lavapipe on
//! two loaded cores: so the tests run each fixture's first prompt (5 or 6 tokens), and
//! `LLM_BOOK_GPU_PROMPTS=3` runs all three (up to 78 tokens; one to two minutes a family,
//! by hand).
//! `cargo test --release -p ch13-gpu --test families -- --nocapture` prints max |Δ logit|
//! per family.

mod common;

use ch01_tensors::models;
use ch03_attention::Pairing;
use ch08_gguf::engine::Model;
use ch08_gguf::synth::{self, Arch, Shape, Spec, Weights};
use ch13_gpu::model::{GpuModel, unsupported};
use ch13_gpu::step::{Decoder, Shaders};
use common::e2e;

// ANCHOR: expected
/// What the GPU step does with each of chapter 8's families: `None`, it runs it; `Some(what)`,
/// it refuses it with a message containing `what`.
const EXPECTED: [(Arch, Option<&str>); 6] = [
    (Arch::Llama3, None),  // RoPE frequencies divided by rope_freqs, a tied head
    (Arch::Mistral, None), // SentencePiece vocabulary, a separate LM head
    (Arch::Qwen2, None),   // biases on Q, K and V
    (Arch::Qwen3, None),   // Q/K norms, heads wider than dim / heads
    (Arch::Phi3, None),    // fused QKV and gate/up cut at load, LongRoPE factors and scale
    (Arch::Gemma2, None),  // soft-caps on scores and logits, a window, GELU, post-norms
];
// ANCHOR_END: expected

/// The largest |Δ logit| allowed between the GPU's and the CPU's runs: chapter 8's bound for
/// these Q8_0 files against llama.cpp (its `tests/families.rs`), for the same reason. Both
/// runs multiply the same blocks by activations quantized to Q8_0, and only an activation
/// that lands near a rounding boundary in one run's order of f32 sums rounds the other way.
/// On lavapipe the logits come out the same to the bit, but for Gemma-2's, whose tanh is
/// not the CPU's: a few units in the last place, until one activation flips at position 38
/// of the third prompt and later logits move by up to 0.42 (`LLM_BOOK_GPU_PROMPTS=3`). A
/// change of 3 units in the last place of the CPU's own attention scale moves them the same.
const Q8_0_BOUND: f32 = 0.5;

/// Every RoPE table the step writes (cos and sin, each base's) at positions 0 to the model's
/// last is the one chapter 8 rotates with, bit for bit: Llama 3's frequencies divided by
/// `rope_freqs`, Phi-3's by its LongRoPE factors and its cos and sin scaled. (A few short
/// prompts turn the slow pairs, the ones the factors change most, too little to show it.)
fn rope_tables_match(name: &str, m: &Model, gpu: &GpuModel) {
    let half = m.config.head_dim / 2;
    let last = m.max_positions() - 1;
    for (t, (cpu, ours)) in m.ropes.iter().zip(&gpu.ropes).enumerate() {
        for pos in [0, 1, 5, 77, 1000, last] {
            // chapter 8's rotation of a head whose every pair is (1, 0): (cos, sin)
            let mut want = vec![0.0f32; m.config.head_dim]; // (head_dim)
            want[..half].fill(1.0);
            cpu.apply(&mut want, 1, pos, Pairing::SplitHalves);
            let got = ours.at(pos);
            assert!(
                got.iter()
                    .zip(&want)
                    .all(|(g, w)| g.to_bits() == w.to_bits()),
                "{name}: RoPE table {t} at position {pos}: the step's cos and sin {got:?} are not \
                 chapter 8's {want:?}"
            );
        }
    }
}

/// Chapter 8's synthetic file for `arch` with `weights`, loaded by chapter 8 from a file in
/// the tests' temporary folder, removed once loaded (the mapping stays valid); and the
/// fixture's prompts as llama.cpp's token ids.
fn synthetic(arch: Arch, weights: &str) -> (ch08_gguf::Loaded, Vec<Vec<u32>>) {
    let case = format!("{}-{weights}", arch.name());
    let path = models::workspace_root().join(format!("fixtures/families/{case}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; make the fixtures with `.venv/bin/python scripts/make_family_fixtures.py`",
            path.display()
        )
    });
    let fx: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let arg = |k: &str| {
        fx["synth"][k]
            .as_str()
            .unwrap_or_else(|| panic!("{case}: synth.{k}"))
    };
    assert_eq!(arg("arch"), arch.name(), "{case}: the fixture's synth.arch");
    assert!(
        fx["synth"]["vocab"].is_null(),
        "{case}: the architecture's own vocabulary"
    );
    let spec = Spec {
        arch,
        weights: Weights::parse(arg("weights")).unwrap_or_else(|| panic!("{case}: weights")),
        shape: Shape::parse(arg("shape")).unwrap_or_else(|| panic!("{case}: shape")),
        seed: fx["synth"]["seed"]
            .as_u64()
            .unwrap_or_else(|| panic!("{case}: seed")),
        vocab: None,
    };
    let prompts: Vec<Vec<u32>> = fx["prompts"]
        .as_array()
        .unwrap_or_else(|| panic!("{case}: prompts"))
        .iter()
        .map(|p| {
            let ids = p["ids"].as_array().unwrap_or_else(|| panic!("{case}: ids"));
            ids.iter()
                .map(|id| id.as_u64().expect("a token id") as u32)
                .collect()
        })
        .collect();
    let bytes = synth::build(&spec)
        .unwrap_or_else(|e| panic!("synth {}: {e}", spec.args()))
        .to_bytes();
    let tmp = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("ch13-families-{case}-{}.gguf", std::process::id()));
    std::fs::write(&tmp, &bytes).unwrap();
    let loaded = ch08_gguf::load(&tmp);
    std::fs::remove_file(&tmp).unwrap();
    let loaded = loaded.unwrap_or_else(|e| panic!("synth {}: {e}", spec.args()));
    (loaded, prompts)
}

// ANCHOR: check
/// `arch`'s Q8_0 file: refused as [`EXPECTED`] says, or run over the first prompts of its
/// fixture on the GPU and the CPU, every top-1 miss a near-tie and the top-1 tokens the same
/// at [`e2e::FLOOR_PERCENT`] of positions or more (as the models' teacher-forced tests).
fn check(arch: Arch) {
    let expected = EXPECTED.iter().find(|(a, _)| *a == arch).expect("listed").1;
    let (m, prompts) = synthetic(arch, "q8_0");
    let name = arch.name();
    match (unsupported(&m.model), expected) {
        (Some(why), Some(what)) => {
            assert!(
                why.contains(what),
                "{name}: refused as {why:?}, not for {what:?}"
            );
            eprintln!("{name:<8} refused: {why}");
            return;
        }
        (Some(why), None) => panic!("{name}: the GPU step now refuses it: {why}"),
        (None, Some(what)) => panic!(
            "{name}: the GPU step no longer refuses it ({what}): run it here, then list it as run"
        ),
        (None, None) => {}
    }
    let gpu = common::gpu();
    let shaders = Shaders::new(&gpu).unwrap();
    let model = GpuModel::upload(&gpu, &m.model).unwrap_or_else(|e| panic!("{name}: {e}"));
    let longest_prompt = prompts
        .iter()
        .max_by_key(|p| p.len())
        .expect("a prompt")
        .clone();
    let n = e2e::env_or("LLM_BOOK_GPU_PROMPTS", 1, 1).min(prompts.len());
    let prompts = &prompts[..n];
    rope_tables_match(name, &m.model, &model);
    let longest = prompts.iter().map(Vec::len).max().expect("a prompt");
    let decoder = Decoder::new(&gpu, &shaders, &model, longest).unwrap();
    let engine = m.engine().unwrap();
    let (mut agree, mut positions, mut worst) = (0, 0, 0.0f32);
    for ids in prompts {
        let c = e2e::forced_ids(&decoder, &engine, ids);
        assert!(
            c.misses.is_empty(),
            "{name}, a prompt of {} tokens: the GPU's top token is not the CPU's where the \
             CPU's logits prefer theirs by {} or more (not near-ties): {:?}",
            ids.len(),
            e2e::NEAR_TIE,
            c.misses
        );
        (agree, positions, worst) = (agree + c.agree, positions + c.positions, worst.max(c.worst));
    }
    assert!(
        worst <= Q8_0_BOUND,
        "{name}: a logit differs by {worst} between the GPU and the CPU, more than chapter 8's \
         {Q8_0_BOUND} between itself and llama.cpp"
    );
    assert!(
        agree * 100 >= positions * e2e::FLOOR_PERCENT,
        "{name}: the GPU's top token equals the CPU's at only {agree} of {positions} positions"
    );
    prefill(name, &gpu, &shaders, &model, &engine, &longest_prompt);
    eprintln!(
        "{name:<8} run: {} prompts, top-1 {agree}/{positions}, max |Δ logit| {worst:.2e} \
         (near-tie rule: {})",
        prompts.len(),
        e2e::NEAR_TIE
    );
}
// ANCHOR_END: check

/// The fixture's longest prompt (52 to 78 tokens: past Gemma-2's window of 16) as a prefill
/// in pieces of [`PIECE`] tokens, the last one shorter, then [`AFTER`] tokens decoded: every
/// logit within [`Q8_0_BOUND`] of the CPU's and every top-1 miss a near-tie, as the decode
/// steps above.
fn prefill(
    name: &str,
    gpu: &ch13_gpu::Gpu,
    shaders: &Shaders,
    model: &GpuModel,
    engine: &ch08_gguf::engine::Engine,
    prompt: &[u32],
) {
    let decoder = Decoder::with_chunk(gpu, shaders, model, prompt.len() + AFTER, PIECE).unwrap();
    let c = e2e::prefilled(&decoder, engine, prompt, AFTER);
    assert!(
        c.misses.is_empty() && c.worst <= Q8_0_BOUND,
        "{name}: a prompt of {} tokens as a prefill in pieces of {PIECE}: a logit differs by {} \
         from the CPU's (allowed {Q8_0_BOUND}), top-1 misses that are not near-ties: {:?}",
        prompt.len(),
        c.worst,
        c.misses
    );
    eprintln!(
        "{name:<8} prefill of {} tokens in pieces of {PIECE}, then {AFTER} decoded: top-1 {}/{}, \
         max |Δ logit| {:.2e}",
        prompt.len(),
        c.agree,
        c.positions,
        c.worst
    );
}

/// Tokens a prefill submission takes in [`prefill`]: fewer than the prompts, so they run
/// in two pieces, the first three tiles of 16 tokens (the last part full), the second
/// shorter, so that most of these prompts dispatch fewer tiles for it than were bound.
const PIECE: usize = 40;
/// Tokens decoded after the prefill.
const AFTER: usize = 2;

#[test]
fn llama3() {
    check(Arch::Llama3);
}

#[test]
fn mistral() {
    check(Arch::Mistral);
}

#[test]
fn qwen2() {
    check(Arch::Qwen2);
}

#[test]
fn qwen3() {
    check(Arch::Qwen3);
}

#[test]
fn phi3() {
    check(Arch::Phi3);
}

#[test]
fn gemma2() {
    check(Arch::Gemma2);
}

/// Every architecture chapter 8's synth makes is in [`EXPECTED`], once.
#[test]
fn every_family_is_listed() {
    let listed: Vec<Arch> = EXPECTED.iter().map(|(a, _)| *a).collect();
    assert_eq!(
        listed,
        Arch::ALL,
        "EXPECTED and chapter 8's Arch::ALL differ"
    );
}

/// F32 matrices have no product shader: an F32 file is refused at upload, by its format.
#[test]
fn f32_weights_are_refused_by_format() {
    let (m, _) = synthetic(Arch::Llama3, "f32");
    let gpu = common::gpu();
    let err = GpuModel::upload(&gpu, &m.model)
        .err()
        .expect("an F32 file is uploaded");
    assert!(err.to_string().contains("f32"), "refused as {err}");
    eprintln!("llama3-f32 refused: {err}");
}
