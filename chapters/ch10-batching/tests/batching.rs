//! Batch invariance on both real models: a request's tokens and logits are the same bits
//! whether it runs alone (chapter 9's generator) or in a batch of up to 16 of mixed lengths,
//! with prefix sharing on or off, in small steps or large, and with preemption forced. And no
//! block leaks, whatever mix of finished, cancelled and preempted requests.

use std::sync::OnceLock;
use std::sync::mpsc::Receiver;

use ch01_tensors::models;
use ch09_generate::{Sampler, SamplerConfig};
use ch10_batching::seq::KvPrecision;
use ch10_batching::{BatchEngine, Config, Event, FinishReason, Finished, Request};

fn smollm2() -> &'static ch08_gguf::Loaded {
    static M: OnceLock<ch08_gguf::Loaded> = OnceLock::new();
    M.get_or_init(|| {
        let p = models::require(&models::smollm2_gguf()).unwrap_or_else(|e| panic!("{e}"));
        ch08_gguf::load(&p).unwrap()
    })
}

fn gemma() -> &'static ch08_gguf::Loaded {
    static M: OnceLock<ch08_gguf::Loaded> = OnceLock::new();
    M.get_or_init(|| {
        let p = models::require(&models::gemma3_gguf()).unwrap_or_else(|e| panic!("{e}"));
        ch08_gguf::load(&p).unwrap()
    })
}

/// Blocks of 16 positions; `n_blocks` of them, `budget` rows a step, `max_seqs` at once.
fn config(
    n_blocks: usize,
    budget: usize,
    max_seqs: usize,
    sharing: bool,
    kv: KvPrecision,
) -> Config {
    Config {
        block_size: 16,
        n_blocks,
        max_batch_tokens: budget,
        max_seqs,
        prefix_sharing: sharing,
        kv_precision: kv,
    }
}

/// Sixteen requests: mixed prompt lengths, some sharing a long prefix, half greedy and half
/// sampled with their own seeds, mixed reply lengths.
fn requests(m: &ch08_gguf::Loaded, n_tokens: usize) -> Vec<Request> {
    let shared = "You are a helpful assistant. Answer in one short sentence, and never use more words than needed. ";
    let tails = [
        "The capital of France is",
        "Name a fruit:",
        "1, 2, 3,",
        "Once upon a time",
        "The opposite of hot is",
        "Water boils at",
        "My favourite colour is",
        "A week has",
    ];
    let mut out = Vec::new();
    for (i, tail) in tails.iter().enumerate() {
        for with_prefix in [true, false] {
            let text = if with_prefix {
                format!("{shared}{tail}")
            } else {
                tail.to_string()
            };
            let sampling = if (i + with_prefix as usize).is_multiple_of(2) {
                SamplerConfig {
                    temperature: 0.0,
                    ..SamplerConfig::default()
                }
            } else {
                SamplerConfig {
                    seed: 100 + i as u64,
                    ..SamplerConfig::default()
                }
            };
            out.push(Request {
                prompt: m.tokenizer.encode_prompt(&text, true),
                max_tokens: n_tokens - i % 3,
                sampling,
                stops: Vec::new(),
                ignore_eos: false,
                keep_logits: true,
            });
        }
    }
    out
}

/// What the request gives alone: chapter 9's generator's tokens, and the logits before
/// each from chapter 8's forward pass over chapter 9's cache.
fn alone(m: &ch08_gguf::Loaded, r: &Request) -> (Vec<u32>, Vec<Vec<f32>>) {
    let e = m.engine().unwrap();
    let end = &m.model.config.eos_token_ids;
    let mut s = Sampler::new(r.sampling.clone());
    let g = ch09_generate::generate(
        &e,
        &m.tokenizer.tokenizer,
        end,
        &r.prompt,
        r.max_tokens,
        &mut s,
        &[],
        &mut |_| {},
    )
    .unwrap();
    let mut cache = e.new_cache(r.prompt.len() + r.max_tokens).unwrap();
    let mut logits = vec![e.forward(&mut cache, &r.prompt, 0).unwrap()];
    for (i, &id) in g.ids.iter().enumerate().take(g.ids.len() - 1) {
        logits.push(e.forward(&mut cache, &[id], r.prompt.len() + i).unwrap());
    }
    (g.ids, logits)
}

