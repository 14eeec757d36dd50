//! From logits to one token: the sampling chain.
//!
//! Greedy decoding (chapters 4–8) always takes the top token, and a small model taking its
//! top token falls into loops ("It is the capital of the country of France. It is the
//! capital of …"). Sampling draws the next token from the model's distribution instead,
//! after reshaping it. The stages run in llama.cpp's default order:
//!
//! ```text
//! logits ─ penalties ─ top-k ─ top-p ─ min-p ─ temperature ─ softmax ─ draw
//! ```
//!
//! - **penalties** lower the logits of tokens seen in the last N (repetition: divide a
//!   positive logit, multiply a negative one; frequency and presence: subtract);
//! - **top-k** keeps the k most likely tokens;
//! - **top-p** keeps the fewest tokens whose probabilities add up to at least p;
//! - **min-p** keeps tokens at least `min_p` times as likely as the most likely one;
//! - **temperature** divides the surviving logits: below 1 sharpens, above 1 flattens.
//!
//! The filters come before temperature, so `--temp` changes how the survivors are weighed,
//! not which survive. A temperature of 0 means greedy: the top token, no draw.

use crate::rng::Rng;

// ANCHOR: config
/// The chain's settings, llama.cpp's names and defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplerConfig {
    /// 0: greedy.
    pub temperature: f32,
    /// 0: off.
    pub top_k: usize,
    /// 1.0: off.
    pub top_p: f32,
    /// 0.0: off.
    pub min_p: f32,
    /// 1.0: off.
    pub repeat_penalty: f32,
    pub frequency_penalty: f32,
    pub presence_penalty: f32,
    /// How many recent tokens the penalties look at.
    pub repeat_last_n: usize,
    pub seed: u64,
}

impl Default for SamplerConfig {
    fn default() -> SamplerConfig {
        SamplerConfig {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            repeat_last_n: 64,
            seed: 0,
        }
    }
}
// ANCHOR_END: config

/// The command-line flags that set a [`SamplerConfig`] field, without their `--`.
pub const SAMPLING_FLAGS: [&str; 9] = [
    "temp",
    "top-k",
    "top-p",
    "min-p",
    "repeat-penalty",
    "repeat-last-n",
    "frequency-penalty",
    "presence-penalty",
    "seed",
];

impl SamplerConfig {
    /// Sets the field that `--flag` (one of [`SAMPLING_FLAGS`]) names from its value, for the
    /// command lines of chapter 9 and of the chapters after it.
    pub fn set_flag(&mut self, flag: &str, value: std::ffi::OsString) -> Result<(), String> {
        fn number<T: std::str::FromStr>(flag: &str, v: &str) -> Result<T, String> {
            v.parse()
                .map_err(|_| format!("--{flag}: {v:?} is not a valid number"))
        }
        let v = value
            .into_string()
            .map_err(|v| format!("--{flag}: {v:?} is not valid UTF-8"))?;
        match flag {
            "temp" => self.temperature = number(flag, &v)?,
            "top-k" => self.top_k = number(flag, &v)?,
            "top-p" => self.top_p = number(flag, &v)?,
            "min-p" => self.min_p = number(flag, &v)?,
            "repeat-penalty" => self.repeat_penalty = number(flag, &v)?,
            "repeat-last-n" => self.repeat_last_n = number(flag, &v)?,
            "frequency-penalty" => self.frequency_penalty = number(flag, &v)?,
            "presence-penalty" => self.presence_penalty = number(flag, &v)?,
            "seed" => self.seed = number(flag, &v)?,
            other => return Err(format!("--{other} is not a sampling flag")),
        }
        Ok(())
    }

    /// The bounds a command line holds the settings to: the first one out of them, named by
    /// its flag.
    pub fn check(&self) -> Result<(), String> {
        let check = |ok: bool, msg: &str| if ok { Ok(()) } else { Err(msg.to_string()) };
        check(
            self.temperature.is_finite() && (0.0..=100.0).contains(&self.temperature),
            "--temp must be between 0 and 100",
        )?;
        check(
            self.top_p > 0.0 && self.top_p <= 1.0,
            "--top-p must be in (0, 1]",
        )?;
        check(
            (0.0..=1.0).contains(&self.min_p),
            "--min-p must be in [0, 1]",
        )?;
        check(self.top_k <= 1 << 20, "--top-k must be at most 1048576")?;
        check(
            self.repeat_penalty.is_finite() && self.repeat_penalty > 0.0,
            "--repeat-penalty must be positive",
        )?;
        check(
            self.repeat_last_n <= 1 << 16,
            "--repeat-last-n must be at most 65536",
        )?;
        check(
            self.frequency_penalty.is_finite() && self.presence_penalty.is_finite(),
            "--frequency-penalty and --presence-penalty must be finite",
        )
    }

