//! Reference solutions for chapter 9's exercises.

/// Exercise 1: top-p.
pub fn top_p_keep(probs: &[f64], p: f64) -> usize {
    let mut sum = 0.0;
    for (i, q) in probs.iter().enumerate() {
        sum += q;
        if sum >= p {
            return i + 1;
        }
    }
    probs.len().max(1)
}

/// Exercise 2: min-p.
pub fn min_p_keep(logits: &[f32], min_p: f32) -> Vec<usize> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let floor = max + min_p.ln();
    (0..logits.len()).filter(|&i| logits[i] >= floor).collect()
}

/// Exercise 3: how much text to hold back.
pub fn hold_back(text: &str, stops: &[&str]) -> usize {
    let mut hold = 0;
    for s in stops {
        for (k, _) in s.char_indices().skip(1) {
            if k > hold && text.ends_with(&s[..k]) {
                hold = k;
            }
        }
    }
    hold
}

/// Exercise 4: the repetition penalty.
pub fn penalize(logit: f32, count: u32, repeat: f32, frequency: f32, presence: f32) -> f32 {
    if count == 0 {
        return logit;
    }
    let l = if logit <= 0.0 {
        logit * repeat
    } else {
        logit / repeat
    };
    l - count as f32 * frequency - presence
}
