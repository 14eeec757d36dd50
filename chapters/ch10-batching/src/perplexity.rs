//! What f16 keys and values cost in quality: chapter 9's perplexity (the fixtures' method:
//! windows of 256 tokens from an empty cache, every token after a window's first scored),
//! computed through the batched step with the keys and values in f32 or in f16.
//!
//! With f32 blocks the number is chapter 9's exactly, since every row's arithmetic is; the
//! difference f16 makes is the cost of halving the pool.

use ch08_gguf::engine::Engine;
use ch09_generate::perplexity::WINDOW;

use crate::batch::{Row, forward_batch};
use crate::seq::{KvBlocks, KvPrecision};

// ANCHOR: perplexity
/// (perplexity, tokens scored) of `ids` with keys and values stored in `precision`.
pub fn perplexity(
    engine: &Engine,
    ids: &[u32],
    bos: Option<u32>,
    precision: KvPrecision,
) -> Result<(f64, usize), String> {
    let vocab = engine.model.config.vocab_size;
    let bs = 16;
    let table: Vec<usize> = (0..(WINDOW + 1).div_ceil(bs)).collect();
    let mut kv = KvBlocks::new(engine.layout(), bs, table.len(), precision);
    let (mut nll, mut scored) = (0.0f64, 0usize);
    for chunk in ids.chunks(WINDOW) {
        let window: Vec<u32> = bos.into_iter().chain(chunk.iter().copied()).collect();
        if window.len() < 2 {
            continue;
        }
        let rows: Vec<Row> = (window.iter().enumerate())
            .map(|(pos, &token)| Row {
                seq: 0,
                token,
                pos,
                logits: true,
            })
            .collect();
        let logits = forward_batch(engine, &mut kv, &[&table], &rows)?; // (window, vocab)
        for pos in 1..window.len() {
            let row = &logits[(pos - 1) * vocab..pos * vocab];
            let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
            let logz = row
                .iter()
                .map(|&v| (v as f64 - max).exp())
                .sum::<f64>()
                .ln()
                + max;
            nll += logz - row[window[pos] as usize] as f64;
            scored += 1;
        }
    }
    if scored == 0 {
        return Err("the text is too short to score: it needs at least two tokens".into());
    }
    Ok(((nll / scored as f64).exp(), scored))
}
// ANCHOR_END: perplexity
