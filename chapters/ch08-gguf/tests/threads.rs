//! The claims this chapter makes about its prefill kernels, checked at the thread counts they
//! are about.
//!
//! `Matrix::matmul` chooses a product's path by the tokens each band of the prefill would
//! get (`ch08_gguf::matrix::policy::split_for`: a band a thread of rayon's pool up to four,
//! and no more bands than give each 32 tokens): with at least [`ch08_gguf::matrix::FEW`]
//! (16) a band, the tokens are split into bands and each band runs the prefill kernels
//! (eight tokens a row; four interleaved on AVX-512 VNNI where `LLM_BOOK_PREFILL=quads`
//! asks) over every weight, its rows shared by the threads the band has; with fewer, the
//! rows are split and every block of rows meets all the tokens, eight at a time where the
//! matrix has an eight-token kernel. A test in the default pool would reach one path or
//! another depending on the machine's cores, so every test here names its thread counts,
//! and runs three prompts, one for each path ([`PROMPTS`]), each some full groups of eight
//! and five left over, so the leftover paths run too.
//!
//! `cargo test --release -p ch08-gguf --test threads -- --nocapture` prints what it checked.
//! A missing model fails with the command that fetches it.

use std::sync::OnceLock;

use ch01_tensors::models;
use ch04_forward::Model as F32Model;
use ch05_kv_cache::KvCache;
use ch06_quantization::forward::QEngine;
use ch06_quantization::{Format, QModel, ScaleRule};
use ch07_simd_parallel::pool::in_pool;
use ch08_gguf::Loaded;
use ch08_gguf::engine::Engine;

/// The thread counts checked: one, the book's machine's two, and four, where 69 tokens
/// are two bands of two runs of rows.
const THREADS: [usize; 3] = [1, 2, 4];
/// The prompt lengths, a path each (on the default cut; [`paths`] checks it): 13 tokens
/// split the rows (under 16); 37 are one band whose rows the threads share (under 64); 69
/// are two bands on two and four threads (a band a thread on two, two runs of rows each
/// on four).
const PROMPTS: [usize; 3] = [13, 37, 69];

/// The bands (and runs of rows in each) a prompt of `n` tokens is cut into on `threads`
/// threads, checked against what [`PROMPTS`] says, so that a change of the cut that leaves
/// a path untested fails here.
fn paths(n: usize, threads: usize) {
    use ch08_gguf::matrix::{FEW, policy::split_for};
    let cut = split_for(None, n, threads);
    let want = match n {
        13 => {
            assert!(n < FEW, "13 tokens no longer go by rows");
            return;
        }
        37 => (1, threads),
        69 => (2.min(threads), threads.div_ceil(2)),
        _ => unreachable!("a length PROMPTS does not have"),
    };
    assert_eq!(
        cut, want,
        "{n} tokens on {threads} threads: (bands, runs of rows)"
    );
}

fn smollm2() -> &'static Loaded {
    static M: OnceLock<Loaded> = OnceLock::new();
    M.get_or_init(|| {
        let path = models::require(&models::smollm2_gguf()).unwrap_or_else(|e| panic!("{e}"));
        ch08_gguf::load(&path).unwrap_or_else(|e| panic!("loading {}: {e}", path.display()))
    })
}

fn gemma3() -> &'static Loaded {
    static M: OnceLock<Loaded> = OnceLock::new();
    M.get_or_init(|| {
        let path = models::require(&models::gemma3_gguf()).unwrap_or_else(|e| panic!("{e}"));
        ch08_gguf::load(&path).unwrap_or_else(|e| panic!("loading {}: {e}", path.display()))
    })
}

/// `n` token ids spread over the vocabulary.
fn prompt(vocab: usize, n: usize) -> Vec<u32> {
    (0..n as u64)
        .map(|i| ((i * 7919 + 13) % vocab as u64) as u32)
        .collect()
}

/// The index of the first logit whose bits differ, if any.
fn first_difference(a: &[f32], b: &[f32]) -> Option<usize> {
    assert_eq!(a.len(), b.len(), "different numbers of logits");
    a.iter()
        .zip(b)
        .position(|(x, y)| x.to_bits() != y.to_bits())
}

