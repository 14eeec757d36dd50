//! A team of threads for a decode step's many small regions.
//!
//! A decode step is a few hundred short parallel regions: each layer's products, its
//! attention, a product again. rayon hands a region's pieces out by stealing: a thread
//! that has finished looks for work, yields, and after a while sleeps, and a region wakes
//! sleepers one by one as its pieces are split off. That costs little on two threads and a
//! great deal on sixteen, where a region's bytes take a few microseconds to read and the
//! hand-over takes as long.
//!
//! A team is what llama.cpp's CPU backend and OpenMP do instead: the calling thread and
//! `threads - 1` helpers that stay awake between regions. A region is published with one
//! atomic store that every helper is spinning on; thread `p` then claims its own tasks (`p`,
//! `p + share`, …), each task's state alone on a cache line, so the threads never queue on
//! one shared counter, and a decode step's same task goes to the same thread each step. The
//! caller takes any task still unclaimed and waits for the rest to finish: a helper that has
//! not started (its core given to another program) is never waited for. A region of `n`
//! tasks is shared by `n` threads at most, so a small product is not spread over threads it
//! cannot keep busy. A helper that has seen no region for [`SPIN`] yields its core, and after
//! [`PARK`] it sleeps until the next region wakes it, so an idle program costs nothing.
//!
//! Each calling thread has its own team (a thread-local), made the first time it runs a
//! region, with as many threads as the rayon pool it runs in ([`rayon::current_num_threads`]),
//! and remade when that changes. The tasks' results do not depend on which thread runs them,
//! so the bits are rayon's.
//!
//! Two choices can be changed from the environment, to race them (`policy`): the most
//! threads a region is shared by, and whether a helper that a region leaves out parks at
//! once. [`record_step`] shows what a step's regions and named parts took.

mod policy;
mod record;

pub use policy::{
    IDLE_VAR, Idle, THREADS_VAR, TeamPolicy, decode_cap, decode_threads, team_policy,
    with_decode_cap,
};
pub use record::{MAX_LOG, Part, Recording, record_regions, record_step, timed};

use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use record::{RECORDING, note_region};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a helper spins on the region counter after its last region before it yields.
pub const SPIN: Duration = Duration::from_micros(50);
/// How long a helper waits (spinning, then yielding) before it sleeps.
pub const PARK: Duration = Duration::from_millis(2);

/// Which threads run a decode step's regions: this module's team, or rayon's pool (the
/// comparison the book measures). `LLM_BOOK_POOL=rayon` picks rayon; unset or `team`, the team.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runner {
    Team,
    Rayon,
}

/// The runner this process uses, read once from `LLM_BOOK_POOL`.
pub fn runner() -> Runner {
    static R: OnceLock<Runner> = OnceLock::new();
    *R.get_or_init(|| match std::env::var("LLM_BOOK_POOL").as_deref() {
        Ok("rayon") => Runner::Rayon,
        Ok("team") | Err(_) => Runner::Team,
        Ok(other) => {
            eprintln!("warning: LLM_BOOK_POOL={other:?} is neither team nor rayon; using the team");
            Runner::Team
        }
    })
}

// ANCHOR: for_each_task
/// Runs `f(0)`, `f(1)`, …, `f(tasks - 1)`, each once, on the calling thread and at most
/// `tasks - 1` other threads of its pool's size, and returns when all have finished.
pub fn for_each_task(tasks: usize, f: impl Fn(usize) + Sync) {
    for_each_task_on(runner(), tasks, f)
}