    /// Whether any penalty is on.
    pub fn has_penalties(&self) -> bool {
        self.repeat_penalty != 1.0 || self.frequency_penalty != 0.0 || self.presence_penalty != 0.0
    }
}

/// A candidate token: its id and its current logit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate {
    pub id: u32,
    pub logit: f32,
}

// ANCHOR: penalties
/// Lowers the logits of tokens that occur in `recent` (the last `repeat_last_n` tokens).
pub fn apply_penalties(logits: &mut [f32], recent: &[u32], cfg: &SamplerConfig) {
    if !cfg.has_penalties() {
        return;
    }
    let mut counts: Vec<(u32, u32)> = Vec::new(); // (id, occurrences), sorted by id
    for &id in recent {
        match counts.binary_search_by_key(&id, |&(i, _)| i) {
            Ok(at) => counts[at].1 += 1,
            Err(at) => counts.insert(at, (id, 1)),
        }
    }
    for (id, n) in counts {
        let Some(l) = logits.get_mut(id as usize) else {
            continue;
        };
        // Dividing a negative logit would make the token *more* likely: multiply it.
        *l = if *l <= 0.0 {
            *l * cfg.repeat_penalty
        } else {
            *l / cfg.repeat_penalty
        };
        *l -= n as f32 * cfg.frequency_penalty + cfg.presence_penalty;
    }
}
// ANCHOR_END: penalties

/// Softmax probabilities of the candidates, in their order (computed in f64).
pub fn probabilities(c: &[Candidate]) -> Vec<f64> {
    let max = c.iter().map(|c| c.logit).fold(f32::NEG_INFINITY, f32::max) as f64;
    let e: Vec<f64> = c.iter().map(|c| (c.logit as f64 - max).exp()).collect();
    let sum: f64 = e.iter().sum();
    e.into_iter().map(|x| x / sum).collect()
}

// ANCHOR: filters
/// Keeps the `k` highest logits (all of them when `k` is 0 or at least their number).
/// Sorts the candidates by logit, highest first (ties: lower id first).
///
/// Sorting a vocabulary of 262 144 to keep 40 is most of a token's sampling time, so when
/// `k` cuts, a selection first moves the `k` highest to the front (linear time), and only
/// those are sorted. The order is total, so the result is the full sort's first `k`.
pub fn top_k(c: &mut Vec<Candidate>, k: usize) {
    let order = |a: &Candidate, b: &Candidate| b.logit.total_cmp(&a.logit).then(a.id.cmp(&b.id));
    if k > 0 && k < c.len() {
        c.select_nth_unstable_by(k - 1, order);
        c.truncate(k);
    }
    c.sort_unstable_by(order);
}

/// The `k` highest of `logits` (`0 < k`), sorted as [`top_k`] sorts them: the same
/// candidates it keeps, in one pass that holds at most `2k`. A logit joins only if it beats
/// the `k`-th best kept so far (a later id with an equal logit loses the tie, as in the
/// order); when `2k` are held, a selection cuts them back to `k`. Once that bar is set, almost
/// no logit passes it, so the logits are read sixteen at a time and a run of sixteen whose
/// largest does not beat the bar is passed over whole: the largest of sixteen order keys is
/// a few SIMD instructions, where a comparison a logit is a branch a logit.
pub fn top_k_of(logits: &[f32], k: usize) -> Vec<Candidate> {
    let order = |a: &Candidate, b: &Candidate| b.logit.total_cmp(&a.logit).then(a.id.cmp(&b.id));
    let mut kept: Vec<Candidate> = Vec::with_capacity(2 * k);
    let mut bar: Option<i32> = None; // the k-th best logit's order key once k are kept
    for (run, sixteen) in logits.chunks(16).enumerate() {
        let best = sixteen.iter().map(|&v| order_key(v)).max();
        if bar.is_some_and(|b| best <= Some(b)) {
            continue;
        }
        for (j, &logit) in sixteen.iter().enumerate() {
            if bar.is_some_and(|b| order_key(logit) <= b) {
                continue;
            }
            kept.push(Candidate {
                id: (16 * run + j) as u32,
                logit,
            });
            if kept.len() == 2 * k {
                kept.select_nth_unstable_by(k - 1, order);
                kept.truncate(k);
                bar = Some(order_key(kept[k - 1].logit));
            }
        }
    }
    top_k(&mut kept, k);
    kept
}

