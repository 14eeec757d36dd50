//! What the grammar costs: decode with and without it, in the same minutes.
//!
//! Each round runs chapter 8's tg128 (the forward pass and an argmax, nothing around it),
//! then one request of 128 tokens through chapter 10's engine left alone (`plain`), then
//! the same request under a nested-object schema (`constrained`), the order reversed in
//! odd rounds; the medians are reported, and the constrained rate over the plain one of the
//! same round, whose two runs share the host's mood of that minute. Greedy decoding asks
//! the grammar about the top token alone and builds the whole mask only when it is
//! refused, so `mask_us_per_token` is measured apart: the whole vocabulary masked at every
//! position of the constrained answer, which is what a sampled request pays each token.

use std::sync::Arc;
use std::time::Instant;

use ch07_simd_parallel::pool::in_pool;
use ch07_simd_parallel::stats::median;
use ch08_gguf::Loaded;
use ch09_generate::chat::{Chat, Message};
use ch10_batching::Request;

use crate::answer::{Answer, run};
use crate::constrain::Constraint;
use crate::grammar::Grammar;
use crate::mask::{TokenIndex, TokenSet};
use crate::matcher::Matcher;
use crate::schema::{Limits, compile_text};

/// The benchmark's schema: a book, its author and the author's home, and its chapters.
pub const SCHEMA: &str = include_str!("../schemas/book.json");

/// What the benchmark asks for, in the model's chat template.
pub const PROMPT: &str = "Describe a long novel as JSON: its title, its author (name, year \
    born, home city and country) and every one of its chapters with its title and pages.";

/// Tokens each run generates (at most, for the constrained one: it may finish first).
pub const TOKENS: usize = 128;

/// The medians of the rounds.
#[derive(Clone, Debug)]
pub struct BenchResult {
    pub rounds: usize,
    pub threads: usize,
    pub vocab_size: usize,
    /// Chapter 8's tg128.
    pub tg128_tok_s: f64,
    /// The request through chapter 10's engine, no grammar.
    pub plain_tok_s: f64,
    /// The same request under [`SCHEMA`].
    pub constrained_tok_s: f64,
    /// Constrained over plain, each round's own ratio, the median.
    pub constrained_over_plain: f64,
    /// The whole vocabulary's mask, mean over the constrained answer's positions.
    pub mask_us_per_token: f64,
    /// How many tokens the constrained answer had, and the answer itself.
    pub constrained_tokens: usize,
    pub answer: String,
}

impl BenchResult {
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "rounds": self.rounds, "threads": self.threads, "vocab_size": self.vocab_size,
            "tg128_tok_s": self.tg128_tok_s, "plain_tok_s": self.plain_tok_s,
            "constrained_tok_s": self.constrained_tok_s,
            "constrained_over_plain": self.constrained_over_plain,
            "mask_us_per_token": self.mask_us_per_token,
            "constrained_tokens": self.constrained_tokens,
        })
    }
}

// ANCHOR: bench
/// `rounds` rounds of tg128, plain and constrained decode on `threads` threads.
pub fn bench(m: &Loaded, threads: usize, rounds: usize) -> Result<BenchResult, String> {
    let engine = || m.engine();
    let tokenizer = &m.tokenizer.tokenizer;
    let chat = Chat::of_model(m, None)?;
    let prompt = chat.prompt_ids(&m.tokenizer, &[Message::new("user", PROMPT)])?;
    let grammar = compile_text(SCHEMA, Limits::default()).map_err(|e| e.to_string())?;
    let index = Arc::new(TokenIndex::from_tokenizer(
        tokenizer,
        m.tokenizer.end_ids.clone(),
    ));
    let request = || {
        let mut r = Request::greedy(prompt.clone(), TOKENS);
        r.ignore_eos = true; // the plain run: always 128 tokens
        r
    };
    let constrained = || -> Result<Answer, String> {
        let steer =
            Constraint::new(&grammar, index.clone(), Some(TOKENS)).map_err(|e| e.to_string())?;
        let r = Request::greedy(prompt.clone(), TOKENS);
        in_pool(threads, || run(engine()?, tokenizer, r, Some(steer)))?
    };
    let plain = || -> Result<Answer, String> {
        in_pool(threads, || run(engine()?, tokenizer, request(), None))?
    };
    let tg128 = || ch08_gguf::bench::decode_at_depth(&engine()?, threads, 0);
    // one of each first, untimed: the caches and the page tables warm up
    plain()?;
    let mut last = constrained()?;
    let (mut tg, mut pl, mut co, mut ratio) = (vec![], vec![], vec![], vec![]);
    for round in 0..rounds.max(1) {
        let (t, p, c) = if round % 2 == 0 {
            let t = tg128()?;
            let p = plain()?;
            (t, p, constrained()?)
        } else {
            let c = constrained()?;
            let p = plain()?;
            (tg128()?, p, c)
        };
        tg.push(t);
        pl.push(p.decode_tok_s());
        co.push(c.decode_tok_s());
        ratio.push(c.decode_tok_s() / p.decode_tok_s());
        last = c;
    }
    Ok(BenchResult {
        rounds: rounds.max(1),
        threads,
        vocab_size: index.vocab_size(),
        tg128_tok_s: median(&mut tg),
        plain_tok_s: median(&mut pl),
        constrained_tok_s: median(&mut co),
        constrained_over_plain: median(&mut ratio),
        mask_us_per_token: mask_us(&grammar, &index, &last.ids),
        constrained_tokens: last.ids.len(),
        answer: last.text,
    })
}
// ANCHOR_END: bench

/// The mean time of a whole mask before each of the tokens `ids`.
fn mask_us(grammar: &Grammar, index: &TokenIndex, ids: &[u32]) -> f64 {
    let mut matcher = Matcher::new(grammar);
    let mut set = TokenSet::empty(index.vocab_size());
    let (mut total, mut count) = (0.0, 0usize);
    for &id in ids {
        let t = Instant::now();
        index.mask(&matcher, &mut set);
        total += t.elapsed().as_secs_f64() * 1e6;
        count += 1;
        matcher.accept(index.piece(id)); // an end token's piece is empty
    }
    total / count.max(1) as f64
}
