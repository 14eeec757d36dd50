//! A decode step on the GPU, one submission a token. Everything is made once, when the
//! [`Decoder`] is: the pipelines, every activation buffer, the KV cache, and one bound
//! [`Op`] for each dispatch of the step, in order; what a family adds (Gemma-3's norms,
//! window, GELU, second RoPE base, Qwen2's biases, Gemma-2's soft-caps) is more ops or other parameters, chosen
//! here from the uploaded model. A token then costs: writing its id, its position and each RoPE base's
//! cos and sin into the small step buffer (`queue.write_buffer`),
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
        if capacity == 0 || capacity > model.max_pos {
            return Err(Error::Input(format!(
                "a cache of {capacity} positions: the model runs 1 to {}",
                model.max_pos
            )));
        }
        let mut b = Builder {
            gpu,
            shaders,
            ops: Vec::new(),
        };
        let (dim, q_dim, kv_dim, ffn) = (s.dim, s.q_dim(), s.kv_dim(), s.ffn);
        let trig = model.ropes.len() * s.head_dim; // each base's cos and sin of head_dim / 2 pairs
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
        // Q and K as the products give them, before the norm on each head (Gemma-3)
        let q_raw = b.f32s("q_raw", q_dim); // (n_heads * head_dim)
        let k_raw = b.f32s("k_raw", kv_dim); // (n_kv_heads * head_dim)
        let e = model.embed_format();
        for (first, part) in &model.embed.parts {
            // one dispatch per part of the table; the part holding the token writes x
            let (rows, first, scale) = (u(part.rows)?, u(*first)?, model.embed_scale.to_bits());
            b.shader(
                &shaders.ops.embed,
                &[&part.buffer, &step, &x],
                &[rows, u(dim)?, e, scale, first, 0, 0, 0],
                groups_of_64(dim),
            )?;
        }
        let heads_params = [u(s.n_heads)?, u(s.n_kv_heads)?, u(s.head_dim)?];
        for layer in &model.layers {
            // ANCHOR: attention_half
            // attention
            b.norm(&x, &layer.attn_norm, &xn, dim, s.eps)?;
            let mut input = b.input(&xn, dim);
            let (q_out, k_out) = match layer.qk_norm {
                Some(_) => (&q_raw, &k_raw),
                None => (&q, &k),
            };
            b.product(&layer.wq, &mut input, q_out)?;
            b.product(&layer.wk, &mut input, k_out)?;
            b.product(&layer.wv, &mut input, &v)?;
            for (bias, out) in [(&layer.bq, q_out), (&layer.bk, k_out), (&layer.bv, &v)] {
                if let Some(bias) = bias {
                    add(&mut b, out, bias)?; // Qwen2: a bias on each product, as chapter 8
                }
            }
            if let Some((q_norm, k_norm)) = &layer.qk_norm {
                // Gemma-3: every head of Q and K normalised, a row of head_dim each
                b.norm_rows(&q_raw, q_norm, &q, s.head_dim, s.n_heads, s.eps)?;
                b.norm_rows(&k_raw, k_norm, &k, s.head_dim, s.n_kv_heads, s.eps)?;
            }
            let pairs = (s.n_heads + s.n_kv_heads) * s.head_dim / 2;
            let [nh, nkv, hd] = heads_params;
            b.shader(
                &shaders.ops.rope,
                &[&step, &q, &k],
                &[nh, nkv, hd, 1, u(layer.rope)?, 0, 0, 0],
                groups_of_64(pairs),
            )?;
            let cache_floats = capacity * kv_dim;
            let k_cache = b.f32s("k_cache", cache_floats); // (capacity, n_kv_heads, head_dim)
            let v_cache = b.f32s("v_cache", cache_floats); // (capacity, n_kv_heads, head_dim)
            let window = u(layer.window.unwrap_or(0))?; // 0: every position
            let [cap, inv_cap] = cap_words(s.attn_softcap); // Gemma-2
            let params = [
                nh,
                nkv,
                hd,
                u(capacity)?,
                s.scale.to_bits(),
                window,
                cap,
                inv_cap,
            ];
            b.shader(
                &shaders.ops.attention,
                &[&step, &q, &k, &v, &k_cache, &v_cache, &heads, &scores],
                &params,
                s.n_heads,
            )?;
            let mut input = b.input(&heads, q_dim);
            b.product(&layer.wo, &mut input, &o)?;
            residual(&mut b, &x, &o, layer.post_attn_norm.as_ref(), &xn, s.eps)?;
            // ANCHOR_END: attention_half
            // ANCHOR: ffn
            // feed-forward
            b.norm(&x, &layer.ffn_norm, &xn, dim, s.eps)?;
            let mut input = b.input(&xn, dim);
            b.product(&layer.w_gate, &mut input, &gate)?;
            b.product(&layer.w_up, &mut input, &up)?;
            match &model.gelu {
                None => b.shader(
                    &shaders.ops.swiglu,
                    &[&gate, &up],
                    &[u(ffn)?, 0, 0, 0],
                    groups_of_64(ffn),
                )?,
                Some(table) => b.shader(
                    &shaders.ops.gelu,
                    &[&gate, &up, table],
                    &[u(ffn)?, 0, 0, 0],
                    groups_of_64(ffn),
                )?,
            }
            let mut input = b.input(&gate, ffn);
            b.product(&layer.w_down, &mut input, &o)?;
            residual(&mut b, &x, &o, layer.post_ffn_norm.as_ref(), &xn, s.eps)?;
            // ANCHOR_END: ffn
        }
        b.norm(&x, &model.final_norm, &xn, dim, s.eps)?;
        let mut input = b.input(&xn, dim);
        b.product_split(model.lm_head(), &mut input, &logits)?;
        if s.final_softcap.is_some() {
            let [cap, inv_cap] = cap_words(s.final_softcap); // Gemma-2
            b.shader(
                &shaders.ops.softcap,
                &[&logits],
                &[u(s.vocab)?, cap, inv_cap, 0],
                groups_of_64(s.vocab),
            )?;
        }
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

    /// The step's small buffer: the token, its position, and each RoPE base's cos and sin
    /// there.
    fn write_step(&self, token: u32, pos: usize) {
        let mut words = vec![token, pos as u32, 0, 0];
        for rope in &self.model.ropes {
            words.extend(rope.at(pos).iter().map(|v| v.to_bits()));
        }
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

/// `n` as a shader's u32, or an error saying it does not fit.
fn u(n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::Input(format!("{n} does not fit a u32")))
}