/// Runs every request through one engine until all are done.
fn batched(
    m: &'static ch08_gguf::Loaded,
    reqs: &[Request],
    cfg: Config,
) -> Vec<(Vec<u32>, Vec<Vec<f32>>, Finished)> {
    let mut be = BatchEngine::new(m.engine().unwrap(), &m.tokenizer.tokenizer, cfg).unwrap();
    let rxs: Vec<Receiver<Event>> = reqs
        .iter()
        .map(|r| be.submit(r.clone()).unwrap().1)
        .collect();
    let mut steps = 0;
    while be.pending() > 0 {
        be.step().unwrap();
        steps += 1;
        assert!(steps < 10_000, "the engine made no progress");
    }
    assert_eq!(
        be.free_blocks(),
        cfg.n_blocks,
        "every block is back in the pool"
    );
    rxs.iter()
        .map(|rx| {
            let (mut ids, mut logits) = (Vec::new(), Vec::new());
            for ev in rx.try_iter() {
                match ev {
                    Event::Token { id, logits: l, .. } => {
                        ids.push(id);
                        logits.push(l.unwrap());
                    }
                    Event::Done(f) => return (ids, logits, f),
                }
            }
            panic!("a request ended without Done")
        })
        .collect()
}

fn check(m: &'static ch08_gguf::Loaded, n_tokens: usize, small_pool: usize) {
    let reqs = requests(m, n_tokens);
    let want: Vec<_> =
        ch07_simd_parallel::pool::in_pool(2, || reqs.iter().map(|r| alone(m, r)).collect())
            .unwrap();
    let cfg = |n_blocks, budget, sharing| config(n_blocks, budget, 16, sharing, KvPrecision::F32);
    let name = m.model.family.name;
    for (what, c, one_by_one) in [
        ("alone in the engine", cfg(64, 512, false), true),
        ("16 at once, 512-token steps", cfg(256, 512, true), false),
        (
            "16 at once, prefix sharing, 40-token steps",
            cfg(256, 40, true),
            false,
        ),
        (
            "16 at once, no sharing, 24-token steps",
            cfg(256, 24, false),
            false,
        ),
        (
            "16 at once, sharing, a small pool (preemption)",
            cfg(small_pool, 64, true),
            false,
        ),
    ] {
        let got: Vec<_> = if one_by_one {
            reqs.iter()
                .flat_map(|r| {
                    ch07_simd_parallel::pool::in_pool(2, || batched(m, std::slice::from_ref(r), c))
                        .unwrap()
                })
                .collect()
        } else {
            ch07_simd_parallel::pool::in_pool(2, || batched(m, &reqs, c)).unwrap()
        };
        for (i, ((ids, logits, f), (want_ids, want_logits))) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                ids, want_ids,
                "{name}, {what}: request {i}'s tokens differ from chapter 9's"
            );
            for (t, (a, b)) in logits.iter().zip(want_logits).enumerate() {
                let same = a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(
                    same,
                    "{name}, {what}: request {i}'s logits before token {t} are not chapter 9's bits"
                );
            }
            assert_ne!(f.reason, FinishReason::Cancelled);
        }
        let preempted: usize = got.iter().map(|g| g.2.preemptions).sum();
        let cached: usize = got.iter().map(|g| g.2.cached_tokens).sum();
        eprintln!(
            "{name}, {what}: {preempted} preemptions, {cached} prompt tokens from the prefix cache"
        );
        if what.contains("preemption") {
            assert!(
                preempted > 0,
                "{name}: the small pool was meant to force preemption"
            );
        }
        if what.contains("prefix sharing") {
            assert!(
                cached > 0,
                "{name}: the shared prefix was never found in the cache"
            );
        }
    }
}

#[test]
fn smollm2_is_batch_invariant() {
    check(smollm2(), 8, 9);
}

#[test]
fn gemma3_is_batch_invariant() {
    check(gemma(), 6, 4);
}

