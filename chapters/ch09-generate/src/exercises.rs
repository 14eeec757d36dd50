//! Exercises for chapter 9. Fill in each `todo!()`, then run `cargo xtask exercises ch09`.
#![allow(unused_variables)]

/// Exercise 1: top-p.
///
/// `probs` are probabilities sorted from highest to lowest (they sum to 1). Return how many
/// to keep: the fewest whose sum reaches at least `p`, and never fewer than one.
///
/// Hint: add them up in order and stop at the first running sum `>= p`. With `p = 1` keep
/// them all. See "Top-k, top-p and min-p".
pub fn top_p_keep(probs: &[f64], p: f64) -> usize {
    // TODO: a running sum.
    todo!("exercise 1: top-p")
}

/// Exercise 2: min-p.
///
/// Return the ids of the `logits` whose probability is at least `min_p` times the largest
/// probability, in id order.
///
/// Hint: no softmax needed: `p_i ≥ min_p · p_max` is `logit_i ≥ logit_max + ln(min_p)`.
/// See "Top-k, top-p and min-p".
pub fn min_p_keep(logits: &[f32], min_p: f32) -> Vec<usize> {
    // TODO: the largest logit, then a floor.
    todo!("exercise 2: min-p")
}

/// Exercise 3: how much text to hold back.
///
/// Return how many bytes at the end of `text` could be the beginning of one of the `stops`
/// (a proper prefix of it), the longest such tail; 0 if none. Only count whole characters.
///
/// Hint: for each stop string, try its prefixes (`s.char_indices()` gives the cut points)
/// and `text.ends_with`. See "Stop strings".
pub fn hold_back(text: &str, stops: &[&str]) -> usize {
    // TODO: the longest prefix of any stop that `text` ends with.
    todo!("exercise 3: a stop-string matcher across token boundaries")
}

/// Exercise 4: the repetition penalty.
///
/// Return `logit` after llama.cpp's penalties for a token seen `count` times (0: unchanged)
/// in the recent window: divided by `repeat` if positive, multiplied by it if zero or
/// negative, then lowered by `count · frequency + presence`.
///
/// Hint: dividing a negative logit by a penalty above 1 would make the token *more*
/// likely. See "Penalties".
pub fn penalize(logit: f32, count: u32, repeat: f32, frequency: f32, presence: f32) -> f32 {
    // TODO: nothing for count 0; otherwise the two steps.
    todo!("exercise 4: the repetition penalty")
}
