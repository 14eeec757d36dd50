//! A decode step's parallel regions: how many, and how many tasks each gets.
//!
//! A region is one hand-out of work to the threads and one wait for all of them, so a step
//! pays for each. SmolLM2's step runs five a layer (the q/k/v group, attention, the output
//! projection, the gate and up pair, the down projection) and one for the LM head; on two
//! threads every one of them must be cut into two tasks or more, or a thread idles through
//! it. On sixteen threads (oversubscribed on a small machine: only the counts matter here)
//! a small product gets fewer tasks than the LM head, whose bytes justify more threads.
//!
//! The same steps are timed part by part (`ch08-gguf regions`): the parts are the layers'
//! products and attention and the LM head, and they add up to no more than the step. And a
//! step's logits are the same bits at any thread count, whatever policy the environment
//! sets for cutting it (`LLM_BOOK_TASK_BYTES`, `LLM_BOOK_DECODE_THREADS`, `LLM_BOOK_IDLE`:
//! run these tests with each set to check one).
//!
//! A missing model fails with the command that fetches it.

use std::sync::{Mutex, MutexGuard, OnceLock};

use ch01_tensors::models;
use ch07_simd_parallel::pool::in_pool;
use ch07_simd_parallel::team::{self, record_regions};
use ch08_gguf::Loaded;
use ch08_gguf::step_parts::{KINDS, record_decode};

/// SmolLM2-135M's layers.
const LAYERS: usize = 30;

/// One test runs here at a time: the log of regions is the process's, and another test's
/// unrecorded steps must not land in it.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

fn smollm2() -> &'static Loaded {
    static M: OnceLock<Loaded> = OnceLock::new();
    M.get_or_init(|| {
        let path = models::require(&models::smollm2_gguf()).unwrap_or_else(|e| panic!("{e}"));
        ch08_gguf::load(&path).unwrap_or_else(|e| panic!("loading {}: {e}", path.display()))
    })
}

/// The tasks of each region of one decode step, after a prompt of four tokens and one
/// unrecorded step, in a pool of `threads`, on all of them (not a count the engine would
/// choose for itself past eight: `team::with_decode_cap` around the steps).
fn step_regions(threads: usize) -> Vec<usize> {
    let _turn = one_at_a_time();
    let engine = smollm2().engine().expect("SmolLM2's engine");
    in_pool(threads, || {
        team::with_decode_cap(threads, || {
            let mut cache = engine.new_cache(8).expect("a cache");
            engine
                .forward(&mut cache, &[1, 2, 3, 4], 0)
                .expect("prefill");
            engine.forward(&mut cache, &[5], 4).expect("a decode step");
            let (step, tasks) = record_regions(|| engine.forward(&mut cache, &[6], 5));
            step.expect("the recorded decode step");
            tasks
        })
    })
    .expect("a pool")
}

#[test]
fn two_threads_every_region_of_a_step_is_shared() {
    let layers = LAYERS;
    let tasks = step_regions(2);
    assert_eq!(
        tasks.len(),
        5 * layers + 1,
        "SmolLM2's decode step should run 5 regions a layer and 1 for the LM head: {tasks:?}"
    );
    assert!(
        tasks.iter().all(|&t| t >= 2),
        "on 2 threads every region should have 2 tasks or more, or a thread idles: {tasks:?}"
    );
}

#[test]
fn sixteen_threads_small_products_take_fewer_tasks_than_the_lm_head() {
    let tasks = step_regions(16);
    println!("16 threads, tasks of each region: {tasks:?}");
    let head = *tasks
        .last()
        .expect("the LM head's region is the step's last");
    let fewest = *tasks.iter().min().expect("regions");
    assert!(
        fewest < head,
        "on 16 threads a small product ({fewest} tasks) should get fewer than the LM head ({head}): {tasks:?}"
    );
    // all 16, or as many as LLM_BOOK_DECODE_THREADS allows a decode region
    let threads = in_pool(16, team::decode_threads).expect("a pool");
    assert!(
        head >= threads,
        "the LM head (about 30 MB of weights) should keep {threads} threads busy, not {head} tasks"
    );
}

