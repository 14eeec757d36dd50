//! What each caching scheme costs, worked out from the numbers of real models.
//!
//! - [`kv_bytes_per_token`]: the cost of one token of context.
//! - [`fragmentation`]: many sequences of different lengths, in max-length contiguous
//!   caches versus 16-position pages.
//! - [`windowed_bytes`]: a full cache versus ring buffers on sliding-window layers.

use std::fmt::Write;

use ch04_forward::Config;

use crate::forward::{kv_layout, scratch_floats};
use crate::paged::{BlockAllocator, BlockTable};
use crate::ring::interleaved_windows;
use crate::store::KvLayout;

/// Gemma-3-270M's cache layout and window pattern, as its GGUF metadata states them
/// (`gemma3.block_count = 18`, `attention.head_count_kv = 1`, `attention.key_length = 256`,
/// `attention.sliding_window = 512`, `context_length = 32768`; every sixth layer is global).
pub const GEMMA3_270M: KvLayout = KvLayout {
    n_layers: 18,
    n_kv_heads: 1,
    head_dim: 256,
};
/// Gemma-3's sliding window, in positions.
pub const GEMMA3_WINDOW: usize = 512;
/// One global layer in every this many.
pub const GEMMA3_PERIOD: usize = 6;
/// Gemma-3-270M's context length.
pub const GEMMA3_CONTEXT: usize = 32_768;

// ANCHOR: bytes_per_token
/// Bytes of K/V cache per token in f32, with the factors spelled out:
/// `(bytes, "2 (K and V) × 30 layers × 3 KV heads × 64 dims × 4 bytes")`.
pub fn kv_bytes_per_token(l: &KvLayout) -> (usize, String) {
    let formula = format!(
        "2 (K and V) × {} layers × {} KV heads × {} dims × 4 bytes",
        l.n_layers, l.n_kv_heads, l.head_dim
    );
    (2 * l.n_layers * l.n_kv_heads * l.head_dim * 4, formula)
}
// ANCHOR_END: bytes_per_token

/// Sequence lengths for the fragmentation experiment: `n` lengths in `1..=max_len`,
/// from a fixed-seed generator so every run prints the same table.
pub fn sample_lengths(n: usize, max_len: usize, seed: u64) -> Vec<usize> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            1 + (s % max_len as u64) as usize
        })
        .collect()
}

/// The outcome of placing sequences in memory two ways.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fragmentation {
    /// Tokens actually held, over all sequences.
    pub tokens: usize,
    /// Bytes the tokens need.
    pub used_bytes: usize,
    /// Bytes reserved by one `max_len` contiguous cache per sequence.
    pub contiguous_bytes: usize,
    /// Bytes reserved by the blocks the paged cache handed out.
    pub paged_bytes: usize,
    /// Blocks handed out.
    pub blocks: usize,
}

// ANCHOR: fragmentation
/// Places sequences of `lengths` tokens (each allowed to grow to `max_len`) in a
/// contiguous cache per sequence, and in a paged cache of `block_size`-position blocks,
/// running the real block allocator. Returns the bytes each reserves.
pub fn fragmentation(
    l: &KvLayout,
    lengths: &[usize],
    max_len: usize,
    block_size: usize,
) -> Fragmentation {
    let per_token = l.bytes_per_token();
    let worst_case_blocks = lengths.len() * max_len.div_ceil(block_size);
    let mut alloc = BlockAllocator::new(worst_case_blocks, block_size);
    let mut tables = vec![BlockTable::default(); lengths.len()];
    // Grow all sequences together, a token at a time, as a server decoding a batch does.
    for step in 1..=lengths.iter().copied().max().unwrap_or(0) {
        for (table, &len) in tables.iter_mut().zip(lengths) {
            if step <= len {
                table
                    .grow(step, &mut alloc)
                    .expect("the pool has room for every sequence at max_len");
            }
        }
    }
    let tokens: usize = lengths.iter().sum();
    Fragmentation {
        tokens,
        used_bytes: tokens * per_token,
        contiguous_bytes: lengths.len() * max_len * per_token,
        paged_bytes: alloc.n_used() * block_size * per_token,
        blocks: alloc.n_used(),
    }
}
// ANCHOR_END: fragmentation