/// A prefill of a prompt of `n` tokens, then the same prompt one decode step at a time,
/// both on `threads` threads: every position's logits the same bits.
fn prefill_equals_decode(name: &str, m: &Loaded, threads: usize, n: usize) {
    paths(n, threads);
    let e = m.engine().unwrap_or_else(|e| panic!("{e}"));
    let vocab = m.model.config.vocab_size;
    let ids = prompt(vocab, n);
    let (prefill, decode) = in_pool(threads, || {
        let prefill = e.window_logits(&ids).unwrap();
        let mut cache = e.new_cache(ids.len()).unwrap();
        let decode: Vec<f32> = ids
            .iter()
            .enumerate()
            .flat_map(|(pos, &id)| e.forward(&mut cache, &[id], pos).unwrap())
            .collect();
        (prefill, decode)
    })
    .unwrap();
    if let Some(i) = first_difference(&prefill, &decode) {
        panic!(
            "{name}, {threads} thread(s): position {}'s logits from a {n}-token prefill \
             differ from its decode step's (logit {}: {} against {})",
            i / vocab,
            i % vocab,
            prefill[i],
            decode[i]
        );
    }
}

/// Each prompt's logits on every thread count equal its logits on one.
fn same_on_every_thread_count(name: &str, e: &Engine<'_>, vocab: usize) {
    for n in PROMPTS {
        let ids = prompt(vocab, n);
        let one = in_pool(1, || e.window_logits(&ids).unwrap()).unwrap();
        for threads in THREADS {
            paths(n, threads);
            let got = in_pool(threads, || e.window_logits(&ids).unwrap()).unwrap();
            if let Some(i) = first_difference(&one, &got) {
                panic!(
                    "{name}: {n} tokens on {threads} threads, position {}'s logits differ \
                     from one thread's",
                    i / vocab
                );
            }
        }
    }
}

#[test]
fn smollm2_prefill_equals_decode_on_1_2_and_4_threads() {
    for n in PROMPTS {
        for threads in THREADS {
            prefill_equals_decode("SmolLM2", smollm2(), threads, n);
        }
    }
    eprintln!(
        "SmolLM2: prompts of {PROMPTS:?} tokens, prefill = decode bit for bit on {THREADS:?} threads"
    );
}

#[test]
fn gemma3_prefill_equals_decode_on_1_2_and_4_threads() {
    for n in PROMPTS {
        for threads in THREADS {
            prefill_equals_decode("Gemma-3", gemma3(), threads, n);
        }
    }
    eprintln!(
        "Gemma-3: prompts of {PROMPTS:?} tokens, prefill = decode bit for bit on {THREADS:?} threads"
    );
}

#[test]
fn both_models_give_the_same_logits_on_1_2_and_4_threads() {
    for (name, m) in [("SmolLM2", smollm2()), ("Gemma-3", gemma3())] {
        let e = m.engine().unwrap_or_else(|e| panic!("{e}"));
        same_on_every_thread_count(name, &e, m.model.config.vocab_size);
    }
}

