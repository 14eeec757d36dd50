//! Timing a piece of code the way every chapter's speed table does: run it again and again,
//! keep the fastest run. The fastest is the run the rest of the machine disturbed least;
//! a mean would add every interruption to the kernel's own time.

use std::time::Instant;

/// The fastest of the timed runs of `f`, and how many there were.
#[derive(Clone, Copy, Debug)]
pub struct Best {
    /// Seconds of the fastest run.
    pub seconds: f64,
    /// How many runs were timed.
    pub runs: usize,
}

/// Runs `f` at least `min_runs` times (at least once) and until `min_seconds` have passed,
/// timing each run; returns the fastest.
pub fn best_of(min_runs: usize, min_seconds: f64, mut f: impl FnMut()) -> Best {
    let start = Instant::now();
    let mut best = f64::INFINITY;
    let mut runs = 0;
    while runs < min_runs.max(1) || start.elapsed().as_secs_f64() < min_seconds {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed().as_secs_f64());
        runs += 1;
    }
    Best {
        seconds: best,
        runs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_at_least_the_minimum_and_keeps_the_fastest() {
        let mut calls = 0;
        let best = best_of(3, 0.0, || {
            calls += 1;
            // the second run is the slow one: the fastest must not be it
            if calls == 2 {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        });
        assert_eq!(best.runs, calls, "runs counts every call of f");
        assert!(calls >= 3, "asked for 3 runs, got {calls}");
        assert!(best.seconds < 0.02, "kept {} s, the slow run", best.seconds);
    }
}
