//! What f16 keys and values cost in quality: chapter 9's perplexity (the fixtures' method:
//! windows of 256 tokens from an empty cache, every token after a window's first scored),
//! computed through the batched step with the keys and values in f32 or in f16.
//!
//! With f32 blocks the number is chapter 9's exactly, since every row's arithmetic is; the
//! difference f16 makes is the cost of halving the pool.

use ch08_gguf::engine::Engine;
use ch09_generate::perplexity::{WINDOW, perplexity_with};

use crate::batch::{Row, forward_batch};
use crate::seq::{KvBlocks, KvPrecision};

// ANCHOR: perplexity
/// (perplexity, tokens scored) of `ids` with keys and values stored in `precision`: chapter
/// 9's scoring, each window's logits from one batched step of one sequence.
pub fn perplexity(
    engine: &Engine,
    ids: &[u32],
    bos: Option<u32>,
    precision: KvPrecision,
) -> Result<(f64, usize), String> {
    let bs = 16;
    let table: Vec<usize> = (0..(WINDOW + 1).div_ceil(bs)).collect();
    let mut kv = KvBlocks::new(engine.layout(), bs, table.len(), precision);
    let vocab = engine.model.config.vocab_size;
    perplexity_with(vocab, ids, bos, &mut |window| {
        let rows: Vec<Row> = (window.iter().enumerate())
            .map(|(pos, &token)| Row {
                seq: 0,
                token,
                pos,
                logits: true,
            })
            .collect();
        forward_batch(engine, &mut kv, &[&table], &rows) // (window, vocab)
    })
}
// ANCHOR_END: perplexity
