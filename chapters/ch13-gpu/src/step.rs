//! A decode step on the GPU, one submission a token. Everything is made once, when the
//! [`Decoder`] is: the pipelines, every activation buffer, the KV cache, and one bound
//! [`Op`] for each dispatch of the step, in order. A token then costs: writing its id, its
//! position and RoPE's cos and sin into the small step buffer (`queue.write_buffer`),
//! recording the ops into one compute pass of one command encoder, one submit, and reading
//! back 4 bytes (the argmax), or the logits where the caller samples.
//!
//! A prompt is run as decode steps, one token at a time (a tiled prefill is later work).

pub use crate::bind::{Op, Shaders};

use crate::bind::Builder;
use crate::gpu::{Error, Gpu, Result};
use crate::model::GpuModel;
use crate::ops::groups_of_64;

/// The step's activation buffers, kept for tests that look inside a step.
pub struct Activations {
    pub x: wgpu::Buffer,     // (dim): the residual stream
    pub xn: wgpu::Buffer,    // (dim): the last norm's output
    pub q: wgpu::Buffer,     // (n_heads * head_dim)
    pub k: wgpu::Buffer,     // (n_kv_heads * head_dim)
    pub v: wgpu::Buffer,     // (n_kv_heads * head_dim)
    pub heads: wgpu::Buffer, // (n_heads * head_dim): attention's output
    pub o: wgpu::Buffer,     // (dim): the last block's output
    pub gate: wgpu::Buffer,  // (ffn): SiLU(gate) · up after a layer's feed-forward
}

/// A model ready to decode on the GPU: its ops recorded anew for each token, its KV cache
/// holding `capacity` positions.
pub struct Decoder<'g> {
    gpu: &'g Gpu,
    model: &'g GpuModel,
    ops: Vec<Op>,
    step: wgpu::Buffer,   // token, pos, 2 words of padding, then cos and sin
    logits: wgpu::Buffer, // (vocab)
    best: wgpu::Buffer,   // (1) u32
    read_best: wgpu::Buffer,
    read_logits: wgpu::Buffer,
    pub capacity: usize,
    pub acts: Activations,
}

