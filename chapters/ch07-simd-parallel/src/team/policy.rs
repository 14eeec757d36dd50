//! Two choices of the team that the environment can change, so that a machine with many cores
//! can race them against the default in one run (`scripts/cpu-scale.sh --ours
//! NAME=PATH@VAR=VALUE`): how many threads may share a region, and what a helper does in a
//! region that has no task for it. Unset, the team is what the rest of this chapter
//! describes. Read once; a value that is not one of the good ones is an error that names
//! them (chapter 8's engine refuses to start with it), not a quiet default.

use std::cell::Cell;
use std::sync::OnceLock;

/// The most threads that share one region: `LLM_BOOK_DECODE_THREADS=N` (1 to 4095). On a
/// machine whose threads are pairs on one core, a decode step may read its weights as fast on
/// one thread a core as on two; the other threads stay idle through the decode step (a
/// prefill still runs on all of them, through rayon).
pub const THREADS_VAR: &str = "LLM_BOOK_DECODE_THREADS";

/// What a helper does in a region that has no task for it: `LLM_BOOK_IDLE=spin` (the
/// default) or `park`.
pub const IDLE_VAR: &str = "LLM_BOOK_IDLE";

/// The most a region can be shared by: the region word keeps it in 12 bits.
const MOST_THREADS: usize = 0xFFF;

/// What a helper does after a region that had no task for it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Idle {
    /// It spins on the region word as after any region, [`SPIN`](super::SPIN) and then
    /// [`PARK`](super::PARK): the next region finds it awake.
    #[default]
    Spin,
    /// It sleeps at once, until a region has a task for it: a helper the step's small
    /// regions leave out no longer spins beside the threads that read the weights (on a
    /// core's other hyperthread, say); the region that needs it again pays to wake it.
    Park,
}

/// The team's policy: [`THREADS_VAR`] and [`IDLE_VAR`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TeamPolicy {
    /// The most threads that share a region (`usize::MAX`: the whole pool).
    pub most_threads: usize,
    pub idle: Idle,
}

impl Default for TeamPolicy {
    fn default() -> TeamPolicy {
        TeamPolicy {
            most_threads: usize::MAX,
            idle: Idle::Spin,
        }
    }
}

impl TeamPolicy {
    /// The policy the two variables' values name (`None` or empty: unset).
    pub fn parse(threads: Option<&str>, idle: Option<&str>) -> Result<TeamPolicy, String> {
        let most_threads = match threads {
            None | Some("") => usize::MAX,
            Some(v) => v
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=MOST_THREADS).contains(n))
                .ok_or_else(|| {
                    format!(
                        "{THREADS_VAR}={v:?}: the most threads a decode region may use, a whole \
                         number from 1 to {MOST_THREADS} (unset: all of the pool's)"
                    )
                })?,
        };
        let idle = match idle {
            None | Some("") | Some("spin") => Idle::Spin,
            Some("park") => Idle::Park,
            Some(v) => {
                return Err(format!(
                    "{IDLE_VAR}={v:?}: a helper with no task in a region may spin or park \
                     (unset: spin)"
                ));
            }
        };
        Ok(TeamPolicy { most_threads, idle })
    }
}

/// The policy this process runs under, read once from [`THREADS_VAR`] and [`IDLE_VAR`].
pub fn team_policy() -> Result<TeamPolicy, String> {
    static POLICY: OnceLock<Result<TeamPolicy, String>> = OnceLock::new();
    POLICY
        .get_or_init(|| {
            let var = |name| std::env::var(name).ok();
            TeamPolicy::parse(var(THREADS_VAR).as_deref(), var(IDLE_VAR).as_deref())
        })
        .clone()
}

thread_local! {
    /// This thread's own cap on the regions it runs ([`with_decode_cap`]).
    static CAP: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// Runs `f` with the regions this thread runs shared by at most `cap` threads, and its decode
/// products cut for as many: how a program tries fewer threads than its pool has, to keep
/// the count that decodes fastest (chapter 8's engine does, past eight threads). Other
/// threads' regions are not touched, and the bits do not change with the count.
pub fn with_decode_cap<T>(cap: usize, f: impl FnOnce() -> T) -> T {
    struct Restore(usize);
    impl Drop for Restore {
        fn drop(&mut self) {
            CAP.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(CAP.with(|c| c.replace(cap.max(1))));
    f()
}

/// This thread's cap ([`with_decode_cap`]; `usize::MAX` outside one).
pub(super) fn cap() -> usize {
    CAP.with(Cell::get)
}

/// The cap this thread runs under, if [`with_decode_cap`] set one: a program that chooses
/// its own count leaves a count set around it alone.
pub fn decode_cap() -> Option<usize> {
    Some(cap()).filter(|&c| c != usize::MAX)
}

/// How many threads a decode region is cut for: the pool's, at most [`THREADS_VAR`]'s and
/// this thread's cap ([`with_decode_cap`]).
pub fn decode_threads() -> usize {
    let most = team_policy().unwrap_or_default().most_threads;
    rayon::current_num_threads().min(most).min(cap())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cap_holds_on_its_own_thread_inside_its_call_only() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(8)
            .build()
            .unwrap();
        pool.install(|| {
            let all = decode_threads();
            assert_eq!(decode_cap(), None);
            with_decode_cap(3, || {
                assert_eq!((decode_threads(), decode_cap()), (all.min(3), Some(3)));
                with_decode_cap(2, || assert_eq!(decode_cap(), Some(2)));
                assert_eq!(
                    decode_cap(),
                    Some(3),
                    "the inner cap's end restores the outer"
                );
                let other = std::thread::spawn(decode_cap).join().unwrap();
                assert_eq!(other, None, "another thread's regions are not capped");
            });
            assert_eq!(decode_cap(), None);
            let failed =
                std::panic::catch_unwind(|| with_decode_cap(2, || panic!("a step failed")));
            assert!(failed.is_err());
            assert_eq!(decode_cap(), None, "a step that panics lifts its cap too");
        });
    }

    #[test]
    fn the_variables_name_a_policy_or_an_error_that_lists_the_good_values() {
        assert_eq!(TeamPolicy::parse(None, None), Ok(TeamPolicy::default()));
        assert_eq!(
            TeamPolicy::parse(Some(""), Some("")),
            Ok(TeamPolicy::default())
        );
        let p = TeamPolicy::parse(Some("8"), Some("park")).unwrap();
        assert_eq!((p.most_threads, p.idle), (8, Idle::Park));
        for bad in ["0", "-1", "eight", "4096", "99999999999999999999999"] {
            let e = TeamPolicy::parse(Some(bad), None).unwrap_err();
            assert!(
                e.contains("from 1 to 4095"),
                "{THREADS_VAR}={bad} should say what it takes: {e}"
            );
        }
        let e = TeamPolicy::parse(None, Some("sleep")).unwrap_err();
        assert!(
            e.contains("spin or park"),
            "{IDLE_VAR}=sleep should name spin and park: {e}"
        );
    }
}