/// A soft-cap as the shaders take it: `cap` and `1/cap` (rounded in f32, as chapter 8
/// rounds it) as bits; 0 and 0 for none.
fn cap_words(cap: Option<f32>) -> [u32; 2] {
    cap.map_or([0, 0], |c| [c.to_bits(), (1.0 / c).to_bits()])
}

// ANCHOR: residual
/// `x += out`, or with a post-norm (Gemma) `x += RMSNorm(out)`, normed into `scratch`.
fn residual(
    b: &mut Builder,
    x: &wgpu::Buffer,
    out: &wgpu::Buffer,
    post_norm: Option<&wgpu::Buffer>,
    scratch: &wgpu::Buffer,
    eps: f32,
) -> Result<()> {
    let n = (x.size() / 4) as usize;
    let added = match post_norm {
        Some(w) => {
            b.norm(out, w, scratch, n, eps)?;
            scratch
        }
        None => out,
    };
    add(b, x, added)
}
// ANCHOR_END: residual

/// `x += y`, value by value (`shaders/add.wgsl`): the residual, or a bias.
fn add(b: &mut Builder, x: &wgpu::Buffer, y: &wgpu::Buffer) -> Result<()> {
    let n = (x.size() / 4) as usize;
    let shaders = b.shaders;
    b.shader(
        &shaders.ops.add,
        &[x, y],
        &[u(n)?, 0, 0, 0],
        groups_of_64(n),
    )
}