/// `f32::total_cmp`'s own key: an f32's bits as i32, the negative ones' magnitude bits
/// flipped, so that comparing keys as integers compares the floats in `total_cmp`'s order.
fn order_key(v: f32) -> i32 {
    let b = v.to_bits() as i32;
    b ^ (((b >> 31) as u32) >> 1) as i32
}

// ANCHOR_END: filters

// ANCHOR: filters_p
/// Keeps the fewest candidates (sorted highest first) whose probabilities sum to at least
/// `p`; always at least one.
pub fn top_p(c: &mut Vec<Candidate>, p: f32) {
    if p >= 1.0 || c.is_empty() {
        return;
    }
    let probs = probabilities(c);
    let mut sum = 0.0;
    let mut keep = c.len();
    for (i, q) in probs.iter().enumerate() {
        sum += q;
        if sum >= f64::from(p) {
            keep = i + 1;
            break;
        }
    }
    c.truncate(keep.max(1));
}

/// Keeps the candidates at least `min_p` times as likely as the most likely one.
pub fn min_p(c: &mut Vec<Candidate>, min_p: f32) {
    if min_p <= 0.0 || c.is_empty() {
        return;
    }
    let max = c.iter().map(|c| c.logit).fold(f32::NEG_INFINITY, f32::max);
    // p_i ≥ min_p · p_max  ⇔  logit_i ≥ logit_max + ln(min_p)
    let floor = max + min_p.ln();
    let first = c[0];
    c.retain(|c| c.logit >= floor);
    if c.is_empty() {
        c.push(first); // NaN logits, which no comparison keeps: the chain keeps its top
    }
}
// ANCHOR_END: filters_p

/// The stages of the chain, in the order [`Sampler::survivors`] runs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Penalties,
    TopK,
    TopP,
    MinP,
    Temperature,
}

impl Stage {
    pub fn name(self) -> &'static str {
        match self {
            Stage::Penalties => "penalties",
            Stage::TopK => "top-k",
            Stage::TopP => "top-p",
            Stage::MinP => "min-p",
            Stage::Temperature => "temperature",
        }
    }
}

// ANCHOR: sampler
/// The chain, with its random state and the tokens it has seen.
pub struct Sampler {
    pub config: SamplerConfig,
    rng: Rng,
}

impl Sampler {
    pub fn new(config: SamplerConfig) -> Sampler {
        let rng = Rng::new(config.seed);
        Sampler { config, rng }
    }

    /// The candidates that survive every filter, highest first, with their final logits
    /// (after temperature), calling `trace` with each stage's name and its candidates after
    /// the stage has run (`ch09-generate stages` draws them). [`Sampler::survivors`] is
    /// the same without the trace, and quicker.
    pub fn survivors_traced(
        &self,
        logits: &[f32],
        history: &[u32],
        trace: &mut dyn FnMut(Stage, &[Candidate]),
    ) -> Vec<Candidate> {
        let cfg = &self.config;
        let mut logits = logits.to_vec();
        let recent = &history[history.len().saturating_sub(cfg.repeat_last_n)..];
        apply_penalties(&mut logits, recent, cfg);
        let mut c: Vec<Candidate> = logits
            .iter()
            .enumerate()
            .map(|(id, &logit)| Candidate {
                id: id as u32,
                logit,
            })
            .collect();
        trace(Stage::Penalties, &c);
        top_k(&mut c, cfg.top_k);
        trace(Stage::TopK, &c);
        top_p(&mut c, cfg.top_p);
        trace(Stage::TopP, &c);
        min_p(&mut c, cfg.min_p);
        trace(Stage::MinP, &c);
        if cfg.temperature > 0.0 {
            for x in &mut c {
                x.logit /= cfg.temperature;
            }
        }
        trace(Stage::Temperature, &c);
        c
    }
    // ANCHOR_END: sampler

