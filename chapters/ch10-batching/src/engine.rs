//! The batched engine: requests in, a step at a time, tokens out.
//!
//! [`BatchEngine::submit`] checks a request and queues it; [`BatchEngine::step`] asks the
//! scheduler for a plan, applies it to the pool (preempt, admit with the prefix cache,
//! allocate, copy on write), runs the batch, samples each finished row with its own
//! sampler and sends the tokens; [`BatchEngine::cancel`] ends a request and returns its
//! blocks at once. One thread owns the engine; everything else talks to it through the
//! channels.

use std::sync::mpsc::{Receiver, Sender, channel};

use ch02_tokenizer::{StreamDecoder, Tokenizer};
use ch08_gguf::engine::Engine;
use ch09_generate::{Sampler, StopMatcher};

use crate::batch::{Row, forward_batch};
use crate::error::Error;
use crate::pool::BlockPool;
use crate::prefix::{BlockKey, PrefixIndex, block_key};
use crate::request::{Event, FinishReason, Finished, Request};
use crate::scheduler::{Limits, Plan, SeqState, plan};
use crate::seq::KvBlocks;

/// The engine's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Positions per KV block.
    pub block_size: usize,
    /// Blocks in the pool.
    pub n_blocks: usize,
    /// Rows (tokens) in one step at most.
    pub max_batch_tokens: usize,
    /// Sequences running at once at most.
    pub max_seqs: usize,
    /// Share the KV blocks of common prompt prefixes.
    pub prefix_sharing: bool,
}

/// The largest step this engine agrees to run (rows of activations are sized by it).
pub const MAX_BATCH_TOKENS: usize = 8192;

impl Config {
    /// A pool of `kv_mb` megabytes (10⁶ bytes) of f32 K/V, for the model's layout.
    pub fn with_kv_mb(
        engine: &Engine,
        kv_mb: usize,
        max_batch_tokens: usize,
    ) -> Result<Config, Error> {
        let block_size = 16;
        let per_block = KvBlocks::bytes_per_block(engine.layout(), block_size);
        let n_blocks = kv_mb.saturating_mul(1_000_000) / per_block;
        if n_blocks == 0 {
            return Err(Error::Config(format!(
                "a KV pool of {kv_mb} MB is too small for one block: a block of {block_size} positions is {per_block} bytes for this model"
            )));
        }
        Ok(Config {
            block_size,
            n_blocks,
            max_batch_tokens,
            max_seqs: max_batch_tokens.min(64),
            prefix_sharing: true,
        })
    }

    fn check(&self) -> Result<(), Error> {
        let bad = |m: String| Err(Error::Config(m));
        if !(1..=MAX_BATCH_TOKENS).contains(&self.max_batch_tokens) {
            return bad(format!(
                "the token budget of a step must be 1 to {MAX_BATCH_TOKENS}, not {}",
                self.max_batch_tokens
            ));
        }
        if self.max_seqs == 0 || self.max_seqs > self.max_batch_tokens {
            return bad(format!(
                "max_seqs must be 1 to the step's budget ({}), not {}",
                self.max_batch_tokens, self.max_seqs
            ));
        }
        if !(1..=1024).contains(&self.block_size) || self.n_blocks == 0 {
            return bad(format!(
                "a pool needs blocks of 1 to 1024 positions and at least one block, not {} of {}",
                self.n_blocks, self.block_size
            ));
        }
        Ok(())
    }
}

/// One request inside the engine.
struct Seq<'t> {
    /// Arrival number: the request's id, and its place in the queue.
    id: usize,
    /// Prompt, then every generated token: `(tokens)`.
    tokens: Vec<u32>,
    prompt_len: usize,
    max_tokens: usize,
    /// Its blocks, in position order.
    table: Vec<usize>,
    /// The keys of its full, computed blocks (`keys[i]` names `table[i]`).
    keys: Vec<BlockKey>,
    /// Positions whose K/V are in `table`.
    computed: usize,
    running: bool,
    sampler: Sampler,
    decoder: StreamDecoder<'t>,
    matcher: StopMatcher,
    ignore_eos: bool,
    keep_logits: bool,
    cached_tokens: Option<usize>,
    preemptions: usize,
    tx: Sender<Event>,
}

