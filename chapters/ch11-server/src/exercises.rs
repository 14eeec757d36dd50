//! Exercises for chapter 11. Fill in each `todo!()`, then run `cargo xtask exercises ch11`.
#![allow(unused_variables)]

/// Exercise 1: a Server-Sent Events frame.
///
/// Return `data` as one SSE event: every line of it prefixed with `data: `, each line ending
/// in `\n`, and a blank line after the last, so `"a"` becomes `"data: a\n\n"` and
/// `"a\nb"` becomes `"data: a\ndata: b\n\n"`.
///
/// Hint: `str::split('\n')` keeps an empty last piece for a trailing newline, which is what
/// the format wants (an empty `data:` line). See "Tokens as events".
pub fn sse_frame(data: &str) -> String {
    // TODO: one `data: ` line per line of `data`, then the blank line.
    todo!("exercise 1: an SSE frame")
}

/// Exercise 2: an engine error as an HTTP status.
///
/// Chapter 10's engine refuses a request with a [`ch10_batching::Error`]. Return the status
/// the server answers with: 400 for what the client asked wrong (`EmptyPrompt`,
/// `ZeroMaxTokens`, `ContextTooSmall`, `PoolTooSmall`), 500 for the server's own failures
/// (`UnknownRequest`, `Config`, `Model`).
///
/// Hint: a `match` with `|` between the variants of each group. See "Errors in OpenAI's shape".
pub fn status_for(e: &ch10_batching::Error) -> u16 {
    // TODO: 400 for the client's mistakes, 500 for the server's.
    todo!("exercise 2: an engine error as an HTTP status")
}

/// Exercise 3: a token bucket.
///
/// A client may send `rate` requests a second on average, and `capacity` at once after a
/// quiet spell. The bucket holds up to `capacity` tokens and gains `rate` tokens a second;
/// a request takes one token, or is refused (with a 429) when there is less than one.
/// `try_take(now)` (seconds, never decreasing) refills the bucket for the time since the
/// last call, then takes a token if it can.
///
/// Hint: `tokens = (tokens + (now - last) * rate).min(capacity)`, then remember `now`. See
/// "Backpressure".
pub struct TokenBucket {
    pub capacity: f64,
    pub rate: f64,
    /// Tokens now; a new bucket starts full.
    pub tokens: f64,
    /// When it was last refilled.
    pub last: f64,
}

impl TokenBucket {
    pub fn new(capacity: f64, rate: f64) -> TokenBucket {
        TokenBucket {
            capacity,
            rate,
            tokens: capacity,
            last: 0.0,
        }
    }

    pub fn try_take(&mut self, now: f64) -> bool {
        // TODO: refill for `now - self.last`, capped at `capacity`; take one if there is one.
        todo!("exercise 3: a token bucket")
    }
}

/// Exercise 4: a token's log-probability.
///
/// Return `log softmax(logits)[id]`: `logits[id] − log Σ exp(logits[j])`. Compute it without
/// overflow: subtract the largest logit before `exp` (a logit of 1000 must work).
///
/// Hint: `log Σ exp(l_j) = m + log Σ exp(l_j − m)` for `m = max l_j`. See "Log-probabilities".
pub fn logprob(logits: &[f32], id: usize) -> f32 {
    // TODO: the stable log-sum-exp, then the difference.
    todo!("exercise 4: a log-probability")
}
