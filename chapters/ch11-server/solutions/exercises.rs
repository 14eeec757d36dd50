//! Reference solutions to chapter 11's exercises.

pub fn sse_frame(data: &str) -> String {
    let mut out = String::new();
    for line in data.split('\n') {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    out
}

pub fn status_for(e: &ch10_batching::Error) -> u16 {
    use ch10_batching::Error as E;
    match e {
        E::EmptyPrompt | E::ZeroMaxTokens | E::ContextTooSmall { .. } | E::PoolTooSmall { .. } => {
            400
        }
        E::UnknownRequest(_) | E::Config(_) | E::Model(_) => 500,
    }
}

pub struct TokenBucket {
    pub capacity: f64,
    pub rate: f64,
    pub tokens: f64,
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
        self.tokens = (self.tokens + (now - self.last) * self.rate).min(self.capacity);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

pub fn logprob(logits: &[f32], id: usize) -> f32 {
    let m = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f32 = logits.iter().map(|&l| (l - m).exp()).sum();
    logits[id] - m - sum.ln()
}