/// Many requests, one model.
pub struct BatchEngine<'m> {
    engine: Engine<'m>,
    tokenizer: &'m Tokenizer,
    end_ids: Vec<u32>,
    cfg: Config,
    kv: KvBlocks,
    pool: BlockPool,
    prefix: PrefixIndex,
    /// Running and waiting requests, oldest first.
    seqs: Vec<Seq<'m>>,
    next_id: usize,
}

impl<'m> BatchEngine<'m> {
    pub fn new(
        engine: Engine<'m>,
        tokenizer: &'m Tokenizer,
        cfg: Config,
    ) -> Result<BatchEngine<'m>, Error> {
        cfg.check()?;
        let end_ids = engine.model.config.eos_token_ids.clone();
        Ok(BatchEngine {
            kv: KvBlocks::new(engine.layout(), cfg.block_size, cfg.n_blocks),
            pool: BlockPool::new(cfg.n_blocks),
            prefix: PrefixIndex::default(),
            engine,
            tokenizer,
            end_ids,
            cfg,
            seqs: Vec::new(),
            next_id: 0,
        })
    }

    // ANCHOR: submit
    /// Queues `req`; its events arrive on the receiver. Refused here, never after it has
    /// run, when it could not fit the context or the whole pool.
    pub fn submit(&mut self, req: Request) -> Result<(usize, Receiver<Event>), Error> {
        let (prompt, max_tokens) = (req.prompt.len(), req.max_tokens);
        let context = self.engine.model.max_positions();
        if prompt == 0 {
            return Err(Error::EmptyPrompt);
        }
        if max_tokens == 0 {
            return Err(Error::ZeroMaxTokens);
        }
        if prompt.saturating_add(max_tokens) > context {
            return Err(Error::ContextTooSmall {
                prompt,
                max_tokens,
                context,
            });
        }
        let blocks_needed = (prompt + max_tokens).div_ceil(self.cfg.block_size);
        if blocks_needed > self.cfg.n_blocks {
            return Err(Error::PoolTooSmall {
                prompt,
                max_tokens,
                blocks_needed,
                pool_blocks: self.cfg.n_blocks,
                block_size: self.cfg.block_size,
            });
        }
        if let Some(&bad) = req
            .prompt
            .iter()
            .find(|&&t| t as usize >= self.engine.model.config.vocab_size)
        {
            return Err(Error::Model(format!(
                "token id {bad} is outside the vocabulary"
            )));
        }
        // ANCHOR_END: submit
        let (tx, rx) = channel();
        let id = self.next_id;
        self.next_id += 1;
        self.seqs.push(Seq {
            id,
            tokens: req.prompt,
            prompt_len: prompt,
            max_tokens,
            table: Vec::new(),
            keys: Vec::new(),
            computed: 0,
            running: false,
            sampler: Sampler::new(req.sampling),
            decoder: StreamDecoder::new(self.tokenizer),
            matcher: StopMatcher::new(&req.stops),
            ignore_eos: req.ignore_eos,
            keep_logits: req.keep_logits,
            cached_tokens: None,
            preemptions: 0,
            tx,
        });
        Ok((id, rx))
    }

    /// Ends request `id` now: its blocks go back to the pool before this returns.
    pub fn cancel(&mut self, id: usize) -> Result<(), Error> {
        let at = self
            .seqs
            .iter()
            .position(|s| s.id == id)
            .ok_or(Error::UnknownRequest(id))?;
        self.finish(at, FinishReason::Cancelled);
        Ok(())
    }

    /// Requests running or waiting.
    pub fn pending(&self) -> usize {
        self.seqs.len()
    }

    /// Free blocks in the pool (cached prefix blocks nobody holds count as free).
    pub fn free_blocks(&self) -> usize {
        self.pool.n_free()
    }

    pub fn config(&self) -> Config {
        self.cfg
    }

    /// The cached blocks `s` would start from: `(tokens computed, blocks taken for free)`.
    fn cached_prefix(&self, s: &Seq) -> (usize, Vec<(usize, BlockKey)>) {
        if !self.cfg.prefix_sharing {
            return (0, Vec::new());
        }
        let mut found = self.prefix.lookup(&s.tokens, self.cfg.block_size);
        // the last token is always run again: its logits are not cached
        let computed = (found.len() * self.cfg.block_size).min(s.tokens.len() - 1);
        found.truncate(computed.div_ceil(self.cfg.block_size));
        (computed, found)
    }

    /// What the scheduler sees of `s`.
    fn state(&self, s: &Seq) -> SeqState {
        let (computed, blocks) = if s.running {
            (s.computed, s.table.len())
        } else {
            let (computed, found) = self.cached_prefix(s);
            let mut free = found.iter().filter(|(b, _)| self.pool.refs(*b) > 0).count();
            // a shared last block that will be written is copied: it costs a new block
            if computed % self.cfg.block_size != 0
                && found.last().is_some_and(|(b, _)| self.pool.refs(*b) > 0)
            {
                free -= 1;
            }
            (computed, free)
        };
        SeqState {
            id: s.id,
            running: s.running,
            tokens: s.tokens.len(),
            computed,
            blocks,
            freeable: s.table.iter().filter(|&&b| self.pool.refs(b) == 1).count(),
        }
    }

    // ANCHOR: step
    /// Advances every request by one batch; returns the plan it ran.
    pub fn step(&mut self) -> Result<Plan, Error> {
        let states: Vec<SeqState> = self.seqs.iter().map(|s| self.state(s)).collect();
        let limits = Limits {
            block_size: self.cfg.block_size,
            free_blocks: self.pool.n_free(),
            max_batch_tokens: self.cfg.max_batch_tokens,
            max_seqs: self.cfg.max_seqs,
        };
        let plan = plan(&states, limits);
        for &id in &plan.preempted {
            self.preempt(id);
        }
        for &id in &plan.admitted {
            self.admit(id);
        }
        // blocks for every row (a chunk that finds none left is put off to a later step)
        let mut chunks = Vec::new();
        for c in &plan.rows {
            let at = self.index(c.id);
            if self.make_room(at, c.start, c.len) {
                chunks.push((at, *c));
            }
        }
        let mut rows = Vec::new();
        for (i, (at, c)) in chunks.iter().enumerate() {
            let s = &self.seqs[*at];
            for pos in c.start..c.start + c.len {
                let logits = pos + 1 == s.tokens.len();
                rows.push(Row {
                    seq: i,
                    token: s.tokens[pos],
                    pos,
                    logits,
                });
            }
        }
        if rows.is_empty() {
            return Ok(plan);
        }
        let tables: Vec<&[usize]> = chunks
            .iter()
            .map(|(at, _)| &self.seqs[*at].table[..])
            .collect();
        let logits =
            forward_batch(&self.engine, &mut self.kv, &tables, &rows).map_err(Error::Model)?;
        let vocab = self.engine.model.config.vocab_size;
        let mut next = logits.chunks_exact(vocab);
        let mut done = Vec::new();
        for (at, c) in &chunks {
            self.computed(*at, c.start + c.len);
            if c.start + c.len == self.seqs[*at].tokens.len() {
                let row = next
                    .next()
                    .expect("one row of logits per sequence at its end");
                if let Some(reason) = self.sample(*at, row) {
                    done.push((self.seqs[*at].id, reason));
                }
            }
        }
        for (id, reason) in done {
            let at = self.index(id);
            self.finish(at, reason);
        }
        Ok(plan)
    }
    // ANCHOR_END: step

    fn index(&self, id: usize) -> usize {
        self.seqs
            .iter()
            .position(|s| s.id == id)
            .expect("the plan names known requests")
    }

    /// Gives all of `seq`'s blocks back (indexed ones stay findable until reused).
    fn release_all(&mut self, at: usize) {
        for b in std::mem::take(&mut self.seqs[at].table) {
            self.pool.release(b);
        }
        self.seqs[at].keys.clear();
        self.seqs[at].computed = 0;
    }

    fn preempt(&mut self, id: usize) {
        let at = self.index(id);
        self.release_all(at);
        let s = &mut self.seqs[at];
        s.running = false;
        s.preemptions += 1;
    }

    /// Admits a waiting request, sharing the cached blocks of its prefix.
    fn admit(&mut self, id: usize) {
        let at = self.index(id);
        let (computed, found) = self.cached_prefix(&self.seqs[at]);
        for &(b, _) in &found {
            self.pool.retain(b);
        }
        let s = &mut self.seqs[at];
        s.table = found.iter().map(|&(b, _)| b).collect();
        s.keys = found
            .iter()
            .map(|&(_, k)| k)
            .take(computed / self.cfg.block_size)
            .collect();
        s.computed = computed;
        s.running = true;
        s.cached_tokens.get_or_insert(computed);
    }

    // ANCHOR: make_room
    /// Makes positions `start..start + len` of `seqs[at]` writable: new blocks at the end,
    /// and a copy of a block other sequences share before it is written into. False when
    /// the pool ran out.
    fn make_room(&mut self, at: usize, start: usize, len: usize) -> bool {
        let bs = self.cfg.block_size;
        let first = start / bs;
        if start % bs != 0 && first < self.seqs[at].table.len() {
            let b = self.seqs[at].table[first];
            if self.pool.refs(b) > 1 {
                let Some(copy) = self.alloc() else {
                    return false;
                };
                self.kv.copy_block(b, copy);
                self.pool.release(b);
                self.seqs[at].table[first] = copy;
            } else {
                self.prefix.forget(b); // ours alone now: it will change
            }
            self.seqs[at].keys.truncate(first);
        }
        while self.seqs[at].table.len() * bs < start + len {
            let Some(b) = self.alloc() else { return false };
            self.seqs[at].table.push(b);
        }
        true
    }
    // ANCHOR_END: make_room

    fn alloc(&mut self) -> Option<usize> {
        let b = self.pool.alloc()?;
        self.prefix.forget(b); // whatever it held before is gone
        Some(b)
    }

    /// `seqs[at]` has positions `0..computed`: index the blocks that became full.
    fn computed(&mut self, at: usize, computed: usize) {
        let bs = self.cfg.block_size;
        let s = &mut self.seqs[at];
        s.computed = computed;
        while s.keys.len() < computed / bs {
            let i = s.keys.len();
            let prev = s.keys.last().copied();
            let tokens = &s.tokens[i * bs..(i + 1) * bs];
            let key = if self.cfg.prefix_sharing {
                self.prefix.insert(prev, tokens, s.table[i])
            } else {
                block_key(prev, tokens)
            };
            s.keys.push(key);
        }
    }

    /// Samples `seqs[at]`'s next token from `logits` and sends it; the reason to stop, if any.
    fn sample(&mut self, at: usize, logits: &[f32]) -> Option<FinishReason> {
        let s = &mut self.seqs[at];
        let id = s.sampler.sample(logits, &s.tokens);
        s.tokens.push(id);
        let keep = s.keep_logits.then(|| logits.to_vec());
        if !s.ignore_eos && self.end_ids.contains(&id) {
            let _ = s.tx.send(Event::Token {
                id,
                text: String::new(),
                logits: keep,
            });
            return Some(FinishReason::Eos);
        }
        let piece = s.decoder.push(id).unwrap_or_default();
        let step = s.matcher.push(&piece);
        let sent = s.tx.send(Event::Token {
            id,
            text: step.text,
            logits: keep,
        });
        if step.stopped {
            Some(FinishReason::Stop)
        } else if sent.is_err() {
            Some(FinishReason::Cancelled) // nobody is listening
        } else if s.tokens.len() - s.prompt_len == s.max_tokens {
            Some(FinishReason::Length)
        } else {
            None
        }
    }

    /// Ends `seqs[at]`: the last event, and its blocks back to the pool.
    fn finish(&mut self, at: usize, reason: FinishReason) {
        self.release_all(at);
        let mut s = self.seqs.remove(at);
        let text = if reason == FinishReason::Stop {
            String::new()
        } else {
            s.matcher.finish()
        };
        let _ = s.tx.send(Event::Done(Finished {
            reason,
            text,
            prompt_tokens: s.prompt_len,
            cached_tokens: s.cached_tokens.unwrap_or(0),
            generated: s.tokens.len() - s.prompt_len,
            preemptions: s.preemptions,
        }));
    }
}
