//! A ring buffer for sliding-window layers.
//!
//! A layer with a sliding window of `w` positions (Gemma-3: 512 on five layers of every
//! six) never looks further back than `w − 1` tokens, so its cache never needs more than
//! `w` entries, however long the text grows. Position `pos` goes to slot `pos % w`: once
//! the ring is full, each new token overwrites the one that has just fallen out of the
//! window. A full-attention layer is simply a ring that never wraps (`w = max_pos`).
//!
//! ```text
//! layer l:  k, v   (n_kv_heads, capacity_l, head_dim)   capacity_l = window_l or max_pos
//! ```
//!
//! The forward pass writes a token's K/V and then lets that token attend (see
//! [`crate::forward`]), one position at a time within a chunk, so `w` slots are always
//! enough: at the moment the query at `pos` reads, slots hold exactly `pos − w + 1 ..= pos`.

use ch03_attention::Mask;

use crate::Error;
use crate::store::{KvLayout, KvStore, check_capacity};

// ANCHOR: ring_cache
/// Per-layer ring buffers: windowed layers keep `window` positions, the others `max_pos`.
#[derive(Clone, Debug)]
pub struct RingCache {
    layout: KvLayout,
    max_pos: usize,
    /// Slots per layer: the window, or `max_pos` for a full-attention layer.
    capacity: Vec<usize>,
    /// `windows[l]`: `Some(w)` for a sliding-window layer.
    windows: Vec<Option<usize>>,
    /// Per layer `(n_kv_heads, capacity[l], head_dim)`.
    k: Vec<Vec<f32>>,
    /// Per layer `(n_kv_heads, capacity[l], head_dim)`.
    v: Vec<Vec<f32>>,
}

impl RingCache {
    /// `windows` has one entry per layer: `Some(w)` keeps the last `w` positions.
    pub fn new(
        layout: KvLayout,
        windows: &[Option<usize>],
        max_pos: usize,
    ) -> Result<RingCache, Error> {
        if windows.len() != layout.n_layers {
            return Err(Error::Config(format!(
                "{} window entries for {} layers",
                windows.len(),
                layout.n_layers
            )));
        }
        if windows.contains(&Some(0)) {
            return Err(Error::Config(
                "a sliding window of 0 positions sees nothing".into(),
            ));
        }
        let capacity: Vec<usize> = windows
            .iter()
            .map(|w| w.map_or(max_pos, |w| w.min(max_pos)))
            .collect();
        let plane = |cap: usize| vec![0.0f32; layout.n_kv_heads * cap * layout.head_dim];
        Ok(RingCache {
            layout,
            max_pos,
            k: capacity.iter().map(|&c| plane(c)).collect(),
            v: capacity.iter().map(|&c| plane(c)).collect(),
            capacity,
            windows: windows.to_vec(),
        })
    }
    // ANCHOR_END: ring_cache

    // ANCHOR: ring_slot
    /// The mask each layer must be run with for this cache to be exact.
    pub fn mask(&self, layer: usize) -> Mask {
        self.windows[layer].map_or(Mask::Causal, Mask::SlidingWindow)
    }

    /// The slot of `pos` in `layer`'s ring.
    #[inline]
    pub fn slot(&self, layer: usize, pos: usize) -> usize {
        let cap = self.capacity[layer];
        // the same as `pos % cap`; the division (tens of cycles, on every key read) only
        // once the ring has wrapped
        if pos < cap { pos } else { pos % cap }
    }
    // ANCHOR_END: ring_slot

    #[inline]
    /// Where `positions` start in `layer`'s K (or V) storage, if their slots are side by
    /// side: the ring has not wrapped between the first and the last.
    fn run(
        &self,
        layer: usize,
        kv_head: usize,
        positions: &std::ops::Range<usize>,
    ) -> Option<usize> {
        if positions.is_empty()
            || positions.end > self.max_pos
            || positions.len() > self.capacity[layer]
        {
            return None;
        }
        let first = self.slot(layer, positions.start);
        (first + positions.len() <= self.capacity[layer])
            .then(|| self.offset(layer, kv_head, positions.start))
    }

    fn offset(&self, layer: usize, kv_head: usize, pos: usize) -> usize {
        debug_assert!(pos < self.max_pos);
        (kv_head * self.capacity[layer] + self.slot(layer, pos)) * self.layout.head_dim
    }
}

/// Gemma-3's pattern: every `period`-th layer (the last of each group) attends globally,
/// the others through a window of `window` positions.
pub fn interleaved_windows(n_layers: usize, window: usize, period: usize) -> Vec<Option<usize>> {
    (0..n_layers)
        .map(|l| {
            if (l + 1) % period == 0 {
                None
            } else {
                Some(window)
            }
        })
        .collect()
}

impl KvStore for RingCache {
    fn layout(&self) -> KvLayout {
        self.layout
    }

    fn max_positions(&self) -> usize {
        self.max_pos
    }

    fn reserve(&mut self, len: usize) -> Result<(), Error> {
        check_capacity(len, self.max_pos)
    }

    // ANCHOR: ring_rewind
    fn rewind(&mut self, from: usize, len: usize) -> Result<(), Error> {
        // After the rewind, a windowed layer needs positions len−w .. len. They are still
        // in the ring only if nothing has wrapped over them since. (Back to 0 needs nothing.)
        for &w in self.windows.iter().flatten() {
            if 0 < len && len < from && from > w {
                return Err(Error::CannotRewind {
                    from,
                    to: len,
                    window: w,
                });
            }
        }
        Ok(())
    }
    // ANCHOR_END: ring_rewind

