//! Chapter 6 on the real model: perplexity against llama.cpp's, logits against llama.cpp's
//! Q4_1 run, and the cache still changing nothing.
//!
//! `cargo test --release -p ch06-quantization --test smollm2 -- --nocapture` prints the
//! measured numbers. A missing model fails with the command that fetches it.

use std::sync::OnceLock;

use ch01_tensors::models;
use ch02_tokenizer::Tokenizer;
use ch04_forward::Model;
use ch04_forward::check;
use ch04_forward::reference::{self, LogitsFixture};
use ch05_kv_cache::KvCache;
use ch06_quantization::eval::{reference_logits, score, window_logits};
use ch06_quantization::forward::QEngine;
use ch06_quantization::{Format, QModel, ScaleRule};

fn model() -> &'static Model {
    static MODEL: OnceLock<Model> = OnceLock::new();
    MODEL.get_or_init(|| {
        let file = models::require(&models::smollm2_hf_dir().join("model.safetensors"))
            .unwrap_or_else(|e| panic!("{e}"));
        Model::load(file.parent().unwrap()).unwrap_or_else(|e| panic!("loading SmolLM2: {e}"))
    })
}

fn quantized(format: Format) -> QModel {
    QModel::quantize(model(), format, ScaleRule::Absmax)
        .unwrap_or_else(|e| panic!("quantizing to {}: {e}", format.name()))
}

/// The committed perplexity text, tokenized as the fixtures tokenize it (no BOS, no specials).
fn text_ids() -> &'static [u32] {
    static IDS: OnceLock<Vec<u32>> = OnceLock::new();
    IDS.get_or_init(|| {
        let tok = Tokenizer::from_file(models::smollm2_hf_dir().join("tokenizer.json"))
            .unwrap_or_else(|e| panic!("{e}"));
        let text = std::fs::read_to_string(
            models::workspace_root().join("fixtures/reference/perplexity-text.txt"),
        )
        .unwrap();
        tok.encode(&text, false)
    })
}

/// The f32 model's logits on every window of the text: the reference for KL and top-1.
fn f32_logits() -> &'static [Vec<f32>] {
    static LOGITS: OnceLock<Vec<Vec<f32>>> = OnceLock::new();
    LOGITS.get_or_init(|| reference_logits(&quantized(Format::F32), text_ids()).unwrap())
}

/// llama.cpp's perplexity for a fixture key of `perplexity.json`.
fn llama_cpp_perplexity(key: &str) -> f64 {
    let path = models::workspace_root().join("fixtures/reference/perplexity.json");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(
        v["models"][key]["scored_tokens"].as_u64(),
        Some(text_ids().len() as u64 - 3),
        "same tokens scored"
    );
    v["models"][key]["perplexity"]
        .as_f64()
        .unwrap_or_else(|| panic!("no perplexity for {key}"))
}

#[test]
fn f32_perplexity_is_llama_cpp_s() {
    let s = score(&quantized(Format::F32), f32_logits(), text_ids()).unwrap();
    let theirs = llama_cpp_perplexity("smollm2-f32");
    let rel = (s.perplexity - theirs).abs() / theirs;
    eprintln!(
        "f32: perplexity {:.4} (llama.cpp F32: {theirs}), {} tokens",
        s.perplexity, s.tokens
    );
    assert_eq!(s.tokens, 698, "the fixtures score 698 tokens of the text");
    assert!(
        rel <= 0.001,
        "f32 perplexity {:.4} is {:.3}% from llama.cpp's {theirs} (allowed 0.1%)",
        s.perplexity,
        rel * 100.0
    );
    assert_eq!(
        (s.kl_mean, s.top1_agreement),
        (0.0, 1.0),
        "the f32 model against itself"
    );
}