/// The file's SmolLM2 through this chapter's engine, whose prefill takes the kernels of the
/// Gemma section where the CPU has them, against chapter 7's engine on the in-memory Q4_1
/// model, whose prefill takes chapter 7's four-token kernel: the same bits, on every
/// thread count.
#[test]
fn smollm2_prefill_is_chapter_7_s_on_1_2_and_4_threads() {
    let file = models::require(&models::smollm2_hf_dir().join("model.safetensors"))
        .unwrap_or_else(|e| panic!("{e}"));
    let f32_model = F32Model::load(file.parent().unwrap()).unwrap();
    let theirs = QModel::quantize(&f32_model, Format::Q4_1, ScaleRule::Absmax).unwrap();
    let (isa, k) = ch07_simd_parallel::kernels::detect().unwrap();
    let chapter_7 = QEngine::with_kernels(&theirs, k);
    let ours = smollm2().engine().unwrap();
    let vocab = theirs.config.vocab_size;
    for (n, threads) in PROMPTS.into_iter().flat_map(|n| THREADS.map(|t| (n, t))) {
        paths(n, threads);
        let ids = prompt(vocab, n);
        let (a, b) = in_pool(threads, || {
            let mut cache = KvCache::new(chapter_7.layout(), ids.len());
            let a = chapter_7.forward_all(&mut cache, &ids, 0).unwrap();
            (a, ours.window_logits(&ids).unwrap())
        })
        .unwrap();
        if let Some(i) = first_difference(&a, &b) {
            panic!(
                "{isa}, {n} tokens on {threads} thread(s): position {}'s logits from the GGUF \
                 differ from chapter 7's in-memory Q4_1 model",
                i / vocab
            );
        }
    }
    eprintln!("{isa}: SmolLM2 from the file = chapter 7's logits on {THREADS:?} threads");
}

/// Decode steps of `ids` on `threads` threads, every position's logits end to end.
fn decode_logits(m: &Loaded, ids: &[u32], threads: usize) -> Vec<f32> {
    let e = m.engine().unwrap_or_else(|e| panic!("{e}"));
    in_pool(threads, || {
        let mut cache = e.new_cache(ids.len()).unwrap();
        ids.iter()
            .enumerate()
            .flat_map(|(pos, &id)| e.forward(&mut cache, &[id], pos).unwrap())
            .collect()
    })
    .unwrap()
}

/// A decode step's products and attention are cut by their bytes and run on a team of
/// threads (chapter 7's `team`): more threads than the machine has cores, and more than a
/// small product has tasks, must still give one thread's bits.
#[test]
fn decode_steps_on_3_and_16_threads_equal_one_thread_s() {
    for (name, m) in [("SmolLM2", smollm2()), ("Gemma-3", gemma3())] {
        let vocab = m.model.config.vocab_size;
        let ids = &prompt(vocab, 12);
        let one = decode_logits(m, ids, 1);
        for threads in [3, 16] {
            let got = decode_logits(m, ids, threads);
            if let Some(i) = first_difference(&one, &got) {
                panic!(
                    "{name}: decode step {} on {threads} threads differs from one thread's \
                     (logit {}: {} against {})",
                    i / vocab,
                    i % vocab,
                    got[i],
                    one[i]
                );
            }
        }
    }
}

/// Past eight threads an engine times its first decode steps at the pool's threads, half
/// and a quarter in turn, then keeps one count (`engine/tune.rs`): the steps of the trial,
/// each on another count, and those after it give one thread's bits.
#[test]
fn decode_steps_while_the_engine_picks_its_threads_equal_one_thread_s() {
    use ch08_gguf::engine::tune::{TRIAL_STEPS, counts, tuning};
    let m = smollm2();
    let vocab = m.model.config.vocab_size;
    let ids = &prompt(vocab, 3 * TRIAL_STEPS + 8);
    let one = decode_logits(m, ids, 1);
    let e = m.engine().unwrap_or_else(|e| panic!("{e}"));
    let got: Vec<f32> = in_pool(16, || {
        let mut cache = e.new_cache(ids.len()).unwrap();
        ids.iter()
            .enumerate()
            .flat_map(|(pos, &id)| e.forward(&mut cache, &[id], pos).unwrap())
            .collect()
    })
    .unwrap();
    if let Some(i) = first_difference(&one, &got) {
        panic!(
            "SmolLM2: decode step {} on 16 threads, the engine choosing its count, differs \
             from one thread's (logit {}: {} against {})",
            i / vocab,
            i % vocab,
            got[i],
            one[i]
        );
    }
    if tuning().unwrap_or(false) {
        let chosen = e.decode_threads_chosen();
        assert!(
            chosen.is_some_and(|c| counts(16).contains(&c)),
            "after {} steps on 16 threads the engine should have chosen one of {:?}, not \
             {chosen:?}",
            ids.len(),
            counts(16)
        );
    }
}