/// [`for_each_task`] on the runner given, not the one `LLM_BOOK_POOL` picked (to compare).
pub fn for_each_task_on(runner: Runner, tasks: usize, f: impl Fn(usize) + Sync) {
    if tasks > 1 && RECORDING.load(Ordering::Relaxed) {
        note_region(tasks);
    }
    if tasks <= 1 || rayon::current_num_threads() == 1 {
        (0..tasks).for_each(f);
        return;
    }
    if runner == Runner::Rayon {
        use rayon::prelude::*;
        (0..tasks).into_par_iter().for_each(&f);
        return;
    }
    TEAM.with(|cell| match cell.try_borrow_mut() {
        Ok(mut team) => {
            let threads = rayon::current_num_threads();
            if team.as_ref().is_none_or(|t| t.helpers.len() + 1 != threads) {
                *team = None; // the old team's threads stop before the new one starts
                *team = Some(Team::new(threads - 1, team_policy().unwrap_or_default()));
            }
            team.as_ref().expect("made above").run(tasks, &f);
        }
        // a task that itself runs a region: this thread's team is busy, so the inner
        // region runs here, in order
        Err(_) => (0..tasks).for_each(f),
    });
}
// ANCHOR_END: for_each_task

/// [`for_each_task`] over `items`, each handed to `f` once (a task's `&mut` output, say).
pub fn for_each_item<T: Send>(items: Vec<T>, f: impl Fn(T) + Sync) {
    let slots: Vec<Mutex<Option<T>>> = items.into_iter().map(|t| Mutex::new(Some(t))).collect();
    for_each_task(slots.len(), |i| {
        let item = slots[i].lock().map(|mut s| s.take()).ok().flatten();
        f(item.expect("each task index is taken once"));
    });
}

thread_local! {
    static TEAM: RefCell<Option<Team>> = const { RefCell::new(None) };
}

/// Tasks a region hands out at once; a call with more runs them in regions of this many.
const MAX_TASKS: usize = 256;

/// A task's state, alone on its cache line(s) so that the threads claiming and finishing
/// different tasks never touch the same line: `2r` once claimed in region `r`, `2r + 1` once
/// finished. Numbers of regions only grow, so a thread that is a region late cannot claim.
#[repr(align(128))]
struct Slot(AtomicU64);

impl Slot {
    fn claim(&self, region: u64) -> bool {
        let v = self.0.load(Ordering::Relaxed);
        v < 2 * region
            && self
                .0
                .compare_exchange(v, 2 * region, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
    }
}

/// What a region's tasks run.
struct Job<'a> {
    f: &'a (dyn Fn(usize) + Sync),
}

/// The region word: the region's number (0: none yet) in the high 40 bits, its tasks in
/// the next 12, and in the low 12 how many threads share them (the caller and helpers
/// `1..share`): thread `p` first claims tasks `p`, `p + share`, `p + 2·share`, … One word, so
/// that a helper never reads one region's number with another's tasks.
fn word(region: u64, tasks: usize, share: usize) -> u64 {
    region << 24 | (tasks as u64) << 12 | share as u64
}

fn unword(w: u64) -> (u64, usize, usize) {
    (w >> 24, (w >> 12) as usize & 0xFFF, w as usize & 0xFFF)
}

/// What the caller and its helpers share.
struct Shared {
    /// The last region published, as a [`word`].
    region: AtomicU64,
    /// The region's job, read by a thread only after it has claimed one of its tasks, which
    /// the caller waits for.
    job: AtomicPtr<Job<'static>>,
    slots: Box<[Slot]>,
    /// A task panicked on a helper (the caller panics in turn).
    panicked: AtomicBool,
    stop: AtomicBool,
    /// Helpers asleep; a region wakes them through `bell`.
    sleepers: AtomicUsize,
    /// What a helper does in a region with no task for it ([`Idle`]).
    idle: Idle,
    /// With [`Idle::Park`], which helpers are asleep (by number; 0, the caller, never is).
    asleep: Box<[AtomicBool]>,
    lock: Mutex<()>,
    bell: Condvar,
}

impl Shared {
    /// Whether a region shared by `share` threads must ring the bell: a helper is asleep
    /// (with [`Idle::Park`]: a helper the region has a task for).
    fn must_wake(&self, share: usize) -> bool {
        match self.idle {
            Idle::Spin => self.sleepers.load(Ordering::SeqCst) > 0,
            Idle::Park => self.asleep[..share]
                .iter()
                .any(|a| a.load(Ordering::SeqCst)),
        }
    }