// ANCHOR: windowed_bytes
/// Bytes of K/V cache for a context of `ctx` tokens when layer `i` keeps at most
/// `windows[i]` positions (`None`: all of them).
pub fn windowed_bytes(l: &KvLayout, windows: &[Option<usize>], ctx: usize) -> usize {
    let per_layer_token = 2 * l.n_kv_heads * l.head_dim * 4; // K and V of one layer, f32
    windows
        .iter()
        .map(|w| w.map_or(ctx, |w| w.min(ctx)) * per_layer_token)
        .sum()
}
// ANCHOR_END: windowed_bytes

/// Bytes as a human reads them: `46.1 KB`, `377.5 MB` (powers of 1000, one decimal).
pub fn human_bytes(b: usize) -> String {
    let b = b as f64;
    if b >= 1e9 {
        format!("{:.2} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1} KB", b / 1e3)
    } else {
        format!("{b} B")
    }
}

/// What the binary's `memory` command prints: the cost per token of the model in
/// `model_name` (from its config), then the paged and the windowed experiments.
pub fn report(model_name: &str, cfg: &Config) -> String {
    let mut s = String::new();
    let l = kv_layout(cfg);
    let (bytes, formula) = kv_bytes_per_token(&l);
    let mha = kv_bytes_per_token(&KvLayout {
        n_kv_heads: cfg.n_heads,
        ..l
    })
    .0;
    let full = cfg.max_position_embeddings;
    let _ = writeln!(
        s,
        "The model in {model_name} (numbers from its config.json):"
    );
    let _ = writeln!(
        s,
        "  KV cache per token: {formula} = {bytes} bytes ({})",
        human_bytes(bytes)
    );
    let _ = writeln!(
        s,
        "  with one KV head per query head ({} instead of {}): {mha} bytes",
        cfg.n_heads, cfg.n_kv_heads
    );
    let _ = writeln!(
        s,
        "  a full {full}-position context: {}",
        human_bytes(full * bytes)
    );
    let _ = writeln!(
        s,
        "  prefill scratch for a 512-token chunk: {}",
        human_bytes(4 * scratch_floats(cfg, 512))
    );

    let (n, max_len, bs) = (16, 2048, 16);
    let f = fragmentation(&l, &sample_lengths(n, max_len, 2024), max_len, bs);
    let pct = |b: usize| 100.0 * f.used_bytes as f64 / b as f64;
    let _ = writeln!(
        s,
        "\n{n} sequences of random length 1..={max_len} (mean {}):",
        f.tokens / n
    );
    let _ = writeln!(
        s,
        "  tokens held                      {:>10}",
        human_bytes(f.used_bytes)
    );
    let (c, p) = (f.contiguous_bytes, f.paged_bytes);
    let _ = writeln!(
        s,
        "  contiguous, {max_len} positions each  {:>10}   {:5.1}% of it used",
        human_bytes(c),
        pct(c)
    );
    let _ = writeln!(
        s,
        "  paged, {bs}-position blocks        {:>10}   {:5.1}% of it used ({} blocks)",
        human_bytes(p),
        pct(p),
        f.blocks
    );

    let g = GEMMA3_270M;
    let windows = interleaved_windows(g.n_layers, GEMMA3_WINDOW, GEMMA3_PERIOD);
    let local = windows.iter().filter(|w| w.is_some()).count();
    let _ = writeln!(
        s,
        "\nGemma-3-270M ({} layers, {} KV head × {} dims; window {GEMMA3_WINDOW} on {local} of {} layers):",
        g.n_layers, g.n_kv_heads, g.head_dim, g.n_layers
    );
    let _ = writeln!(
        s,
        "  {:>8} {:>12} {:>14} {:>8}",
        "context", "full cache", "ring buffers", "ratio"
    );
    for ctx in [512, 4096, GEMMA3_CONTEXT] {
        let (full, ring) = (ctx * g.bytes_per_token(), windowed_bytes(&g, &windows, ctx));
        let ratio = full as f64 / ring as f64;
        let _ = writeln!(
            s,
            "  {ctx:>8} {:>12} {:>14} {ratio:>7.1}:1",
            human_bytes(full),
            human_bytes(ring)
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::{RingCache, interleaved_windows};
    use crate::store::KvStore;

    #[test]
    fn smollm2_costs_46080_bytes_per_token() {
        let smollm2 = KvLayout {
            n_layers: 30,
            n_kv_heads: 3,
            head_dim: 64,
        };
        let (bytes, formula) = kv_bytes_per_token(&smollm2);
        assert_eq!(bytes, 46_080);
        assert_eq!(bytes, smollm2.bytes_per_token());
        assert_eq!(
            formula,
            "2 (K and V) × 30 layers × 3 KV heads × 64 dims × 4 bytes"
        );
    }

    #[test]
    fn pages_waste_less_than_one_block_per_sequence() {
        let l = KvLayout {
            n_layers: 1,
            n_kv_heads: 1,
            head_dim: 1,
        }; // 8 bytes per token
        let lengths = [1, 16, 17, 40];
        let f = fragmentation(&l, &lengths, 64, 16);
        assert_eq!(f.tokens, 74);
        assert_eq!(f.blocks, 1 + 1 + 2 + 3);
        assert_eq!(f.paged_bytes, 7 * 16 * 8);
        assert_eq!(f.contiguous_bytes, 4 * 64 * 8);
        assert!(f.paged_bytes - f.used_bytes < lengths.len() * 16 * 8);
    }

    #[test]
    fn windowed_bytes_match_what_a_ring_cache_allocates() {
        let l = KvLayout {
            n_layers: 6,
            n_kv_heads: 2,
            head_dim: 4,
        };
        let windows = interleaved_windows(6, 8, 3);
        let ring = RingCache::new(l, &windows, 50).unwrap();
        assert_eq!(windowed_bytes(&l, &windows, 50), ring.reserved_bytes());
        assert_eq!(windowed_bytes(&l, &[None; 6], 50), 50 * l.bytes_per_token());
    }

    #[test]
    fn lengths_are_deterministic_and_in_range() {
        let a = sample_lengths(100, 2048, 7);
        assert_eq!(a, sample_lengths(100, 2048, 7));
        assert!(a.iter().all(|&n| (1..=2048).contains(&n)));
    }

    #[test]
    fn the_report_works_out_smollm2() {
        let cfg = Config::from_json(
            r#"{"hidden_size": 576, "num_hidden_layers": 30, "num_attention_heads": 9,
                "num_key_value_heads": 3, "head_dim": 64, "intermediate_size": 1536,
                "vocab_size": 49152, "max_position_embeddings": 8192}"#,
        )
        .unwrap();
        let text = report("smollm2", &cfg);
        assert!(
            text.contains("× 64 dims × 4 bytes = 46080 bytes (46.1 KB)"),
            "{text}"
        );
        assert!(text.contains("(9 instead of 3): 138240 bytes"), "{text}");
        assert!(
            text.contains("a full 8192-position context: 377.5 MB"),
            "{text}"
        );
        assert!(
            text.contains("32768      1.21 GB       217.1 MB     5.6:1"),
            "{text}"
        );
    }

    #[test]
    fn bytes_read_like_a_person_writes_them() {
        assert_eq!(human_bytes(46_080), "46.1 KB");
        assert_eq!(human_bytes(377_487_360), "377.5 MB");
        assert_eq!(human_bytes(1_207_959_552), "1.21 GB");
    }
}
