//! Greedy generation with and without the cache, timed step by step: what the binary's
//! `generate` and `compare` commands run.

use std::time::Instant;

use ch04_forward::Model;
use ch04_forward::generate::{Stop, greedy};
use ch04_forward::model::argmax;
use serde::Serialize;

use crate::Error;
use crate::forward::Engine;
use crate::session::Session;
use crate::store::KvStore;

/// A greedy run: the ids it chose and how long each took.
#[derive(Clone, Debug, Serialize)]
pub struct Timed {
    /// The new ids, without the prompt.
    pub ids: Vec<u32>,
    /// Seconds to choose each id. With the cache, entry 0 includes the prefill.
    pub step_seconds: Vec<f64>,
}

impl Timed {
    /// Tokens per second over steps `from..` (1 skips the cached run's prefill).
    pub fn tokens_per_second(&self, from: usize) -> f64 {
        let steps = &self.step_seconds[from.min(self.step_seconds.len())..];
        steps.len() as f64 / steps.iter().sum::<f64>().max(1e-9)
    }
}

// ANCHOR: cached_greedy
/// Greedy decoding with a cache: one prefill over `prompt`, then one decode step per
/// token. Produces `n` ids (fewer if `stop_at_eos` and an end id comes first) and calls
/// `on_token` as each is chosen.
pub fn cached_greedy<S: KvStore>(
    engine: Engine<'_>,
    cache: S,
    prompt: &[u32],
    n: usize,
    stop_at_eos: bool,
    on_token: &mut dyn FnMut(u32),
) -> Result<Timed, Error> {
    let eos = engine.model.config.eos_token_ids.clone();
    let mut session = Session::new(engine, cache);
    let mut out = Timed {
        // never more than the cache can hold, whatever `n` says
        ids: Vec::with_capacity(n.min(session.cache().max_positions())),
        step_seconds: Vec::with_capacity(n.min(session.cache().max_positions())),
    };
    let mut feed = prompt.to_vec(); // the prompt first, then each chosen token alone
    while out.ids.len() < n {
        let start = Instant::now();
        let next = argmax(session.extend(&feed)?) as u32;
        out.step_seconds.push(start.elapsed().as_secs_f64());
        out.ids.push(next);
        on_token(next);
        if stop_at_eos && eos.contains(&next) {
            break;
        }
        feed = vec![next];
    }
    Ok(out)
}
// ANCHOR_END: cached_greedy

/// Chapter 4's uncached greedy loop, as it is, with each step timed.
pub fn uncached_greedy(
    model: &Model,
    prompt: &[u32],
    n: usize,
    on_token: &mut dyn FnMut(u32),
) -> Result<Timed, Error> {
    let mut step_seconds = Vec::with_capacity(n.min(model.rope.max_pos));
    let mut last = Instant::now();
    let g = greedy(model, prompt, n, Stop::Never, &mut |id| {
        step_seconds.push(last.elapsed().as_secs_f64()); // one whole forward pass + argmax
        on_token(id);
        last = Instant::now();
        Ok(())
    })?;
    Ok(Timed {
        ids: g.ids,
        step_seconds,
    })
}

/// The index of the first position where `a` and `b` differ (a length difference counts).
pub fn first_difference(a: &[u32], b: &[u32]) -> Option<usize> {
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(i) => Some(i),
        None if a.len() != b.len() => Some(a.len().min(b.len())),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_difference_finds_the_first_mismatch() {
        assert_eq!(first_difference(&[1, 2, 3], &[1, 2, 3]), None);
        assert_eq!(first_difference(&[1, 2, 3], &[1, 5, 3]), Some(1));
        assert_eq!(first_difference(&[1, 2], &[1, 2, 3]), Some(2));
    }

    #[test]
    fn tokens_per_second_skips_the_prefill_when_asked() {
        let t = Timed {
            ids: vec![1, 2, 3],
            step_seconds: vec![1.0, 0.25, 0.25],
        };
        assert_eq!(t.tokens_per_second(1), 4.0);
        assert_eq!(t.tokens_per_second(0), 2.0);
    }
}