    /// With [`Idle::Park`]: helper `me` sleeps until a region after `seen` has a task for it,
    /// or the team stops. It says it is asleep before it looks at the region word, and the
    /// caller publishes a region before it looks at who is asleep, so one of them sees the
    /// other (both in sequentially consistent order).
    fn park(&self, me: usize, seen: u64) {
        let mut held = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.asleep[me].store(true, Ordering::SeqCst);
        while !self.stop.load(Ordering::SeqCst) && {
            let (region, _, share) = unword(self.region.load(Ordering::SeqCst));
            region == seen || me >= share
        } {
            held = self.bell.wait(held).unwrap_or_else(|e| e.into_inner());
        }
        self.asleep[me].store(false, Ordering::SeqCst);
    }

    /// Claims, runs and finishes task `i` of `region` if no thread has claimed it.
    fn take(&self, i: usize, region: u64) {
        if !self.slots[i].claim(region) {
            return;
        }
        // SAFETY: the task is claimed and not finished, so the caller is still in the
        // region, waiting for it, and the job it published is alive.
        let job = unsafe { &*self.job.load(Ordering::Acquire) };
        if catch_unwind(AssertUnwindSafe(|| (job.f)(i))).is_err() {
            self.panicked.store(true, Ordering::Relaxed);
        }
        self.slots[i].0.store(2 * region + 1, Ordering::Release);
    }
}

struct Team {
    shared: Arc<Shared>,
    helpers: Vec<JoinHandle<()>>,
    /// The most threads that share a region ([`TeamPolicy::most_threads`]).
    most: usize,
}

impl Team {
    fn new(helpers: usize, policy: TeamPolicy) -> Team {
        let helpers = helpers.min(0xFFE); // `share` fits in 12 bits
        let shared = Arc::new(Shared {
            region: AtomicU64::new(0),
            job: AtomicPtr::new(std::ptr::null_mut()),
            slots: (0..MAX_TASKS).map(|_| Slot(AtomicU64::new(0))).collect(),
            panicked: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            sleepers: AtomicUsize::new(0),
            idle: policy.idle,
            asleep: (0..=helpers).map(|_| AtomicBool::new(false)).collect(),
            lock: Mutex::new(()),
            bell: Condvar::new(),
        });
        let helpers = (1..=helpers)
            .map(|me| {
                let shared = Arc::clone(&shared);
                std::thread::spawn(move || helper(&shared, me))
            })
            .collect();
        Team {
            shared,
            helpers,
            most: policy.most_threads,
        }
    }

    fn run(&self, tasks: usize, f: &(dyn Fn(usize) + Sync)) {
        for first in (0..tasks).step_by(MAX_TASKS) {
            let n = (tasks - first).min(MAX_TASKS);
            self.region(n, &|i| f(first + i));
        }
    }

    // ANCHOR: region
    /// One region of at most [`MAX_TASKS`] tasks. Thread `p` of the `share` first takes
    /// tasks `p`, `p + share`, …, so a decode step's same task (the same rows of the same
    /// matrix) goes to the same thread, whose cache may still hold its weights; then the
    /// caller takes any task still unclaimed (its helper asleep, or its core given to another
    /// program), so no region waits for a thread that has not started.
    fn region(&self, tasks: usize, f: &(dyn Fn(usize) + Sync)) {
        let s = &*self.shared;
        let job = Job { f };
        let share = tasks
            .min(self.helpers.len() + 1)
            .min(self.most)
            .min(policy::cap());
        let region = unword(s.region.load(Ordering::Relaxed)).0 + 1;
        // SAFETY: a thread reads the pointer only after claiming a task of this region,
        // and this function returns only after every task has finished.
        let erased = (&job as *const Job<'_>).cast::<Job<'static>>().cast_mut();
        s.job.store(erased, Ordering::Relaxed);
        s.region.store(word(region, tasks, share), Ordering::SeqCst);
        if s.must_wake(share) {
            let _held = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.bell.notify_all();
        }
        (0..tasks).step_by(share).for_each(|i| s.take(i, region));
        (0..tasks).for_each(|i| s.take(i, region));
        for slot in &s.slots[..tasks] {
            wait(|| slot.0.load(Ordering::Acquire) == 2 * region + 1);
        }
        // read before writing: a write to the line the helpers are spinning on would cost
        // each of them a cache miss every region
        if s.panicked.load(Ordering::Relaxed) && s.panicked.swap(false, Ordering::Relaxed) {
            panic!("a task of a parallel region panicked");
        }
    }
    // ANCHOR_END: region
}

impl Drop for Team {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        {
            let _held = self.shared.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.bell.notify_all();
        }
        for h in self.helpers.drain(..) {
            let _ = h.join();
        }
    }
}

