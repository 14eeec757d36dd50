//! A decode step and a prefill on the GPU, one submission each. Everything is made once,
//! when the [`Decoder`] is: the pipelines, every activation buffer, the KV cache, and one
//! bound [`Op`] for each dispatch of the two passes (`pass.rs`). A token then costs:
//! writing its id, its position and each RoPE base's cos and sin into the small step
//! buffers (`queue.write_buffer`), recording the decode pass's ops into one compute pass of
//! one command encoder, one submit, and reading back 4 bytes (the argmax), or the logits
//! where the caller samples. Greedy tokens run with two steps in flight
//! ([`Decoder::greedy`]): each step's argmax is copied into the next step's token on the
//! GPU, so the host records and submits a step while the GPU runs the one before. A prompt
//! costs one submission for each piece of up to [`Decoder::chunk`] tokens, its products the
//! tiled shader's: each weight read once for the piece's tokens, where decode steps would
//! read it once a token.

pub use crate::bind::{Op, Shaders};
pub use crate::pass::Activations;

use crate::bind::Builder;
use crate::gpu::{Error, Gpu, Result};
use crate::model::GpuModel;
use crate::pass::{self, Shared};

/// The most tokens a prefill submission takes, unless the caller asks for fewer
/// ([`Decoder::with_chunk`]).
pub const CHUNK: usize = 256;

/// A model ready to decode on the GPU: its ops recorded anew for each submission, its KV
/// cache holding `capacity` positions.
pub struct Decoder<'g> {
    gpu: &'g Gpu,
    model: &'g GpuModel,
    ops: Vec<Op>,     // a decode step: one token
    prefill: Vec<Op>, // a prompt's piece: up to `chunk` tokens (empty when chunk is 1)
    shared: Shared,
    /// Where each step's argmax is copied to be read back: two, for two steps in flight.
    read_best: [wgpu::Buffer; 2],
    read_logits: wgpu::Buffer,
    pub capacity: usize,
    /// Tokens a prefill submission takes at most.
    pub chunk: usize,
    /// The decode pass's buffers.
    pub acts: Activations,
}

