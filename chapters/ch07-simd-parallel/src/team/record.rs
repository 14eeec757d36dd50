//! What a program can see of a decode step's regions: each region's tasks (how many threads
//! it was cut for), and how long each named part of the step took, from its caller's start
//! to its join. Off unless [`record_regions`] or [`record_step`] is running: until then a
//! region and a [`timed`] part each read one flag (relaxed) and go on.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

pub(super) static RECORDING: AtomicBool = AtomicBool::new(false);
static REGIONS: Mutex<Vec<usize>> = Mutex::new(Vec::new());
static PARTS: Mutex<Vec<Part>> = Mutex::new(Vec::new());

/// The most regions, and the most parts, one recording keeps.
pub const MAX_LOG: usize = 1 << 16;

/// A named part of a step (a product, the attention), the seconds it took, and the most
/// tasks of a region it ran (1: it ran none, all on the calling thread).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Part {
    pub kind: &'static str,
    pub seconds: f64,
    pub tasks: usize,
}

/// What [`record_step`] saw: each region's tasks and each [`timed`] part, in the order they
/// finished.
#[derive(Clone, Debug, Default)]
pub struct Recording {
    pub regions: Vec<usize>,
    pub parts: Vec<Part>,
}

fn keep<T>(log: &Mutex<Vec<T>>, item: T) {
    let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
    if log.len() < MAX_LOG {
        log.push(item);
    }
}

fn take<T>(log: &Mutex<Vec<T>>) -> Vec<T> {
    std::mem::take(&mut *log.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Called by every region of more than one task while a recording runs.
pub(super) fn note_region(tasks: usize) {
    keep(&REGIONS, tasks);
}

/// Runs `f`; while a recording runs, also keeps how long it took as a part of kind `kind`
/// (a product, the attention), with the tasks of the regions it ran. Parts must not nest:
/// the step's parts are summed.
pub fn timed<T>(kind: &'static str, f: impl FnOnce() -> T) -> T {
    if !RECORDING.load(Ordering::Relaxed) {
        return f();
    }
    let first = REGIONS.lock().unwrap_or_else(|e| e.into_inner()).len();
    let start = Instant::now();
    let out = f();
    let seconds = start.elapsed().as_secs_f64();
    let regions = REGIONS.lock().unwrap_or_else(|e| e.into_inner());
    let tasks = regions.get(first..).into_iter().flatten().copied().max();
    let part = Part {
        kind,
        seconds,
        tasks: tasks.unwrap_or(1),
    };
    drop(regions);
    keep(&PARTS, part);
    out
}

/// Runs `f` and returns, with its result, what it recorded (at most the first [`MAX_LOG`]
/// regions and parts; those other threads run meanwhile are in it too). One recording at a
/// time: a second caller waits for the first to finish (so `f` must not record in turn).
pub fn record_step<T>(f: impl FnOnce() -> T) -> (T, Recording) {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    take(&REGIONS);
    take(&PARTS);
    RECORDING.store(true, Ordering::SeqCst);
    let out = f();
    RECORDING.store(false, Ordering::SeqCst);
    let regions = take(&REGIONS);
    let parts = take(&PARTS);
    (out, Recording { regions, parts })
}

/// Runs `f` and returns, with its result, the number of tasks of each region it ran
/// ([`record_step`]'s regions): how a program sees how many threads each piece of a decode
/// step gets.
pub fn record_regions<T>(f: impl FnOnce() -> T) -> (T, Vec<usize>) {
    let (out, r) = record_step(f);
    (out, r.regions)
}