impl<'g> Decoder<'g> {
    // ANCHOR: build
    /// Binds every dispatch of a step for `model`, with a KV cache of `capacity` positions
    /// (at most the model's).
    pub fn new(
        gpu: &'g Gpu,
        shaders: &Shaders,
        model: &'g GpuModel,
        capacity: usize,
    ) -> Result<Decoder<'g>> {
        let s = model.shape;
        if capacity == 0 || capacity > model.rope.max_pos {
            return Err(Error::Input(format!(
                "a cache of {capacity} positions: the model runs 1 to {}",
                model.rope.max_pos
            )));
        }
        let mut b = Builder {
            gpu,
            shaders,
            ops: Vec::new(),
        };
        let (dim, q_dim, kv_dim, ffn) = (s.dim, s.q_dim(), s.kv_dim(), s.ffn);
        let trig = s.head_dim; // cos and sin of head_dim / 2 pairs
        let step = gpu.storage("step", 16 + trig * 4, wgpu::BufferUsages::COPY_DST);
        let x = b.f32s("x", dim); //          (dim): the residual stream
        let xn = b.f32s("xn", dim); //        (dim): normed
        let q = b.f32s("q", q_dim); //        (n_heads * head_dim)
        let k = b.f32s("k", kv_dim); //       (n_kv_heads * head_dim)
        let v = b.f32s("v", kv_dim); //       (n_kv_heads * head_dim)
        let heads = b.f32s("heads", q_dim); // (n_heads * head_dim): attention's output
        let o = b.f32s("o", dim); //          (dim): a block's output
        let gate = b.f32s("gate", ffn); //    (ffn)
        let up = b.f32s("up", ffn); //        (ffn)
        let scores = b.f32s("scores", s.n_heads * capacity); // (n_heads, capacity)
        let logits = b.f32s("logits", s.vocab); // (vocab)
        let best = b.f32s("best", 1); //       (1) u32
        let u = |n: usize| {
            u32::try_from(n).map_err(|_| Error::Input(format!("{n} does not fit a u32")))
        };
        let e = model.embed_format();
        b.shader(
            &shaders.ops.embed,
            &[&model.embed.buffer, &step, &x],
            &[u(s.vocab)?, u(dim)?, e, 0],
            groups_of_64(dim),
        )?;
        let heads_params = [u(s.n_heads)?, u(s.n_kv_heads)?, u(s.head_dim)?];
        for layer in &model.layers {
            // attention
            b.norm(&x, &layer.attn_norm, &xn, dim, s.eps)?;
            let mut input = b.input(&xn, dim);
            b.product(&layer.wq, &mut input, &q)?;
            b.product(&layer.wk, &mut input, &k)?;
            b.product(&layer.wv, &mut input, &v)?;
            let pairs = (s.n_heads + s.n_kv_heads) * s.head_dim / 2;
            b.shader(
                &shaders.ops.rope,
                &[&step, &q, &k],
                &[heads_params[0], heads_params[1], heads_params[2], 1],
                groups_of_64(pairs),
            )?;
            let cache_floats = capacity * kv_dim;
            let k_cache = b.f32s("k_cache", cache_floats); // (capacity, n_kv_heads, head_dim)
            let v_cache = b.f32s("v_cache", cache_floats); // (capacity, n_kv_heads, head_dim)
            let params = [
                heads_params[0],
                heads_params[1],
                heads_params[2],
                u(capacity)?,
                s.scale.to_bits(),
                0,
                0,
                0,
            ];
            b.shader(
                &shaders.ops.attention,
                &[&step, &q, &k, &v, &k_cache, &v_cache, &heads, &scores],
                &params,
                s.n_heads,
            )?;
            let mut input = b.input(&heads, q_dim);
            b.product(&layer.wo, &mut input, &o)?;
            b.shader(
                &shaders.ops.add,
                &[&x, &o],
                &[u(dim)?, 0, 0, 0],
                groups_of_64(dim),
            )?;
            // ANCHOR: ffn
            // feed-forward
            b.norm(&x, &layer.ffn_norm, &xn, dim, s.eps)?;
            let mut input = b.input(&xn, dim);
            b.product(&layer.w_gate, &mut input, &gate)?;
            b.product(&layer.w_up, &mut input, &up)?;
            b.shader(
                &shaders.ops.swiglu,
                &[&gate, &up],
                &[u(ffn)?, 0, 0, 0],
                groups_of_64(ffn),
            )?;
            let mut input = b.input(&gate, ffn);
            b.product(&layer.w_down, &mut input, &o)?;
            b.shader(
                &shaders.ops.add,
                &[&x, &o],
                &[u(dim)?, 0, 0, 0],
                groups_of_64(dim),
            )?;
            // ANCHOR_END: ffn
        }
        b.norm(&x, &model.final_norm, &xn, dim, s.eps)?;
        let mut input = b.input(&xn, dim);
        b.product(model.lm_head(), &mut input, &logits)?;
        b.shader(
            &shaders.ops.argmax,
            &[&logits, &best],
            &[u(s.vocab)?, 0, 0, 0],
            1,
        )?;
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
            ops: b.ops,
            step,
            logits,
            best,
            read_best: read("read best", 4),
            read_logits: read("read logits", s.vocab * 4),
            capacity,
            acts: Activations {
                x,
                xn,
                q,
                k,
                v,
                heads,
                o,
                gate,
            },
        })
    }
    // ANCHOR_END: build

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
        let s = self.model.shape;
        if token as usize >= s.vocab {
            return Err(Error::Input(format!(
                "token {token} is past the vocabulary ({})",
                s.vocab
            )));
        }
        if pos >= self.capacity {
            return Err(Error::Input(format!(
                "position {pos} is past the cache's {}",
                self.capacity
            )));
        }
        // ANCHOR: submit
        self.write_step(token, pos);
        let mut encoder = self.gpu.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            for op in &self.ops {
                op.record(&mut pass);
            }
        }
        encoder.copy_buffer_to_buffer(&self.best, 0, &self.read_best, 0, 4);
        if want_logits {
            encoder.copy_buffer_to_buffer(
                &self.logits,
                0,
                &self.read_logits,
                0,
                s.vocab as u64 * 4,
            );
        }
        self.gpu.checked("the decode step", || {
            self.gpu.queue.submit([encoder.finish()])
        })?;
        // ANCHOR_END: submit
        let best = self.gpu.map_words(&self.read_best)?[0];
        if best as usize >= s.vocab {
            return Err(Error::Gpu(format!(
                "the argmax found no largest logit (NaN logits?) at position {pos}"
            )));
        }
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
    // ANCHOR_END: step

    /// The step's small buffer: the token, its position, and RoPE's cos and sin there.
    fn write_step(&self, token: u32, pos: usize) {
        let mut words = vec![token, pos as u32, 0, 0];
        words.extend(self.model.rope.at(pos).iter().map(|v| v.to_bits()));
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        self.gpu.queue.write_buffer(&self.step, 0, &bytes);
    }

    /// [`Decoder::step`]'s greedy token with every dispatch submitted on its own (a command
    /// encoder, a pass and a submit each): what the one-submission design saves, measured
    /// by `ch13-gpu bench --per-dispatch`.
    pub fn step_per_dispatch(&self, token: u32, pos: usize) -> Result<u32> {
        let s = self.model.shape;
        if token as usize >= s.vocab || pos >= self.capacity {
            return Err(Error::Input(format!(
                "token {token} at position {pos}: the vocabulary is {}, the cache {}",
                s.vocab, self.capacity
            )));
        }
        self.write_step(token, pos);
        for op in &self.ops {
            let mut encoder = self.gpu.device.create_command_encoder(&Default::default());
            {
                let mut pass = encoder.begin_compute_pass(&Default::default());
                op.record(&mut pass);
            }
            self.gpu.queue.submit([encoder.finish()]);
        }
        let mut encoder = self.gpu.device.create_command_encoder(&Default::default());
        encoder.copy_buffer_to_buffer(&self.best, 0, &self.read_best, 0, 4);
        self.gpu.queue.submit([encoder.finish()]);
        Ok(self.gpu.map_words(&self.read_best)?[0])
    }
}
