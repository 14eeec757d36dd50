//! A decode step's parallel regions: how many, and how many tasks each gets.
//!
//! A region is one hand-out of work to the threads and one wait for all of them, so a step
//! pays for each. SmolLM2's step runs five a layer (the q/k/v group, attention, the output
//! projection, the gate and up pair, the down projection) and one for the LM head; on two
//! threads every one of them must be cut into two tasks or more, or a thread idles through
//! it. On sixteen threads (oversubscribed on a small machine: only the counts matter here)
//! a small product gets fewer tasks than the LM head, whose bytes justify more threads.
//!
//! A missing model fails with the command that fetches it.

use ch01_tensors::models;
use ch07_simd_parallel::pool::in_pool;
use ch07_simd_parallel::team::record_regions;

/// The tasks of each region of one decode step, after a prompt of four tokens and one
/// unrecorded step, in a pool of `threads`. One test runs here at a time: the log is the
/// process's, and the other test's unrecorded steps must not land in it.
fn step_regions(threads: usize) -> Vec<usize> {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let path = models::require(&models::smollm2_gguf()).unwrap_or_else(|e| panic!("{e}"));
    let m = ch08_gguf::load(&path).unwrap_or_else(|e| panic!("loading {}: {e}", path.display()));
    let engine = m.engine().expect("SmolLM2's engine");
    in_pool(threads, || {
        let mut cache = engine.new_cache(8).expect("a cache");
        engine
            .forward(&mut cache, &[1, 2, 3, 4], 0)
            .expect("prefill");
        engine.forward(&mut cache, &[5], 4).expect("a decode step");
        let (step, tasks) = record_regions(|| engine.forward(&mut cache, &[6], 5));
        step.expect("the recorded decode step");
        tasks
    })
    .expect("a pool")
}

#[test]
fn two_threads_every_region_of_a_step_is_shared() {
    let layers = 30; // SmolLM2-135M
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
    assert!(
        head >= 16,
        "the LM head (about 30 MB of weights) should keep all 16 threads busy, not {head} tasks"
    );
}