#[test]
fn q4_1_perplexity_is_within_1_percent_of_llama_cpp_s() {
    let s = score(&quantized(Format::Q4_1), f32_logits(), text_ids()).unwrap();
    let theirs = llama_cpp_perplexity("smollm2-q4_1");
    let rel = (s.perplexity - theirs).abs() / theirs;
    eprintln!(
        "q4_1: perplexity {:.4} (llama.cpp Q4_1: {theirs}), KL {:.5}, top-1 {:.1}%",
        s.perplexity,
        s.kl_mean,
        100.0 * s.top1_agreement
    );
    assert!(
        rel <= 0.01,
        "Q4_1 perplexity {:.4} is {:.2}% from llama.cpp's {theirs} (allowed 1%)",
        s.perplexity,
        rel * 100.0
    );
    // The f32 weights *are* the Q4_1 values, so what separates the two models is only the
    // activations' rounding to 8 bits (and the Q8_0 embedding): a small KL.
    assert!(
        s.kl_mean < 0.01,
        "KL from f32 is {:.5} nats: too large for activation rounding alone",
        s.kl_mean
    );
}

#[test]
fn q4_1_logits_are_close_to_llama_cpp_q4_1() {
    let fx: LogitsFixture =
        reference::load_named("logits-smollm2-q4_1.json").unwrap_or_else(|e| panic!("{e}"));
    let m = quantized(Format::Q4_1);
    let vocab = m.config.vocab_size;
    let (mut agree, mut positions, mut worst) = (0, 0, 0.0f64);
    let mut misses = Vec::new(); // (prompt, position, llama.cpp's margin between its top two)
    for p in &fx.prompts {
        let logits = window_logits(&m, &p.ids).unwrap();
        let c = check::compare_logits(&logits, vocab, p);
        eprintln!(
            "llama.cpp Q4_1, {:<26} argmax {}/{}, max |Δ logit| over top-20 {:.3}",
            check::short(&p.prompt),
            c.argmax_agree,
            c.positions,
            c.max_diff
        );
        for &t in &c.argmax_differ {
            let top = &p.positions[t].top;
            let margin = f64::from(top[0].1) - f64::from(top[1].1);
            eprintln!(
                "  miss at position {t}: llama.cpp's top two are {:.3} apart",
                margin
            );
            misses.push((check::short(&p.prompt), t, margin));
        }
        agree += c.argmax_agree;
        positions += c.positions;
        worst = worst.max(c.max_diff);
    }
    eprintln!("llama.cpp Q4_1: argmax {agree}/{positions}, max |Δ logit| {worst:.3}");
    // Same weights, bit for bit, and the same activation format; what differs is float
    // order in the kernels, llama.cpp's f16 KV cache and its SIMD activation quantizer
    // (127/amax and ties-to-even instead of 1/d and roundf). Each of those alone, tried here,
    // moved single prompts' worst top-20 logit by 0.2–0.3 either way and left the largest
    // difference at 1.2–1.4 (the chat prompt, whose special tokens make outlier activations
    // that share 8-bit blocks with small ones): rounding noise, amplified through 30
    // layers, at the size chapter 4 measured for f32 against this run (0.96). The bound is
    // that measurement with room, not a guarantee.
    assert!(
        worst < 2.0,
        "top-20 logits differ from llama.cpp's Q4_1 run by up to {worst:.3}"
    );
    // A different top token is allowed only where llama.cpp itself nearly had a tie: its top
    // two closer than the noise measured above.
    for (prompt, t, margin) in &misses {
        assert!(
            *margin < worst,
            "prompt {prompt}, position {t}: our top token differs from llama.cpp's, whose top two are {margin:.3} \
             apart, more than the {worst:.3} the two runs differ by anywhere: not a near-tie"
        );
    }
}

#[test]
fn cached_decode_equals_one_pass_bit_for_bit() {
    let m = quantized(Format::Q4_1);
    let ids = &text_ids()[..40];
    let all = window_logits(&m, ids).unwrap(); // one prefill, every position's logits
    let engine = QEngine::new(&m);
    let mut cache = KvCache::new(engine.layout(), ids.len());
    let vocab = m.config.vocab_size;
    let mut step = engine.forward(&mut cache, &ids[..10], 0).unwrap(); // a prefill of 10
    assert_eq!(
        step,
        all[9 * vocab..10 * vocab],
        "prefill of 10 vs one pass: logits after token 9"
    );
    for t in 10..ids.len() {
        step = engine.forward(&mut cache, &ids[t..t + 1], t).unwrap();
        assert_eq!(
            step,
            all[t * vocab..(t + 1) * vocab],
            "decode step at position {t} differs from the one-pass logits"
        );
    }
}
