//! The threads a program's products run on: a rayon pool of exactly the number asked for.

/// Runs `f` in a pool of `threads` threads (every `par_iter` inside it uses those).
pub fn in_pool<T: Send>(threads: usize, f: impl FnOnce() -> T + Send) -> Result<T, String> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| format!("thread pool: {e}"))?;
    Ok(pool.install(f))
}
