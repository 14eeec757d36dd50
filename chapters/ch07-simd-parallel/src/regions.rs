//! What one parallel region costs: the time to hand out and gather `threads` tasks, on the
//! team and on rayon, over the time the tasks themselves take.
//!
//! A decode step is a few hundred regions (each layer's products and attention), so a
//! region's cost times their number is time the step cannot spend reading weights. On two
//! threads that is small; how it grows with threads is what decides whether a small model's
//! decode gets faster or slower on more cores.

use crate::pool::in_pool;
use crate::team::{Runner, for_each_task_on};
use std::time::Instant;

/// One row of the table: a thread count and what a region cost on each runner, over its
/// tasks' own [`TASK`].
#[derive(Clone, Debug, serde::Serialize)]
pub struct RegionCost {
    pub threads: usize,
    /// Microseconds per region on the team (the median of the runs).
    pub team_us: f64,
    /// The same on rayon.
    pub rayon_us: f64,
}

/// Regions timed in one run; the median of `runs` runs is reported.
const REGIONS_PER_RUN: usize = 2000;

/// How long each task works (it spins on the clock). Empty tasks would measure nothing:
/// the calling thread would run them all before any other thread woke (rayon's and the
/// team's own rule, a task nobody has taken is run by the caller). Tasks this long are each
/// taken by a thread of their own, as a decode step's products are.
pub const TASK: std::time::Duration = std::time::Duration::from_micros(5);

// ANCHOR: region_cost
/// What a region of `threads` tasks of [`TASK`] each, in a pool of `threads` threads, costs
/// on `runner` over [`TASK`]: microseconds a region, the median of `runs` runs of
/// `REGIONS_PER_RUN` regions (after as many unmeasured, so the team's helpers are awake).
pub fn region_cost(runner: Runner, threads: usize, runs: usize) -> Result<f64, String> {
    let work = || {
        let start = Instant::now();
        while start.elapsed() < TASK {
            std::hint::spin_loop();
        }
    };
    in_pool(threads, || {
        let region = || for_each_task_on(runner, threads, |_| work());
        (0..REGIONS_PER_RUN).for_each(|_| region());
        let mut us: Vec<f64> = (0..runs.max(1))
            .map(|_| {
                let start = Instant::now();
                (0..REGIONS_PER_RUN).for_each(|_| region());
                start.elapsed().as_secs_f64() * 1e6 / REGIONS_PER_RUN as f64
            })
            .collect();
        us.sort_by(f64::total_cmp);
        us[us.len() / 2] - TASK.as_secs_f64() * 1e6
    })
}
// ANCHOR_END: region_cost

/// 1, 2, 4, … threads below `most`, then `most` itself (at least 1): the counts a region is
/// measured at.
pub fn thread_counts(most: usize) -> Vec<usize> {
    let mut counts: Vec<usize> = std::iter::successors(Some(1usize), |t| t.checked_mul(2))
        .take_while(|&t| t < most)
        .collect();
    counts.push(most.max(1));
    counts
}

/// [`region_cost`] on both runners at each of [`thread_counts`]`(most)`.
pub fn region_costs(most: usize, runs: usize) -> Result<Vec<RegionCost>, String> {
    thread_counts(most)
        .into_iter()
        .map(|threads| {
            Ok(RegionCost {
                threads,
                team_us: region_cost(Runner::Team, threads, runs)?,
                rayon_us: region_cost(Runner::Rayon, threads, runs)?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::team::record_regions;

    #[test]
    fn thread_counts_double_up_to_the_most() {
        assert_eq!(thread_counts(1), [1]);
        assert_eq!(thread_counts(2), [1, 2]);
        assert_eq!(thread_counts(6), [1, 2, 4, 6]);
        assert_eq!(thread_counts(16), [1, 2, 4, 8, 16]);
    }

    #[test]
    fn every_region_is_timed_and_recorded() {
        let (costs, log) = record_regions(|| region_costs(2, 1).unwrap());
        assert_eq!(
            costs.iter().map(|c| c.threads).collect::<Vec<_>>(),
            [1, 2],
            "thread counts 1 and 2"
        );
        assert!(
            costs.iter().all(|c| c.team_us > -0.5 && c.rayon_us > -0.5),
            "a region takes at least its task's time (within the clock's reading): {costs:?}"
        );
        // 2 runners x (warm-up + 1 run) regions of two tasks at 2 threads; those at 1 thread
        // have one task, no region (other tests' regions may land in the log too)
        assert!(
            log.iter().filter(|&&t| t == 2).count() >= 2 * 2 * REGIONS_PER_RUN,
            "the regions of two threads are recorded"
        );
    }
}