/// Spins until `ready()`, yielding the core after a while (on a busy machine the thread it
/// waits for may need it).
fn wait(ready: impl Fn() -> bool) {
    let mut spins = 0u32;
    while !ready() {
        if spins < 1 << 12 {
            std::hint::spin_loop();
            spins += 1;
        } else {
            std::thread::yield_now();
        }
    }
}

// ANCHOR: helper
/// Helper `me` (1 or more): takes its tasks of each region it sees, spinning between them.
fn helper(s: &Shared, me: usize) {
    let mut seen = 0u64; // the last region this helper looked at
    let mut idle_since = Instant::now();
    let mut spins = 0u32;
    loop {
        let (region, tasks, share) = unword(s.region.load(Ordering::Acquire));
        if region != seen {
            seen = region;
            if me < share {
                (me..tasks).step_by(share).for_each(|i| s.take(i, region));
            } else if s.idle == Idle::Park {
                s.park(me, seen);
            }
            (idle_since, spins) = (Instant::now(), 0);
            continue;
        }
        if s.stop.load(Ordering::Relaxed) {
            return;
        }
        spins += 1;
        if !spins.is_multiple_of(64) {
            std::hint::spin_loop();
            continue;
        }
        let idle = idle_since.elapsed();
        if idle < SPIN {
            std::hint::spin_loop();
        } else if idle < PARK {
            std::thread::yield_now();
        } else if s.idle == Idle::Park {
            s.park(me, seen);
            idle_since = Instant::now();
        } else {
            let mut held = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.sleepers.fetch_add(1, Ordering::SeqCst);
            while unword(s.region.load(Ordering::SeqCst)).0 == seen
                && !s.stop.load(Ordering::SeqCst)
            {
                held = s.bell.wait(held).unwrap_or_else(|e| e.into_inner());
            }
            s.sleepers.fetch_sub(1, Ordering::SeqCst);
            idle_since = Instant::now();
        }
    }
}
// ANCHOR_END: helper

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::in_pool;

    #[test]
    fn every_task_runs_once_at_any_thread_count() {
        for threads in [1, 2, 3, 16] {
            in_pool(threads, || {
                for tasks in [0, 1, 2, 5, 17, 64] {
                    for _ in 0..50 {
                        let counts: Vec<AtomicUsize> =
                            (0..tasks).map(|_| AtomicUsize::new(0)).collect();
                        for_each_task(tasks, |i| {
                            counts[i].fetch_add(1, Ordering::Relaxed);
                        });
                        let runs: Vec<usize> =
                            counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
                        assert!(
                            runs.iter().all(|&r| r == 1),
                            "{threads} threads, {tasks} tasks: runs per task {runs:?}, not once each"
                        );
                    }
                }
            })
            .unwrap();
        }
    }

    #[test]
    fn every_policy_runs_every_task_once_and_wakes_its_sleepers() {
        let policies = [(usize::MAX, Idle::Park), (2, Idle::Spin), (3, Idle::Park)];
        for (most_threads, idle) in policies {
            for helpers in [0, 1, 2, 15] {
                let team = Team::new(helpers, TeamPolicy { most_threads, idle });
                for round in 0..3 {
                    for tasks in [2, 5, 17, 1, 64, 3] {
                        let counts: Vec<AtomicUsize> =
                            (0..tasks).map(|_| AtomicUsize::new(0)).collect();
                        let who = Mutex::new(std::collections::HashSet::new());
                        team.run(tasks, &|i| {
                            counts[i].fetch_add(1, Ordering::Relaxed);
                            who.lock().unwrap().insert(std::thread::current().id());
                            std::thread::sleep(Duration::from_micros(20)); // time to join in
                        });
                        let threads = who.lock().unwrap().len();
                        assert!(
                            threads <= most_threads,
                            "a region of {tasks} tasks ran on {threads} threads, over the most, \
                             {most_threads}"
                        );
                        let runs: Vec<usize> =
                            counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
                        assert!(
                            runs.iter().all(|&r| r == 1),
                            "{helpers} helpers, at most {most_threads} threads, {idle:?}, \
                             {tasks} tasks: runs per task {runs:?}, not once each"
                        );
                    }
                    if round == 1 {
                        std::thread::sleep(PARK * 3); // every helper asleep
                    }
                }
            }
        }
    }

    #[test]
    fn a_region_under_a_cap_runs_on_that_many_threads_at_most() {
        let team = Team::new(7, TeamPolicy::default());
        for cap in [1, 2, 3] {
            with_decode_cap(cap, || {
                for tasks in [2, 9, 40] {
                    let who = Mutex::new(std::collections::HashSet::new());
                    let counts: Vec<AtomicUsize> =
                        (0..tasks).map(|_| AtomicUsize::new(0)).collect();
                    team.run(tasks, &|i| {
                        counts[i].fetch_add(1, Ordering::Relaxed);
                        who.lock().unwrap().insert(std::thread::current().id());
                        std::thread::sleep(Duration::from_micros(20));
                    });
                    let threads = who.lock().unwrap().len();
                    assert!(
                        threads <= cap,
                        "under a cap of {cap}, a region of {tasks} tasks ran on {threads} threads"
                    );
                    assert!(counts.iter().all(|c| c.load(Ordering::Relaxed) == 1));
                }
            });
        }
    }

    #[test]
    fn items_are_handed_out_once_and_a_sleeping_team_wakes() {
        in_pool(4, || {
            let mut out = vec![0u32; 40];
            for_each_item(out.chunks_mut(3).collect(), |piece: &mut [u32]| {
                piece.iter_mut().for_each(|v| *v += 1)
            });
            assert!(out.iter().all(|&v| v == 1), "each piece once: {out:?}");
            std::thread::sleep(PARK * 3); // the helpers fall asleep
            for_each_item(out.chunks_mut(5).collect(), |piece: &mut [u32]| {
                piece.iter_mut().for_each(|v| *v += 1)
            });
            assert!(out.iter().all(|&v| v == 2), "after the team slept: {out:?}");
        })
        .unwrap();
    }

    #[test]
    fn recorded_regions_list_their_tasks() {
        let (sum, log) = in_pool(3, || {
            record_regions(|| {
                let n = AtomicUsize::new(0);
                for tasks in [5, 1, 7] {
                    for_each_task(tasks, |_| {
                        n.fetch_add(1, Ordering::Relaxed);
                    });
                }
                n.load(Ordering::Relaxed)
            })
        })
        .unwrap();
        assert_eq!(sum, 13, "every task ran once");
        // other tests' regions may land in the log too (they share the process)
        let five = log.iter().position(|&t| t == 5);
        let seven = log.iter().rposition(|&t| t == 7);
        assert!(
            matches!((five, seven), (Some(a), Some(b)) if a < b),
            "the regions of 5 and then 7 tasks are recorded (one task is no region): {log:?}"
        );
        assert!(
            !RECORDING.load(Ordering::Relaxed),
            "recording stops afterwards"
        );
    }

    #[test]
    fn a_panicking_task_reaches_the_caller() {
        let caught = in_pool(3, || {
            catch_unwind(|| {
                for_each_task(8, |i| {
                    if i == 5 {
                        panic!("task 5");
                    }
                })
            })
            .is_err()
        })
        .unwrap();
        assert!(
            caught,
            "a task's panic must reach the thread that ran the region"
        );
        // and the team still works afterwards
        in_pool(3, || {
            let n = AtomicUsize::new(0);
            for_each_task(8, |_| {
                n.fetch_add(1, Ordering::Relaxed);
            });
            assert_eq!(n.load(Ordering::Relaxed), 8);
        })
        .unwrap();
    }
}