#[test]
fn no_block_leaks_after_finished_cancelled_and_preempted_requests() {
    let m = smollm2();
    let cfg = config(8, 32, 8, true, KvPrecision::F32);
    let mut be = BatchEngine::new(m.engine().unwrap(), &m.tokenizer.tokenizer, cfg).unwrap();
    let mut reqs = requests(m, 24);
    reqs.iter_mut()
        .for_each(|r| (r.keep_logits, r.ignore_eos) = (false, true));
    let mut ids = Vec::new();
    let mut rxs = Vec::new();
    for r in reqs.into_iter().take(10) {
        let (id, rx) = be.submit(r).unwrap();
        ids.push(id);
        rxs.push(rx);
    }
    drop(rxs.pop()); // a client that went away: cancelled at its next token
    let mut steps = 0;
    ch07_simd_parallel::pool::in_pool(2, || {
        while be.pending() > 0 {
            be.step().unwrap();
            steps += 1;
            if steps == 3 {
                be.cancel(ids[1]).unwrap(); // running by now
                be.cancel(ids[8]).unwrap(); // still waiting
                assert!(
                    be.cancel(ids[1]).is_err(),
                    "a cancelled request cannot be cancelled again"
                );
            }
        }
    })
    .unwrap();
    assert_eq!(be.free_blocks(), 8, "a block leaked");
    let reasons: Vec<Finished> = rxs
        .iter()
        .map(|rx| {
            rx.try_iter()
                .find_map(|e| {
                    if let Event::Done(f) = e {
                        Some(f)
                    } else {
                        None
                    }
                })
                .unwrap()
        })
        .collect();
    assert_eq!(reasons[1].reason, FinishReason::Cancelled);
    assert_eq!(reasons[8].reason, FinishReason::Cancelled);
    assert!(
        reasons.iter().map(|f| f.preemptions).sum::<usize>() > 0,
        "8 blocks were meant to force preemption"
    );
    assert!(be.cancel(ids[0]).is_err(), "a finished request is unknown");
}

#[test]
fn requests_that_cannot_fit_are_refused_at_submission_with_the_numbers() {
    let m = smollm2();
    let cfg = config(4, 32, 8, true, KvPrecision::F32);
    let mut be = BatchEngine::new(m.engine().unwrap(), &m.tokenizer.tokenizer, cfg).unwrap();
    let e = be
        .submit(Request::greedy(vec![1; 60], 10))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("needs 5 KV blocks") && e.contains("has 4"),
        "{e}"
    );
    let e = be
        .submit(Request::greedy(vec![1; 10], 1 << 20))
        .unwrap_err()
        .to_string();
    assert!(e.contains("8192"), "{e}");
    assert!(be.submit(Request::greedy(vec![], 10)).is_err());
    assert!(be.submit(Request::greedy(vec![1], 0)).is_err());
    assert!(be.submit(Request::greedy(vec![u32::MAX], 1)).is_err());
    for bad in [
        Config {
            max_batch_tokens: 0,
            ..cfg
        },
        Config {
            max_batch_tokens: 1 << 30,
            ..cfg
        },
        Config { n_blocks: 0, ..cfg },
        Config {
            max_seqs: 64,
            ..cfg
        },
    ] {
        assert!(
            BatchEngine::new(m.engine().unwrap(), &m.tokenizer.tokenizer, bad).is_err(),
            "{bad:?}"
        );
    }
    let e = Config::with_kv_mb(&m.engine().unwrap(), 0, 64)
        .unwrap_err()
        .to_string();
    assert!(e.contains("too small for one block"), "{e}");
    assert_eq!(be.free_blocks(), 4);
}

#[test]
fn f16_keys_and_values_are_batch_invariant_too() {
    f16_check(smollm2(), 8, 9);
}

/// Gemma-3's heads of 256 go a part of a KV head's group a task when one sequence decodes
/// alone, and a whole row a task in a batch: the same bits either way.
#[test]
fn gemma3_with_f16_keys_and_values_is_batch_invariant_too() {
    f16_check(gemma(), 6, 4);
}

