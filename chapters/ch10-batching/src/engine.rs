//! The batched engine: requests in, a step at a time, tokens out.
//!
//! [`BatchEngine::submit`] checks a request and queues it; [`BatchEngine::step`] asks the
//! scheduler for a plan, applies it to the pool (preempt, admit with the prefix cache,
//! allocate, copy on write), runs the batch, samples each finished row with its own
//! sampler and sends the tokens; [`BatchEngine::cancel`] ends a request and returns its
//! blocks at once. One thread owns the engine; everything else talks to it through the
//! channels.

use std::sync::mpsc::{Receiver, Sender, channel};

use rayon::prelude::*;

use ch02_tokenizer::{StreamDecoder, Tokenizer};
use ch08_gguf::engine::Engine;
use ch09_generate::{Sampler, StopMatcher};

use crate::batch::{Row, forward_batch};
use crate::config::Config;
use crate::error::Error;
use crate::pool::BlockPool;
use crate::prefix::{BlockKey, PrefixIndex};
use crate::request::{Event, FinishReason, Finished, Request};
use crate::scheduler::{Limits, Plan, SeqState, plan};
use crate::seq::KvBlocks;
use crate::steer::Steer;

/// One request inside the engine.
pub(crate) struct Seq<'t> {
    /// Arrival number: the request's id, and its place in the queue.
    pub(crate) id: usize,
    /// Prompt, then every generated token: `(tokens)`.
    pub(crate) tokens: Vec<u32>,
    pub(crate) prompt_len: usize,
    pub(crate) max_tokens: usize,
    /// Its blocks, in position order.
    pub(crate) table: Vec<usize>,
    /// The keys of its full, computed blocks (`keys[i]` names `table[i]`).
    pub(crate) keys: Vec<BlockKey>,
    /// Positions whose K/V are in `table`.
    pub(crate) computed: usize,
    pub(crate) running: bool,
    pub(crate) sampler: Sampler,
    pub(crate) decoder: StreamDecoder<'t>,
    pub(crate) matcher: StopMatcher,
    pub(crate) ignore_eos: bool,
    pub(crate) keep_logits: bool,
    /// What narrows its next token, if anything (chapter 12).
    pub(crate) steer: Option<Box<dyn Steer>>,
    pub(crate) cached_tokens: Option<usize>,
    pub(crate) preemptions: usize,
    pub(crate) tx: Sender<Event>,
}

impl Seq<'_> {
    // ANCHOR: pick
    /// The next token after `logits`: the sampler's choice, narrowed by the steer if the
    /// request has one. Greedy first asks about the top token alone, which the grammar
    /// allows nearly always; only when it does not is the whole vocabulary masked.
    fn pick(&mut self, logits: &[f32]) -> u32 {
        let Some(steer) = self.steer.as_mut() else {
            return self.sampler.sample(logits, &self.tokens);
        };
        if self.sampler.is_greedy() {
            let top = self.sampler.sample(logits, &self.tokens);
            if steer.allows(top) {
                let id = steer.choose(top, logits);
                steer.accept(id);
                return id;
            }
        }
        let mut masked = logits.to_vec();
        steer.mask(&mut masked);
        let sampled = self.sampler.sample(&masked, &self.tokens);
        let id = steer.choose(sampled, &masked);
        steer.accept(id);
        id
    }
    // ANCHOR_END: pick
}

/// Many requests, one model.
pub struct BatchEngine<'m> {
    pub(crate) engine: Engine<'m>,
    pub(crate) tokenizer: &'m Tokenizer,
    pub(crate) end_ids: Vec<u32>,
    pub(crate) cfg: Config,
    pub(crate) kv: KvBlocks,
    pub(crate) pool: BlockPool,
    pub(crate) prefix: PrefixIndex,
    /// Running and waiting requests, oldest first.
    pub(crate) seqs: Vec<Seq<'m>>,
    pub(crate) next_id: usize,
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
            kv: KvBlocks::new(
                engine.layout(),
                cfg.block_size,
                cfg.n_blocks,
                cfg.kv_precision,
            ),
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
        self.submit_steered(req, None)
    }

    /// [`BatchEngine::submit`], with `steer` deciding around each sampling which tokens
    /// the request may take.
    pub fn submit_steered(
        &mut self,
        req: Request,
        steer: Option<Box<dyn Steer>>,
    ) -> Result<(usize, Receiver<Event>), Error> {
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
            steer,
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

    /// Requests admitted to the batch (the rest of [`BatchEngine::pending`] waits).
    pub fn running(&self) -> usize {
        self.seqs.iter().filter(|s| s.running).count()
    }

    /// Free blocks in the pool (cached prefix blocks nobody holds count as free).
    pub fn free_blocks(&self) -> usize {
        self.pool.n_free()
    }

    pub fn config(&self) -> Config {
        self.cfg
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
        // ANCHOR_END: step
        // ANCHOR: sample_rows
        // each sequence at its end of the step draws from its own row, on the threads
        let vocab = self.engine.model.config.vocab_size;
        let mut row_of: Vec<Option<usize>> = vec![None; self.seqs.len()];
        let mut n = 0;
        for (at, c) in &chunks {
            self.computed(*at, c.start + c.len);
            if c.start + c.len == self.seqs[*at].tokens.len() {
                (row_of[*at], n) = (Some(n), n + 1);
            }
        }
        let row = |r: usize| &logits[r * vocab..(r + 1) * vocab];
        let picks: Vec<Option<u32>> = self
            .seqs
            .par_iter_mut()
            .zip(&row_of)
            .map(|(s, r)| r.map(|r| s.pick(row(r))))
            .collect();
        let mut done = Vec::new();
        for (at, id) in picks.iter().enumerate() {
            if let (Some(id), Some(r)) = (*id, row_of[at])
                && let Some(reason) = self.emit(at, id, row(r))
            {
                done.push((self.seqs[at].id, reason));
            }
        }
        for (id, reason) in done {
            let at = self.index(id);
            self.finish(at, reason);
        }
        Ok(plan)
    }
    // ANCHOR_END: sample_rows

    pub(crate) fn index(&self, id: usize) -> usize {
        self.seqs
            .iter()
            .position(|s| s.id == id)
            .expect("the plan names known requests")
    }

    /// Appends token `id` (drawn from `logits`) to `seqs[at]` and sends it; the reason to
    /// stop, if any.
    fn emit(&mut self, at: usize, id: u32, logits: &[f32]) -> Option<FinishReason> {
        let s = &mut self.seqs[at];
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
