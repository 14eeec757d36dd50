//! How many threads a decode step runs on, chosen by measuring it.
//!
//! Past a few cores, more threads can make a small model's decode step slower: each of its
//! few hundred regions hands a few kilobytes to each thread, and the hand-over, the idle
//! helpers spinning beside the working ones, and threads that share a core's caches cost
//! more than the bytes. Where that turns depends on the machine and the model, so the
//! engine measures it. With a pool of [`LEAST_POOL`] threads or more, its first decode
//! steps take turns at the pool's threads, half of them, a quarter, … (no fewer than
//! [`FEWEST`]): each count [`TRIAL_STEPS`] steps, interleaved so that the host's slow
//! moments fall on all of them. Then every step runs on the most threads whose median step
//! is within [`MARGIN`] of the fastest, until [`RETUNE`] steps later it measures again (a
//! longer context makes attention a larger part of a step). Chapter 7's
//! `team::with_decode_cap` applies the count; the bits are the same at every count.
//!
//! `LLM_BOOK_DECODE_TUNE=0` turns it off, and a count set by hand is kept as it is: in the
//! environment (`LLM_BOOK_DECODE_THREADS`), or around the step (`with_decode_cap`, as the
//! programs that measure a step at a given thread count do).

use std::sync::Mutex;

/// The smallest pool whose decode steps are measured: below it every thread has a core of
/// its own on the machines this book measured, and a trial of fewer threads would only cost.
pub const LEAST_POOL: usize = 8;

/// The fewest threads a trial tries.
pub const FEWEST: usize = 4;

/// Steps each count is timed for; its median is what counts.
pub const TRIAL_STEPS: usize = 8;

/// The most threads whose median step is within this share of the fastest count's are kept:
/// fewer threads must win clearly, not by noise.
pub const MARGIN: f64 = 0.05;

/// Steps run at the chosen count before the counts are timed again.
pub const RETUNE: usize = 1024;

/// The variable that turns the measuring off (`0`) or on (`1`, the default).
pub const TUNE_VAR: &str = "LLM_BOOK_DECODE_TUNE";

/// Whether this process measures its decode threads: [`TUNE_VAR`], unless a count was set by
/// hand; an error for a value other than `0` or `1`. Read once.
pub fn tuning() -> std::result::Result<bool, String> {
    static ON: std::sync::OnceLock<std::result::Result<bool, String>> = std::sync::OnceLock::new();
    ON.get_or_init(|| {
        let by_hand = std::env::var_os(ch07_simd_parallel::team::THREADS_VAR).is_some();
        match std::env::var(TUNE_VAR) {
            Err(std::env::VarError::NotPresent) => parse_tuning(None, by_hand),
            Ok(v) => parse_tuning(Some(&v), by_hand),
            Err(std::env::VarError::NotUnicode(v)) => {
                parse_tuning(Some(&v.to_string_lossy()), by_hand)
            }
        }
    })
    .clone()
}

/// [`tuning`] for the variable's value (`None`: unset) and whether a count was set by hand.
pub fn parse_tuning(value: Option<&str>, by_hand: bool) -> std::result::Result<bool, String> {
    match value {
        None | Some("" | "1") => Ok(!by_hand),
        Some("0") => Ok(false),
        Some(v) => Err(format!(
            "{TUNE_VAR}={v:?}: 1 (the default) measures which thread count decodes fastest \
             from {LEAST_POOL} threads, 0 keeps the pool's"
        )),
    }
}

/// The counts a pool of `pool` threads tries, the pool's first: halving down to [`FEWEST`];
/// none below [`LEAST_POOL`] (its steps run on the whole pool).
pub fn counts(pool: usize) -> Vec<usize> {
    if pool < LEAST_POOL {
        return Vec::new();
    }
    std::iter::successors(Some(pool), |&n| Some(n / 2))
        .take_while(|&n| n >= FEWEST)
        .collect()
}

/// The count to keep, given each count's median step (`(count, seconds)`, any order): the
/// most threads whose median is within [`MARGIN`] of the fastest.
pub fn choose(medians: &[(usize, f64)]) -> Option<usize> {
    let best = medians.iter().map(|m| m.1).min_by(f64::total_cmp)?;
    medians
        .iter()
        .filter(|m| m.1 <= best * (1.0 + MARGIN))
        .map(|m| m.0)
        .max()
}

/// What the tuner is doing.
#[derive(Debug)]
enum Phase {
    /// Timing the counts in turn: each count's step times so far.
    Trying { times: Vec<Vec<f64>> },
    /// Running `count` threads; `left` steps until the counts are timed again.
    Chosen { count: usize, left: usize },
}

#[derive(Debug)]
struct State {
    pool: usize,
    counts: Vec<usize>,
    phase: Phase,
}

impl State {
    fn new(pool: usize) -> State {
        let counts = counts(pool);
        State {
            pool,
            phase: Phase::Trying {
                times: vec![Vec::new(); counts.len()],
            },
            counts,
        }
    }

    /// The count for the next step (`None`: the whole pool, nothing timed): in a trial, the
    /// counts in turn, by how many steps it has timed.
    fn count(&self) -> Option<usize> {
        match &self.phase {
            _ if self.counts.is_empty() => None,
            Phase::Trying { times } => {
                let turn: usize = times.iter().map(Vec::len).sum();
                Some(self.counts[turn % self.counts.len()])
            }
            Phase::Chosen { count, .. } => Some(*count),
        }
    }

