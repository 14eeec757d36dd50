//! The fast path on the real model: the same tokens as chapter 6's scalar path, the same
//! perplexity within 0.1%, the same logits with one thread or two, and from a prefill as
//! from decode steps.
//!
//! `cargo test --release -p ch07-simd-parallel --test smollm2 -- --nocapture` prints what
//! it compared. A missing model fails with the command that fetches it.

use std::sync::OnceLock;

use ch01_tensors::models;
use ch02_tokenizer::Tokenizer;
use ch04_forward::Model;
use ch04_forward::reference::{self, GreedyFixture};
use ch05_kv_cache::KvCache;
use ch06_quantization::eval::reference_logits;
use ch06_quantization::forward::QEngine;
use ch06_quantization::{Format, QModel, Scalar, ScaleRule};
use ch07_simd_parallel::Isa;
use ch07_simd_parallel::kernels::for_isa;
use ch07_simd_parallel::pool::in_pool;

/// Tokens of greedy text that must agree with chapter 6's.
const GREEDY_CHECKED: usize = 32;

fn model() -> &'static QModel {
    static MODEL: OnceLock<QModel> = OnceLock::new();
    MODEL.get_or_init(|| {
        let file = models::require(&models::smollm2_hf_dir().join("model.safetensors"))
            .unwrap_or_else(|e| panic!("{e}"));
        let m =
            Model::load(file.parent().unwrap()).unwrap_or_else(|e| panic!("loading SmolLM2: {e}"));
        QModel::quantize(&m, Format::Q4_1, ScaleRule::Absmax).unwrap()
    })
}

fn simd_levels() -> Vec<Isa> {
    let levels: Vec<Isa> = Isa::available()
        .into_iter()
        .filter(|&i| i != Isa::Scalar)
        .collect();
    if levels.is_empty() {
        eprintln!(
            "no SIMD level runs here (the CPU has none, or LLM_BOOK_ISA=scalar caps it), so \
             none to compare with chapter 6's path; the logits test still compares the \
             scalar path on 1 and 2 threads"
        );
    }
    levels
}

#[test]
fn greedy_tokens_equal_chapter_6s_on_every_level() {
    let fx: GreedyFixture =
        reference::load_named("greedy-smollm2-q4_1.json").unwrap_or_else(|e| panic!("{e}"));
    let scalar = QEngine::new(model());
    for p in &fx.prompts {
        let want = scalar
            .greedy(&p.prompt_ids, GREEDY_CHECKED, false, &mut |_| {})
            .unwrap()
            .ids;
        for isa in simd_levels() {
            let engine = QEngine::with_kernels(model(), for_isa(isa).unwrap());
            for threads in [1, 2] {
                let got = in_pool(threads, || {
                    engine
                        .greedy(&p.prompt_ids, GREEDY_CHECKED, false, &mut |_| {})
                        .unwrap()
                        .ids
                })
                .unwrap();
                let first = got.iter().zip(&want).position(|(a, b)| a != b);
                assert!(
                    first.is_none(),
                    "{isa}, {threads} thread(s), prompt {:?}: token {} is {} where chapter 6's scalar path chose {}",
                    p.prompt,
                    first.unwrap_or(0),
                    got[first.unwrap_or(0)],
                    want[first.unwrap_or(0)]
                );
            }
            eprintln!(
                "{isa}: {:?}: {GREEDY_CHECKED} tokens equal to chapter 6's, 1 and 2 threads",
                p.prompt
            );
        }
    }
}

/// Every output of a matrix product, every attention dot and every activation block is
/// computed in the same order on every level and split, so the logits are the same bits
/// whatever the kernels and however many threads.
#[test]
fn logits_are_the_same_bits_on_every_level_and_thread_count() {
    let ids: Vec<u32> = (0..40u32).map(|i| (i * 997 + 5) % 49152).collect();
    let want = in_pool(1, || QEngine::new(model()).window_logits(&ids).unwrap()).unwrap();
    for isa in Isa::available() {
        let engine = QEngine::with_kernels(model(), for_isa(isa).unwrap());
        for threads in [1, 2] {
            let got = in_pool(threads, || engine.window_logits(&ids).unwrap()).unwrap();
            let first = got
                .iter()
                .zip(&want)
                .position(|(a, b)| a.to_bits() != b.to_bits());
            assert!(
                first.is_none(),
                "{isa}, {threads} thread(s): logit {} differs from the scalar path's",
                first.unwrap_or(0)
            );
        }
    }
}

