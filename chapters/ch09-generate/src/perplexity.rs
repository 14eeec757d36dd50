//! Perplexity, computed the way the fixtures' llama.cpp run computed it: the text tokenized
//! without BOS or special tokens, cut into windows of 256 tokens, each window (with BOS in
//! front if the model adds one) run from an empty cache, every token after the first of a
//! window scored; `exp` of the mean negative log-likelihood, in f64.

use ch08_gguf::engine::Engine;

/// The window the fixtures use.
pub const WINDOW: usize = 256;

/// (perplexity, tokens scored).
pub fn perplexity(engine: &Engine, ids: &[u32], bos: Option<u32>) -> Result<(f64, usize), String> {
    perplexity_with(engine.model.config.vocab_size, ids, bos, &mut |window| {
        engine.window_logits(window).map_err(|e| e.to_string())
    })
}

/// Gives the logits of every position of a window, `(window, vocab)`.
pub type WindowLogits<'a> = dyn FnMut(&[u32]) -> Result<Vec<f32>, String> + 'a;

/// [`perplexity`] with the logits of each window (`(window, vocab)`) from `window_logits`:
/// chapter 10 computes them through its batched step.
pub fn perplexity_with(
    vocab: usize,
    ids: &[u32],
    bos: Option<u32>,
    window_logits: &mut WindowLogits,
) -> Result<(f64, usize), String> {
    let (mut nll, mut scored) = (0.0f64, 0usize);
    for chunk in ids.chunks(WINDOW) {
        let window: Vec<u32> = bos.into_iter().chain(chunk.iter().copied()).collect();
        if window.len() < 2 {
            continue;
        }
        let logits = window_logits(&window)?;
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