impl<'g> Decoder<'g> {
    // ANCHOR: build
    /// Binds every dispatch of a decode step and of a prefill for `model`, with a KV cache
    /// of `capacity` positions (at most the model's) and prefills of up to [`CHUNK`] tokens.
    pub fn new(
        gpu: &'g Gpu,
        shaders: &Shaders,
        model: &'g GpuModel,
        capacity: usize,
    ) -> Result<Decoder<'g>> {
        let chunk = (largest_binding(gpu) / scores_per_token(model, capacity)).min(CHUNK);
        Decoder::with_chunk(
            gpu,
            shaders,
            model,
            capacity,
            chunk.clamp(1, capacity.max(1)),
        )
    }

    /// [`Decoder::new`] with prefills of up to `chunk` tokens (1: a prompt runs as decode
    /// steps).
    pub fn with_chunk(
        gpu: &'g Gpu,
        shaders: &Shaders,
        model: &'g GpuModel,
        capacity: usize,
        chunk: usize,
    ) -> Result<Decoder<'g>> {
        let s = model.shape;
        if capacity == 0 || capacity > model.max_pos {
            return Err(Error::Input(format!(
                "a cache of {capacity} positions: the model runs 1 to {}",
                model.max_pos
            )));
        }
        if chunk == 0 || chunk > capacity {
            return Err(Error::Input(format!(
                "prefills of {chunk} tokens: a cache of {capacity} positions takes 1 to {capacity}"
            )));
        }
        let scores = chunk.saturating_mul(scores_per_token(model, capacity));
        if scores > largest_binding(gpu) {
            return Err(Error::Input(format!(
                "prefills of {chunk} tokens with a cache of {capacity} positions: attention's \
                 scores take {scores} bytes, past this GPU's largest binding ({})",
                largest_binding(gpu)
            )));
        }
        let mut b = Builder {
            gpu,
            shaders,
            ops: Vec::new(),
        };
        let shared = Shared::new(&b, model, capacity, chunk);
        let acts = pass::build(&mut b, model, &shared, capacity, 1)?;
        let ops = std::mem::take(&mut b.ops);
        if chunk > 1 {
            pass::build(&mut b, model, &shared, capacity, chunk)?;
        }
        let read = |label: &str, bytes: usize| {
            gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: bytes as u64,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        };
        Ok(Decoder {
            gpu,
            model,
            ops,
            prefill: b.ops,
            shared,
            read_best: [read("read best", 4), read("read best", 4)],
            read_logits: read("read logits", s.vocab * 4),
            capacity,
            chunk,
            acts,
        })
    }
    // ANCHOR_END: build

    /// Each layer's cache, `(K, V)`, `(capacity, kv_dim)` f32 each: for tests that look
    /// inside a step (a decode step's keys are turned only as attention reads them).
    pub fn caches(&self) -> &[(wgpu::Buffer, wgpu::Buffer)] {
        &self.shared.caches
    }

    /// Dispatches one token costs.
    pub fn dispatches(&self) -> usize {
        self.ops.len()
    }

    // ANCHOR: step
    /// Runs `token` at `pos` through the model, one submission: the next token by greedy
    /// argmax, and with `want_logits` the logits too.
    pub fn step(
        &self,
        token: u32,
        pos: usize,
        want_logits: bool,
    ) -> Result<(u32, Option<Vec<f32>>)> {
        self.check(&[token], pos)?;
        self.write_step(&[token], pos);
        self.submit(&self.ops, 1, pos, want_logits)
    }
    // ANCHOR_END: step

    // ANCHOR: greedy
    /// Up to `n` greedy tokens after `first` at `pos` (fewer where the cache ends), with two
    /// steps in flight: each step's argmax is copied on the GPU into the next step's token,
    /// so step k + 1 is recorded and submitted before step k's token is read back. The host
    /// records while the GPU runs, and the GPU finds its next step waiting. `on_token` hears
    /// each token in order and returns false to stop; the step already queued then runs
    /// and its token is dropped (it wrote its position's key and value, which the next step
    /// at that position writes again). Returns how many tokens `on_token` heard.
    pub fn greedy(
        &self,
        first: u32,
        pos: usize,
        n: usize,
        on_token: &mut dyn FnMut(u32) -> bool,
    ) -> Result<usize> {
        self.check(&[first], pos)?;
        let n = n.min(self.capacity - pos);
        if n == 0 {
            return Ok(0);
        }
        self.write_ids(&[first]);
        let mut running = self.queue_step(pos, false, 0)?;
        for k in 0..n {
            let next = (k + 1 < n)
                .then(|| self.queue_step(pos + k + 1, true, (k + 1) % 2))
                .transpose()?;
            let token = self.read_best_after(k % 2, Some(running), pos + k)?;
            let go_on = on_token(token);
            match next {
                Some(queued) if go_on => running = queued,
                _ => return Ok(k + 1),
            }
        }
        Ok(n)
    }

    /// Submits the decode step at `pos` into read-back slot `slot`, its token already in
    /// the ids buffer or, `chained`, the step before's argmax.
    fn queue_step(&self, pos: usize, chained: bool, slot: usize) -> Result<wgpu::SubmissionIndex> {
        self.write_positions(pos, 1);
        let mut encoder = self.gpu.device.create_command_encoder(&Default::default());
        if chained {
            encoder.copy_buffer_to_buffer(&self.shared.best, 0, &self.shared.ids, 0, 4);
        }
        self.record_step(&mut encoder);
        encoder.copy_buffer_to_buffer(&self.shared.best, 0, &self.read_best[slot], 0, 4);
        self.gpu.checked("a decode step", || {
            self.gpu.queue.submit([encoder.finish()])
        })
    }
    // ANCHOR_END: greedy

    /// A decode step's dispatches, recorded into one compute pass of `encoder`.
    fn record_step(&self, encoder: &mut wgpu::CommandEncoder) {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        for op in &self.ops {
            op.record(&mut pass);
        }
    }

    /// The host's side of a decode step alone: recording its dispatches into a command
    /// buffer as [`Decoder::greedy`] does, `times` times, never submitted (`ch13-gpu
    /// bench`: what two steps in flight hide). Seconds a step.
    pub fn record_seconds(&self, times: usize) -> f64 {
        let start = std::time::Instant::now();
        for _ in 0..times {
            let mut encoder = self.gpu.device.create_command_encoder(&Default::default());
            self.record_step(&mut encoder);
            drop(encoder.finish());
        }
        start.elapsed().as_secs_f64() / times.max(1) as f64
    }

    // ANCHOR: prefill
    /// Runs `tokens`, at positions `pos..`, through the model: one submission for each
    /// piece of up to [`Decoder::chunk`] tokens. The next token after the last by greedy
    /// argmax, and with `want_logits` the last token's logits.
    pub fn prefill(
        &self,
        tokens: &[u32],
        pos: usize,
        want_logits: bool,
    ) -> Result<(u32, Option<Vec<f32>>)> {
        self.check(tokens, pos)?;
        let pieces = tokens.len().div_ceil(self.chunk);
        let mut last = (0, None);
        for (i, piece) in tokens.chunks(self.chunk).enumerate() {
            let at = pos + i * self.chunk;
            let ops = match piece.len() {
                1 => &self.ops,
                _ => &self.prefill,
            };
            self.write_step(piece, at);
            last = self.submit(ops, piece.len(), at, want_logits && i + 1 == pieces)?;
        }
        Ok(last)
    }
    // ANCHOR_END: prefill

    /// `tokens` at `pos..` fit the vocabulary and the cache, and there is at least one.
    fn check(&self, tokens: &[u32], pos: usize) -> Result<()> {
        let vocab = self.model.shape.vocab;
        if let Some(t) = tokens.iter().find(|&&t| t as usize >= vocab) {
            return Err(Error::Input(format!(
                "token {t} is past the vocabulary ({vocab})"
            )));
        }
        match pos.checked_add(tokens.len()) {
            _ if tokens.is_empty() => Err(Error::Input("no tokens to run".into())),
            Some(end) if end <= self.capacity => Ok(()),
            _ => Err(Error::Input(format!(
                "{} tokens from position {pos} go past the cache's {}",
                tokens.len(),
                self.capacity
            ))),
        }
    }

    // ANCHOR: submit
    /// Records `ops` for `tokens` tokens into one compute pass, submits it, and reads back
    /// the argmax (and the logits).
    fn submit(
        &self,
        ops: &[Op],
        tokens: usize,
        pos: usize,
        want_logits: bool,
    ) -> Result<(u32, Option<Vec<f32>>)> {
        let vocab = self.model.shape.vocab;
        let mut encoder = self.gpu.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            for op in ops {
                op.record_tokens(&mut pass, tokens);
            }
        }
        encoder.copy_buffer_to_buffer(&self.shared.best, 0, &self.read_best[0], 0, 4);
        if want_logits {
            let bytes = vocab as u64 * 4;
            encoder.copy_buffer_to_buffer(&self.shared.logits, 0, &self.read_logits, 0, bytes);
        }
        self.gpu.checked("the decode step", || {
            self.gpu.queue.submit([encoder.finish()])
        })?;
        // ANCHOR_END: submit
        let best = self.read_best(pos)?;
        let logits = match want_logits {
            true => Some(
                self.gpu
                    .map_words(&self.read_logits)?
                    .into_iter()
                    .map(f32::from_bits)
                    .collect(),
            ),
            false => None,
        };
        Ok((best, logits))
    }

    /// The step's small buffers: [`Decoder::write_positions`] and the ids.
    fn write_step(&self, tokens: &[u32], pos: usize) {
        self.write_positions(pos, tokens.len());
        self.write_ids(tokens);
    }

    /// The first position, the token count, the RoPE tables' count, a word of padding, then
    /// each token's cos and sin for each table. Written in the queue's order: a step
    /// already submitted still reads the words written before it.
    fn write_positions(&self, pos: usize, tokens: usize) {
        let ropes = &self.model.ropes;
        let mut words = vec![pos as u32, tokens as u32, ropes.len() as u32, 0];
        for at in pos..pos + tokens {
            for rope in ropes {
                words.extend(rope.at(at).iter().map(|v| v.to_bits()));
            }
        }
        self.gpu
            .queue
            .write_buffer(&self.shared.step, 0, &le_bytes(&words));
    }

    fn write_ids(&self, tokens: &[u32]) {
        self.gpu
            .queue
            .write_buffer(&self.shared.ids, 0, &le_bytes(tokens));
    }

    /// [`Decoder::step`]'s greedy token, with the GPU's clock read before each dispatch and
    /// after the last (`ch13-gpu bench --profile`): the token, and each dispatch's
    /// nanoseconds, in the order of `Decoder::ops` (to the next one's start: its own time
    /// and the wait before the next may start).
    pub fn step_timed(&self, token: u32, pos: usize) -> Result<(u32, Vec<f64>)> {
        if !self.gpu.found.timestamps {
            return Err(Error::Input(format!(
                "{} cannot time dispatches inside a pass (no timestamp queries there)",
                self.gpu.info.name
            )));
        }
        let n = self.ops.len() + 1;
        if n > wgpu::QUERY_SET_MAX_QUERIES as usize {
            return Err(Error::Input(format!(
                "{n} timestamps: more than a query set holds"
            )));
        }
        self.check(&[token], pos)?;
        self.write_step(&[token], pos);
        let device = &self.gpu.device;
        let queries = device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("a step's timestamps"),
            ty: wgpu::QueryType::Timestamp,
            count: n as u32,
        });
        let bytes = (n * 8) as u64;
        let buffer = |usage| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("timestamps"),
                size: bytes,
                usage,
                mapped_at_creation: false,
            })
        };
        let resolved = buffer(wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC);
        let read = buffer(wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST);
        let mut encoder = device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            for (i, op) in self.ops.iter().enumerate() {
                pass.write_timestamp(&queries, i as u32);
                op.record(&mut pass);
            }
            pass.write_timestamp(&queries, (n - 1) as u32);
        }
        encoder.resolve_query_set(&queries, 0..n as u32, &resolved, 0);
        encoder.copy_buffer_to_buffer(&resolved, 0, &read, 0, bytes);
        encoder.copy_buffer_to_buffer(&self.shared.best, 0, &self.read_best[0], 0, 4);
        self.gpu.checked("a timed decode step", || {
            self.gpu.queue.submit([encoder.finish()])
        })?;
        let words = self.gpu.map_words(&read)?;
        let ticks: Vec<u64> = words
            .chunks_exact(2)
            .map(|w| u64::from(w[0]) | u64::from(w[1]) << 32)
            .collect();
        let period = f64::from(self.gpu.queue.get_timestamp_period()); // ns a tick
        let ns = ticks
            .windows(2)
            .map(|t| t[1].saturating_sub(t[0]) as f64 * period)
            .collect();
        Ok((self.read_best(pos)?, ns))
    }

    /// The argmax a submission copied out, once the GPU is done; an error where it is no
    /// token (the shader found no largest logit: NaNs).
    fn read_best(&self, pos: usize) -> Result<u32> {
        self.read_best_after(0, None, pos)
    }

    /// [`Decoder::read_best`] from read-back slot `slot`, once the submission `index` has
    /// run (everything so far where `None`).
    fn read_best_after(
        &self,
        slot: usize,
        index: Option<wgpu::SubmissionIndex>,
        pos: usize,
    ) -> Result<u32> {
        let best = self.gpu.map_words_after(&self.read_best[slot], index)?[0];
        if best as usize >= self.model.shape.vocab {
            return Err(Error::Gpu(format!(
                "the argmax found no largest logit (NaN logits?) at position {pos}"
            )));
        }
        Ok(best)
    }

    /// What each of a decode step's dispatches is, in order (`Op::what`): a profile's rows.
    pub fn op_names(&self) -> Vec<String> {
        self.ops.iter().map(Op::what).collect()
    }

    /// [`Decoder::step`]'s greedy token with every dispatch submitted on its own (a command
    /// encoder, a pass and a submit each): what the one-submission design saves, measured
    /// by `ch13-gpu bench --per-dispatch`.
    pub fn step_per_dispatch(&self, token: u32, pos: usize) -> Result<u32> {
        self.check(&[token], pos)?;
        self.write_step(&[token], pos);
        for op in &self.ops {
            let mut encoder = self.gpu.device.create_command_encoder(&Default::default());
            {
                let mut pass = encoder.begin_compute_pass(&Default::default());
                op.record(&mut pass);
            }
            self.gpu.queue.submit([encoder.finish()]);
        }
        let mut encoder = self.gpu.device.create_command_encoder(&Default::default());
        encoder.copy_buffer_to_buffer(&self.shared.best, 0, &self.read_best[0], 0, 4);
        self.gpu.queue.submit([encoder.finish()]);
        self.read_best(pos)
    }
}

fn le_bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// Bytes of attention's scores a token of a prefill takes: `(n_heads, capacity)` f32.
fn scores_per_token(model: &GpuModel, capacity: usize) -> usize {
    model
        .shape
        .n_heads
        .saturating_mul(capacity)
        .saturating_mul(4)
        .max(1)
}

/// The largest buffer a shader can bind on this GPU, in bytes.
fn largest_binding(gpu: &Gpu) -> usize {
    usize::try_from(gpu.largest_binding()).unwrap_or(usize::MAX)
}