#[test]
fn perplexity_is_chapter_6s_within_0_1_percent() {
    let tok = Tokenizer::from_file(models::smollm2_hf_dir().join("tokenizer.json"))
        .unwrap_or_else(|e| panic!("{e}"));
    let text = std::fs::read_to_string(
        models::workspace_root().join("fixtures/reference/perplexity-text.txt"),
    )
    .unwrap();
    let ids = tok.encode(&text, false);
    let f32_model = QModel::quantize(
        &Model::load(&models::smollm2_hf_dir()).unwrap(),
        Format::F32,
        ScaleRule::Absmax,
    )
    .unwrap();
    let reference = reference_logits(&f32_model, &ids).unwrap();
    let scalar = QEngine::with_kernels(model(), &Scalar)
        .score(&reference, &ids)
        .unwrap();
    for isa in simd_levels() {
        let fast = QEngine::with_kernels(model(), for_isa(isa).unwrap())
            .score(&reference, &ids)
            .unwrap();
        let rel = (fast.perplexity - scalar.perplexity).abs() / scalar.perplexity;
        eprintln!(
            "{isa}: perplexity {:.4} (scalar {:.4}), KL from f32 {:.5}",
            fast.perplexity, scalar.perplexity, fast.kl_mean
        );
        assert!(
            rel <= 0.001,
            "{isa}: perplexity {:.4} is {:.3}% from the scalar path's {:.4}",
            fast.perplexity,
            rel * 100.0,
            scalar.perplexity
        );
    }
}

/// Chapter 5's promise, kept through this chapter's kernels on the fastest level this process
/// runs: a token's logits are the same bits whether it came in a prefill or alone in a decode
/// step. The 40-token prefill gives every thread at least four tokens at 1, 2 and 4 threads,
/// so `matmul_with` splits the tokens and runs the four-token kernel; each decode step has one
/// token, so it splits the rows and runs the four-row kernel with its prefetch.
#[test]
fn prefill_and_decode_give_the_same_bits_on_this_cpus_level() {
    let (isa, k) = ch07_simd_parallel::kernels::detect().unwrap_or_else(|e| panic!("{e}"));
    let engine = QEngine::with_kernels(model(), k);
    let ids: Vec<u32> = (0..40u32).map(|i| (i * 997 + 5) % 49152).collect();
    let vocab = model().config.vocab_size;
    for threads in [1, 2, 4] {
        assert!(
            ids.len() >= 4 * threads,
            "the prompt must give each of {threads} threads four tokens to take the prefill split"
        );
        let (prefill, decode) = in_pool(threads, || {
            let prefill = engine.window_logits(&ids).unwrap();
            let mut cache = KvCache::new(engine.layout(), ids.len());
            let decode: Vec<f32> = ids
                .iter()
                .enumerate()
                .flat_map(|(pos, &id)| engine.forward(&mut cache, &[id], pos).unwrap())
                .collect();
            (prefill, decode)
        })
        .unwrap();
        assert_eq!(prefill.len(), ids.len() * vocab);
        let first = prefill
            .iter()
            .zip(&decode)
            .position(|(a, b)| a.to_bits() != b.to_bits());
        assert!(
            first.is_none(),
            "{isa}, {threads} thread(s): position {}'s logits from the prefill differ from its \
             decode step's (logit {}: {} against {})",
            first.unwrap_or(0) / vocab,
            first.unwrap_or(0) % vocab,
            prefill[first.unwrap_or(0)],
            decode[first.unwrap_or(0)]
        );
    }
    eprintln!("{isa}: 40 positions, prefill and decode the same bits on 1, 2 and 4 threads");
}