    fn write(&mut self, layer: usize, pos: usize, k: &[f32], v: &[f32]) {
        let d = self.layout.head_dim;
        self.layout.check_row(k, v);
        assert!(
            pos < self.max_pos,
            "position {pos} is past the cache ({})",
            self.max_pos
        );
        for h in 0..self.layout.n_kv_heads {
            let at = self.offset(layer, h, pos);
            self.k[layer][at..at + d].copy_from_slice(&k[h * d..(h + 1) * d]);
            self.v[layer][at..at + d].copy_from_slice(&v[h * d..(h + 1) * d]);
        }
    }

    #[inline]
    fn key(&self, layer: usize, kv_head: usize, pos: usize) -> &[f32] {
        let at = self.offset(layer, kv_head, pos);
        &self.k[layer][at..at + self.layout.head_dim]
    }

    #[inline]
    fn value(&self, layer: usize, kv_head: usize, pos: usize) -> &[f32] {
        let at = self.offset(layer, kv_head, pos);
        &self.v[layer][at..at + self.layout.head_dim]
    }

    fn runs(
        &self,
        layer: usize,
        kv_head: usize,
        positions: std::ops::Range<usize>,
    ) -> Option<(&[f32], &[f32])> {
        let at = self.run(layer, kv_head, &positions)?;
        let span = at..at + positions.len() * self.layout.head_dim;
        Some((&self.k[layer][span.clone()], &self.v[layer][span]))
    }

    fn reserved_bytes(&self) -> usize {
        self.k
            .iter()
            .chain(&self.v)
            .map(|p| p.len() * size_of::<f32>())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> KvLayout {
        KvLayout {
            n_layers: 2,
            n_kv_heads: 1,
            head_dim: 2,
        }
    }

    #[test]
    fn runs_are_the_keys_side_by_side_until_the_ring_wraps() {
        let mut c = RingCache::new(layout(), &[Some(3), None], 10).unwrap();
        for pos in 0..7 {
            let k = [pos as f32, -(pos as f32)];
            c.write(0, pos, &k, &[0.5 * pos as f32; 2]);
            c.write(1, pos, &k, &[0.5 * pos as f32; 2]);
        }
        // The global layer: any positions written, in one piece, equal to reading them one by one.
        let (ks, vs) = c.runs(1, 0, 2..6).expect("a global layer never wraps");
        let one_by_one: Vec<f32> = (2..6).flat_map(|p| c.key(1, 0, p).to_vec()).collect();
        assert_eq!(ks, &one_by_one[..]);
        assert_eq!(vs, &[1.0, 1.0, 1.5, 1.5, 2.0, 2.0, 2.5, 2.5]);
        // Window 3: positions 4, 5, 6 sit in slots 1, 2, 0, so 4..6 is a run and 4..7 is not.
        assert!(c.runs(0, 0, 4..6).is_some());
        assert_eq!(c.runs(0, 0, 4..7), None, "the ring wrapped between 5 and 6");
        assert_eq!(
            c.runs(0, 0, 2..6),
            None,
            "more positions than the window keeps"
        );
    }

    #[test]
    fn the_ring_keeps_the_last_window_positions() {
        let mut c = RingCache::new(layout(), &[Some(3), None], 10).unwrap();
        for pos in 0..7 {
            let k = [pos as f32, -(pos as f32)];
            c.write(0, pos, &k, &k);
            c.write(1, pos, &k, &k);
        }
        // Window 3 after 7 tokens: positions 4, 5, 6 in slots 1, 2, 0.
        for pos in 4..7 {
            assert_eq!(
                c.key(0, 0, pos),
                &[pos as f32, -(pos as f32)],
                "position {pos}"
            );
        }
        assert_eq!(c.slot(0, 6), 0);
        assert_eq!(
            c.key(0, 0, 3),
            &[6.0, -6.0],
            "position 3 was overwritten by 6"
        );
        assert_eq!(
            c.key(1, 0, 3),
            &[3.0, -3.0],
            "the full layer keeps everything"
        );
        assert_eq!(c.mask(0), Mask::SlidingWindow(3));
        assert_eq!(c.mask(1), Mask::Causal);
    }

    #[test]
    fn memory_is_the_window_not_the_context() {
        let c = RingCache::new(layout(), &[Some(4), None], 100).unwrap();
        let per_pos_per_layer = 2 * 2 * 4; // K and V × (1 head × head_dim 2) × 4 bytes
        assert_eq!(c.reserved_bytes(), (4 + 100) * per_pos_per_layer);
    }

    #[test]
    fn gemma_pattern_has_one_global_layer_in_six() {
        let w = interleaved_windows(18, 512, 6);
        let globals: Vec<usize> = (0..18).filter(|&l| w[l].is_none()).collect();
        assert_eq!(globals, [5, 11, 17]);
    }

    #[test]
    fn rewinding_past_a_wrapped_window_is_refused() {
        let mut c = RingCache::new(layout(), &[Some(4), None], 100).unwrap();
        assert!(c.rewind(4, 2).is_ok(), "nothing wrapped yet");
        assert!(c.rewind(9, 9).is_ok(), "no rewind at all");
        assert!(c.rewind(9, 0).is_ok(), "a reset needs no old keys");
        let err = c.rewind(9, 5).unwrap_err();
        assert!(err.to_string().contains("overwritten"), "{err}");
    }
}