#[test]
fn a_step_s_parts_are_its_products_and_attention_and_add_up_to_no_more_than_the_step() {
    let engine = smollm2().engine().expect("SmolLM2's engine");
    for threads in [1, 2, 16] {
        let steps = {
            let _turn = one_at_a_time();
            in_pool(threads, || record_decode(&engine, &[1, 2, 3, 4], 3))
                .expect("a pool")
                .expect("three recorded decode steps")
        };
        for (i, s) in steps.iter().enumerate() {
            let parts = s.parts_seconds();
            assert!(
                parts > 0.0 && parts <= s.seconds,
                "{threads} threads, step {i}: its parts took {parts} s, the step {} s: the \
                 parts are inside the step, one after another",
                s.seconds
            );
            for kind in KINDS {
                let n = s.parts.iter().filter(|p| p.kind == kind).count();
                let want = if kind == "LM head" { 1 } else { LAYERS };
                assert_eq!(
                    n, want,
                    "{threads} threads, step {i}: {n} parts of kind {kind}, not {want}: {:?}",
                    s.parts
                );
            }
            assert_eq!(
                s.parts.len(),
                5 * LAYERS + 1,
                "{threads} threads, step {i}: parts of other kinds: {:?}",
                s.parts
            );
            if threads == 2 {
                assert_eq!(
                    s.regions.len(),
                    5 * LAYERS + 1,
                    "timing the parts must not change the regions: {:?}",
                    s.regions
                );
            }
        }
    }
}

/// Whatever the environment's policy (the tests run with it set, one variable at a time,
/// to check a candidate), a decode step's logits are the same bits at 1, 2, 3 and 16
/// threads (16 oversubscribed on a small machine).
#[test]
fn a_decode_step_is_the_same_bits_at_any_thread_count() {
    let engine = smollm2().engine().expect("SmolLM2's engine");
    let steps = |threads: usize| {
        let _turn = one_at_a_time(); // its parts must not land in another test's recording
        in_pool(threads, || {
            let mut cache = engine.new_cache(8).expect("a cache");
            engine
                .forward(&mut cache, &[1, 2, 3, 4], 0)
                .expect("prefill");
            let a = engine.forward(&mut cache, &[5], 4).expect("a decode step");
            let b = engine.forward(&mut cache, &[6], 5).expect("a decode step");
            [a, b]
        })
        .expect("a pool")
    };
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<u32>>();
    let one = steps(1);
    for threads in [2, 3, 16] {
        let got = steps(threads);
        for (i, (g, w)) in got.iter().zip(&one).enumerate() {
            let first = bits(g).iter().zip(bits(w)).position(|(a, b)| *a != b);
            assert!(
                first.is_none(),
                "decode step {i} on {threads} threads: logit {first:?} differs from one \
                 thread's"
            );
        }
    }
}

#[test]
fn the_profile_times_every_part_inside_real_steps() {
    let engine = smollm2().engine().expect("SmolLM2's engine");
    for (tokens, context) in [(1, 8), (32, 8)] {
        let (ops, step_ms) = {
            let _turn = one_at_a_time();
            ch08_gguf::bench::profile(&engine, 2, tokens, context, 3).expect("a profile")
        };
        let names: Vec<&str> = ops.iter().map(|o| o.op).collect();
        assert_eq!(
            names,
            [
                "Q, K, V",
                "attention",
                "attention output",
                "gate, up, activation",
                "down",
                "LM head",
                "everything else"
            ],
            "{tokens} tokens: the profile's rows"
        );
        for o in &ops {
            // each part lies inside its step, so its median lies under the median step
            assert!(
                o.ms.is_finite() && o.ms >= 0.0 && o.ms <= step_ms,
                "{tokens} tokens: {} took {} ms of a {step_ms} ms step: a part is timed \
                 inside the step, never beside it",
                o.op,
                o.ms
            );
            assert!(
                o.op == "everything else" || o.ms > 0.0,
                "{tokens} tokens: no time recorded for {}: {ops:?}",
                o.op
            );
        }
    }
}