    /// A step at `count` took `seconds`.
    fn took(&mut self, count: usize, seconds: f64) {
        match &mut self.phase {
            Phase::Trying { times } => {
                if let Some(i) = self.counts.iter().position(|&c| c == count) {
                    times[i].push(seconds);
                }
                if times.iter().all(|t| t.len() >= TRIAL_STEPS) {
                    let medians: Vec<(usize, f64)> = self
                        .counts
                        .iter()
                        .zip(times.iter())
                        .map(|(&c, t)| (c, ch07_simd_parallel::stats::median(&mut t.clone())))
                        .collect();
                    let count = choose(&medians).unwrap_or(self.pool);
                    self.phase = Phase::Chosen {
                        count,
                        left: RETUNE,
                    };
                }
            }
            Phase::Chosen { left, .. } => {
                *left = left.saturating_sub(1);
                if *left == 0 {
                    *self = State::new(self.pool);
                }
            }
        }
    }
}

/// An engine's decode tuner (see the module's doc): one per engine, shared by the threads
/// that run its steps.
#[derive(Debug, Default)]
pub struct DecodeTuner {
    state: Mutex<Option<State>>,
}

impl DecodeTuner {
    /// Runs one decode step, `step`, on the count this tuner picks for the current pool,
    /// and times it. Without tuning ([`tuning`]), below [`LEAST_POOL`], or inside a count set
    /// around it (chapter 7's `team::with_decode_cap`), just `step()`.
    pub fn run<T>(&self, step: impl FnOnce() -> T) -> T {
        if !tuning().unwrap_or(false) || ch07_simd_parallel::team::decode_cap().is_some() {
            return step();
        }
        let pool = rayon::current_num_threads();
        let count = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if state.as_ref().is_none_or(|s| s.pool != pool) {
                *state = Some(State::new(pool));
            }
            state.as_ref().and_then(State::count)
        };
        let Some(count) = count else {
            return step();
        };
        let start = std::time::Instant::now();
        let out = ch07_simd_parallel::team::with_decode_cap(count, step);
        let seconds = start.elapsed().as_secs_f64();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = state.as_mut().filter(|s| s.pool == pool) {
            s.took(count, seconds);
        }
        out
    }

    /// The count chosen, once the counts have been timed (`None` before, or when nothing is
    /// measured).
    pub fn chosen(&self) -> Option<usize> {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match state.as_ref().map(|s| &s.phase) {
            Some(Phase::Chosen { count, .. }) => Some(*count),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variable_turns_it_on_or_off_or_names_its_values() {
        assert_eq!(parse_tuning(None, false), Ok(true));
        assert_eq!(parse_tuning(Some("1"), false), Ok(true));
        assert_eq!(parse_tuning(Some(""), false), Ok(true));
        assert_eq!(parse_tuning(Some("0"), false), Ok(false));
        assert_eq!(
            parse_tuning(None, true),
            Ok(false),
            "a count set by hand is kept"
        );
        for bad in ["2", "yes", "-1", "\u{fffd}"] {
            let e = parse_tuning(Some(bad), false).unwrap_err();
            assert!(
                e.contains("1 (the default)") && e.contains("0 keeps"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn pools_from_eight_try_halves_down_to_four() {
        assert_eq!(counts(1), Vec::<usize>::new());
        assert_eq!(counts(2), Vec::<usize>::new());
        assert_eq!(counts(7), Vec::<usize>::new());
        assert_eq!(counts(8), [8, 4]);
        assert_eq!(counts(12), [12, 6]);
        assert_eq!(counts(16), [16, 8, 4]);
        assert_eq!(counts(64), [64, 32, 16, 8, 4]);
    }

    #[test]
    fn the_most_threads_within_the_margin_of_the_fastest_are_kept() {
        assert_eq!(choose(&[]), None);
        // sixteen threads clearly slower: four
        assert_eq!(choose(&[(16, 3.0), (8, 2.7), (4, 2.5)]), Some(4));
        // eight within 5% of four's time: eight
        assert_eq!(choose(&[(16, 3.0), (8, 2.6), (4, 2.52)]), Some(8));
        // the pool fastest, or level: the pool
        assert_eq!(choose(&[(16, 2.0), (8, 2.5), (4, 3.0)]), Some(16));
        assert_eq!(choose(&[(4, 2.0), (16, 2.0), (8, 2.0)]), Some(16));
    }

    #[test]
    fn a_trial_interleaves_the_counts_then_keeps_one_until_it_retunes() {
        let mut s = State::new(16);
        let mut seen = Vec::new();
        // sixteen threads take 3 ms, eight 2 ms, four 2.5 ms
        for _ in 0..3 * TRIAL_STEPS {
            let c = s.count().expect("a count");
            seen.push(c);
            s.took(
                c,
                [(16, 3e-3), (8, 2e-3), (4, 2.5e-3)]
                    .iter()
                    .find(|t| t.0 == c)
                    .unwrap()
                    .1,
            );
        }
        assert_eq!(&seen[..6], [16, 8, 4, 16, 8, 4], "the counts take turns");
        assert_eq!(s.count(), Some(8), "eight was fastest");
        for _ in 0..RETUNE - 1 {
            s.took(8, 1.0);
            assert_eq!(s.count(), Some(8), "kept until the retune");
        }
        s.took(8, 1.0);
        assert_eq!(
            s.count(),
            Some(16),
            "after RETUNE steps the trial starts again"
        );
    }

    #[test]
    fn small_pools_are_left_alone() {
        let mut s = State::new(4);
        assert_eq!(s.count(), None);
        s.took(4, 1.0);
        assert_eq!(s.count(), None);
    }
}
