//! Drawing each sequence's next token: chapter 9's sampler, with a shortcut for greedy
//! requests that gives the same token.
//!
//! Chapter 9's chain sorts the whole vocabulary before top-k (49 152 candidates for
//! SmolLM2, 262 144 for Gemma-3): a few milliseconds a token. One stream hardly notices;
//! a step that ends sixteen sequences would spend longer sorting than running the model. So
//! the engine draws on the threads, one sequence each, and a greedy request (temperature 0)
//! skips the sort: its token is the largest logit after the penalties, the lower id on a
//! tie — exactly the first candidate of the sorted chain, since top-p and min-p always keep
//! the first. The batch invariance tests check both against chapter 9's generator.

use ch09_generate::Sampler;
use ch09_generate::sampling::apply_penalties;

// ANCHOR: pick
/// The next token after `logits` (`(vocab)`) for a sequence whose tokens so far are
/// `history`.
pub fn pick(sampler: &mut Sampler, logits: &[f32], history: &[u32]) -> u32 {
    let cfg = &sampler.config;
    if cfg.temperature > 0.0 {
        return sampler.sample(logits, history);
    }
    let recent = &history[history.len().saturating_sub(cfg.repeat_last_n)..];
    let off =
        cfg.repeat_penalty == 1.0 && cfg.frequency_penalty == 0.0 && cfg.presence_penalty == 0.0;
    let penalised;
    let logits = if off || recent.is_empty() {
        logits
    } else {
        let mut l = logits.to_vec();
        apply_penalties(&mut l, recent, cfg);
        penalised = l;
        &penalised
    };
    argmax(logits)
}

/// The index of the largest value (by `total_cmp`), the first one on a tie.
pub fn argmax(xs: &[f32]) -> u32 {
    let mut best = 0;
    for (i, x) in xs.iter().enumerate() {
        if x.total_cmp(&xs[best]).is_gt() {
            best = i;
        }
    }
    best as u32
}
// ANCHOR_END: pick

#[cfg(test)]
mod tests {
    use super::*;
    use ch09_generate::SamplerConfig;

    #[test]
    fn the_greedy_shortcut_is_the_chain_s_first_candidate() {
        let mut rng = ch09_generate::rng::Rng::new(3);
        for trial in 0..50 {
            // few distinct values, so ties are common
            let logits: Vec<f32> = (0..500)
                .map(|_| (rng.next_u64() % 7) as f32 - 3.0)
                .collect();
            let history: Vec<u32> = (0..trial).map(|_| (rng.next_u64() % 500) as u32).collect();
            let cfg = SamplerConfig {
                temperature: 0.0,
                repeat_penalty: if trial % 2 == 0 { 1.3 } else { 1.0 },
                presence_penalty: 0.5 * (trial % 3) as f32,
                ..SamplerConfig::default()
            };
            let mut chain = Sampler::new(cfg.clone());
            let want = chain.sample(&logits, &history);
            assert_eq!(
                pick(&mut Sampler::new(cfg), &logits, &history),
                want,
                "trial {trial}"
            );
        }
    }
}