/// [`check`] for f16 blocks: each request alone (f16) against all of them batched, with
/// sharing and with a pool of `small_pool` blocks; and what f16 costs against f32.
fn f16_check(m: &'static ch08_gguf::Loaded, n_tokens: usize, small_pool: usize) {
    let reqs = requests(m, n_tokens);
    let cfg = |n_blocks, budget, sharing| config(n_blocks, budget, 16, sharing, KvPrecision::F16);
    let run = |reqs: &[Request], c: Config| {
        ch07_simd_parallel::pool::in_pool(2, || batched(m, reqs, c)).unwrap()
    };
    let alone: Vec<_> = reqs
        .iter()
        .flat_map(|r| run(std::slice::from_ref(r), cfg(64, 512, false)))
        .collect();
    let f32_alone: Vec<_> = ch07_simd_parallel::pool::in_pool(2, || {
        reqs.iter().map(|r| self::alone(m, r)).collect::<Vec<_>>()
    })
    .unwrap();
    for (what, c) in [
        ("sharing, 40-token steps", cfg(256, 40, true)),
        ("a small pool", cfg(small_pool, 64, true)),
    ] {
        let got = run(&reqs, c);
        let preempted: usize = got.iter().map(|g| g.2.preemptions).sum();
        for (i, (g, a)) in got.iter().zip(&alone).enumerate() {
            assert_eq!(
                g.0, a.0,
                "f16, {what}: request {i}'s tokens differ from the request alone"
            );
            let same =
                g.1.iter()
                    .flatten()
                    .zip(a.1.iter().flatten())
                    .all(|(x, y)| x.to_bits() == y.to_bits());
            assert!(
                same,
                "f16, {what}: request {i}'s logits are not the bits it gets alone"
            );
        }
        eprintln!("f16, {what}: {preempted} preemptions, invariant");
    }
    // what f16 costs: the first logits of each request against f32's
    let (mut worst, mut same_tokens) = (0.0f32, 0);
    for (a, b) in alone.iter().zip(&f32_alone) {
        worst = a.1[0]
            .iter()
            .zip(&b.1[0])
            .map(|(x, y)| (x - y).abs())
            .fold(worst, f32::max);
        same_tokens += usize::from(a.0 == b.0);
    }
    eprintln!(
        "f16 against f32: largest difference of a first logit {worst:.4}; {same_tokens} of {} replies the same",
        reqs.len()
    );
}

#[test]
fn a_fully_cached_prompt_copies_its_last_shared_block_before_writing_it() {
    // 32 tokens = two full blocks: a second request with the same prompt finds both, and
    // must still run its last token, whose keys go into block 1, shared with the first
    let m = smollm2();
    let prompt = m.tokenizer.encode_prompt("The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog again", true);
    let prompt: Vec<u32> = prompt.iter().cycle().take(32).copied().collect();
    let mut req = Request::greedy(prompt.clone(), 6);
    req.keep_logits = true;
    let want = ch07_simd_parallel::pool::in_pool(2, || alone(m, &req)).unwrap();
    let mut be = BatchEngine::new(
        m.engine().unwrap(),
        &m.tokenizer.tokenizer,
        config(16, 64, 8, true, KvPrecision::F32),
    )
    .unwrap();
    let collect = |rx: &Receiver<Event>| -> (Vec<u32>, Vec<Vec<f32>>, Option<Finished>) {
        let (mut ids, mut logits, mut done) = (Vec::new(), Vec::new(), None);
        for ev in rx.try_iter() {
            match ev {
                Event::Token { id, logits: l, .. } => {
                    ids.push(id);
                    logits.push(l.unwrap());
                }
                Event::Done(f) => done = Some(f),
            }
        }
        (ids, logits, done)
    };
    let (mut out, mut rxs) = (Vec::new(), Vec::new());
    ch07_simd_parallel::pool::in_pool(2, || {
        rxs.push(be.submit(req.clone()).unwrap().1);
        be.step().unwrap(); // the first request's prompt is computed, its blocks indexed
        rxs.push(be.submit(req.clone()).unwrap().1); // shares blocks 0 and 1, copies 1
        while be.pending() > 0 {
            be.step().unwrap();
        }
        rxs.push(be.submit(req.clone()).unwrap().1); // finds them free but indexed: takes them back
        while be.pending() > 0 {
            be.step().unwrap();
        }
    })
    .unwrap();
    for rx in &rxs {
        out.push(collect(rx));
    }
    for (i, (ids, logits, done)) in out.iter().enumerate() {
        assert_eq!(ids, &want.0, "request {i}'s tokens differ from chapter 9's");
        assert!(
            logits
                .iter()
                .flatten()
                .zip(want.1.iter().flatten())
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "request {i}'s logits"
        );
        let cached = done.as_ref().unwrap().cached_tokens;
        assert_eq!(
            cached,
            if i == 0 { 0 } else { 31 },
            "request {i}: 31 of its 32 prompt tokens come from the cache"
        );
    }
    assert_eq!(be.free_blocks(), 16, "a block leaked");
}