    // ANCHOR: sampler_fast
    /// The candidates that survive every filter, highest first, with their final logits
    /// (after temperature): what the draw chooses from. [`Sampler::survivors_traced`]'s
    /// result, found without a candidate for every token of the vocabulary when top-k cuts:
    /// one pass keeps the `k` best seen so far ([`top_k_of`]), and the later stages run on
    /// those `k`, which is all they would see after the chain's top-k anyway.
    pub fn survivors(&self, logits: &[f32], history: &[u32]) -> Vec<Candidate> {
        let cfg = &self.config;
        if cfg.top_k == 0 || cfg.top_k >= logits.len() {
            return self.survivors_traced(logits, history, &mut |_, _| {});
        }
        let recent = &history[history.len().saturating_sub(cfg.repeat_last_n)..];
        let mut c = if recent.is_empty() || !cfg.has_penalties() {
            top_k_of(logits, cfg.top_k)
        } else {
            let mut penalised = logits.to_vec();
            apply_penalties(&mut penalised, recent, cfg);
            top_k_of(&penalised, cfg.top_k)
        };
        top_p(&mut c, cfg.top_p);
        min_p(&mut c, cfg.min_p);
        if cfg.temperature > 0.0 {
            for x in &mut c {
                x.logit /= cfg.temperature;
            }
        }
        c
    }
    // ANCHOR_END: sampler_fast

    /// Temperature 0: the same logits always give the same token, and no draw is made.
    pub fn is_greedy(&self) -> bool {
        self.config.temperature <= 0.0
    }

    // ANCHOR: sampler_draw
    /// The next token after `logits`, given the tokens so far.
    pub fn sample(&mut self, logits: &[f32], history: &[u32]) -> u32 {
        if self.config.temperature <= 0.0 {
            return self.greedy(logits, history);
        }
        let c = self.survivors(logits, history);
        if c.len() == 1 {
            return c[0].id;
        }
        let probs = probabilities(&c);
        let r = self.rng.next_f64();
        let mut acc = 0.0;
        for (cand, p) in c.iter().zip(&probs) {
            acc += p;
            if r < acc {
                return cand.id;
            }
        }
        c[c.len() - 1].id // r within rounding of 1
    }

    /// Temperature 0: the top token after the penalties, ties to the lower id. No filter
    /// ever removes the top token, so this is the chain's first survivor, found by
    /// [`first_max`] instead of a sort.
    fn greedy(&self, logits: &[f32], history: &[u32]) -> u32 {
        let cfg = &self.config;
        let recent = &history[history.len().saturating_sub(cfg.repeat_last_n)..];
        let mut penalised;
        let logits = if recent.is_empty() || !cfg.has_penalties() {
            logits
        } else {
            penalised = logits.to_vec();
            apply_penalties(&mut penalised, recent, cfg);
            &penalised
        };
        first_max(logits) as u32
    }
}
// ANCHOR_END: sampler_draw

// ANCHOR: first_max
/// The index of the largest of `x` by `f32::total_cmp`, the first of equal ones (0 if `x` is
/// empty). Chapter 4's `argmax` in `total_cmp`'s order: sixteen running maxima of the
/// values' order keys, one a lane, so the compiler compares sixteen at once; their largest;
/// then where it first occurs (`first_where`). One pass that compares each logit with the
/// best so far would be a branch per logit, which the compiler cannot turn into SIMD.
pub fn first_max(x: &[f32]) -> usize {
    const LANES: usize = 16;
    let mut lanes = [i32::MIN; LANES];
    let chunks = x.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for (m, &v) in lanes.iter_mut().zip(c) {
            *m = (*m).max(order_key(v));
        }
    }
    let rest = rest.iter().map(|&v| order_key(v));
    let best = lanes.into_iter().chain(rest).max().unwrap_or(i32::MIN);
    ch04_forward::model::first_where(x, |v| order_key(v) == best)
}
// ANCHOR_END: first_max

#[cfg(test)]
mod tests;
