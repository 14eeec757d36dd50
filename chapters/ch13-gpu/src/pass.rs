//! One pass over the model, bound once: every dispatch from the embedding lookup to the
//! argmax, for a fixed number of tokens. A decode step is the pass of one token (its
//! products the matrix-vector shader's); a prefill is the pass of a prompt's piece, up to
//! `tokens` at once (its products the tiled shader's, its attention causal over the piece).
//! Both passes of a [`Decoder`](crate::step::Decoder) share what lives from one submission
//! to the next ([`Shared`]): the small step buffers the host writes, the KV cache, the
//! logits. What a family adds (Gemma-3's norms, window, GELU, second RoPE base, Qwen2's
//! biases, Gemma-2's soft-caps) is more ops or other parameters, chosen here from the
//! uploaded model.

use crate::bind::{Builder, Input, Shaders};
use crate::gpu::{Error, Result};
use crate::matvec::GpuMatrix;
use crate::model::GpuModel;
use crate::ops::{MOST_HEAD_DIM, WIDE_ATTENTION, groups_of_64};
use crate::quantize::{Gate, quant_word};
use crate::rmsnorm::Residual;
use ch06_quantization::matrix::ActFormat;

/// What both passes bind: written or kept from one submission to the next.
pub struct Shared {
    /// The first token's position, the token count, the RoPE tables' count, a word of
    /// padding, then each token's cos and sin for each table: `(tokens, tables, head_dim)`.
    pub step: wgpu::Buffer,
    pub ids: wgpu::Buffer,                         // (tokens) u32
    pub caches: Vec<(wgpu::Buffer, wgpu::Buffer)>, // each layer's K and V, (capacity, kv_dim)
    pub scores: wgpu::Buffer,                      // (tokens, n_heads, capacity)
    pub logits: wgpu::Buffer,                      // (vocab): the last token's
    pub best: wgpu::Buffer,                        // (1) u32: their argmax
}

impl Shared {
    /// The buffers for a cache of `capacity` positions and passes of up to `tokens` tokens.
    pub fn new(b: &Builder, model: &GpuModel, capacity: usize, tokens: usize) -> Shared {
        let s = model.shape;
        let trig = tokens * model.ropes.len() * s.head_dim;
        let caches = (0..s.layers)
            .map(|_| {
                let floats = capacity * s.kv_dim();
                (b.f32s("k_cache", floats), b.f32s("v_cache", floats))
            })
            .collect();
        Shared {
            step: b
                .gpu
                .storage("step", 16 + trig * 4, wgpu::BufferUsages::COPY_DST),
            ids: b
                .gpu
                .storage("ids", tokens * 4, wgpu::BufferUsages::COPY_DST),
            caches,
            scores: b.f32s("scores", tokens * s.n_heads * capacity),
            logits: b.f32s("logits", s.vocab),
            best: b.f32s("best", 1),
        }
    }
}

/// A pass's activation buffers, `tokens` rows each; kept for tests that look inside a step.
pub struct Activations {
    pub x: wgpu::Buffer,     // (tokens, dim): the residual stream
    pub xn: wgpu::Buffer,    // (tokens, dim): the last norm's output
    pub q: wgpu::Buffer,     // (tokens, n_heads * head_dim)
    pub k: wgpu::Buffer,     // (tokens, n_kv_heads * head_dim)
    pub v: wgpu::Buffer,     // (tokens, n_kv_heads * head_dim)
    pub heads: wgpu::Buffer, // (tokens, n_heads * head_dim): attention's output
    pub o: wgpu::Buffer,     // (tokens, dim): the last block's output
    pub gate: wgpu::Buffer,  // (tokens, ffn): SiLU(gate) · up after a layer's feed-forward
}

// ANCHOR: build
/// Binds every dispatch of a pass of `tokens` tokens over `model` into `b`, against a cache
/// of `capacity` positions.
pub fn build(
    b: &mut Builder,
    model: &GpuModel,
    shared: &Shared,
    capacity: usize,
    tokens: usize,
) -> Result<Activations> {
    let s = model.shape;
    let shaders: &Shaders = b.shaders;
    let (dim, q_dim, kv_dim, ffn) = (s.dim, s.q_dim(), s.kv_dim(), s.ffn);
    let rows = |label: &str, n: usize| b.f32s(label, tokens * n);
    let x = rows("x", dim); //          (tokens, dim): the residual stream
    let xn = rows("xn", dim); //        (tokens, dim): normed
    let q = rows("q", q_dim); //        (tokens, n_heads * head_dim)
    let k = rows("k", kv_dim); //       (tokens, n_kv_heads * head_dim)
    let v = rows("v", kv_dim); //       (tokens, n_kv_heads * head_dim)
    let heads = rows("heads", q_dim); // (tokens, n_heads * head_dim): attention's output
    let o = rows("o", dim); //          (tokens, dim): a block's output
    let gate = rows("gate", ffn); //    (tokens, ffn)
    let up = rows("up", ffn); //        (tokens, ffn)
    let normed = rows("normed", dim); // (tokens, dim): a prefill's last output post-normed
    // Q and K as the products give them, before the norm on each head (Gemma-3)
    let q_raw = rows("q_raw", q_dim);
    let k_raw = rows("k_raw", kv_dim);
    let Shared { step, ids, .. } = shared;
    let e = model.embed_format();
    for (first, part) in &model.embed.parts {
        // one dispatch per part of the table; the part holding a token writes its row
        let (n, first, scale) = (u(part.rows)?, u(*first)?, model.embed_scale.to_bits());
        b.grid(
            &shaders.ops.embed,
            &[&part.buffer, step, ids, &x],
            &[n, u(dim)?, e, scale, first, 0, 0, 0],
            (groups_of_64(dim), tokens),
        )?;
    }
    let [nh, nkv, hd] = [u(s.n_heads)?, u(s.n_kv_heads)?, u(s.head_dim)?];
    if s.head_dim > MOST_HEAD_DIM {
        return Err(Error::Input(format!(
            "heads of {} values: the GPU's attention takes heads of at most {MOST_HEAD_DIM}",
            s.head_dim
        )));
    }
    // what the next norm adds to `x` before it norms it: the last block's output
    let mut pending: Option<Residual> = None;
    for (layer, (k_cache, v_cache)) in model.layers.iter().zip(&shared.caches) {
        // ANCHOR: attention_half
        // attention: x += the last block's output, normed and quantized, in one dispatch
        let (w, f) = (&layer.attn_norm, layer.qkv[0].format);
        let mut input = b.norm_input(&x, pending, w, &xn, dim, tokens, s.eps, f)?;
        let (q_out, k_out) = match layer.qk_norm {
            Some(_) => (&q_raw, &k_raw),
            None => (&q, &k),
        };
        products(b, &layer.qkv, &mut input, &[q_out, k_out, &v])?;
        for (bias, out) in [(&layer.bq, q_out), (&layer.bk, k_out), (&layer.bv, &v)] {
            if let Some(bias) = bias {
                add(b, out, bias)?; // Qwen2: a bias on each product, as chapter 8
            }
        }
        // RoPE: a prefill's queries and keys turned by a dispatch of their own; a decode
        // step's by attention, as it reads them (`rotate`), and so are their norms
        let (halves, table) = (1, u(layer.rope)?); // chapter 8's pairing, the layer's base
        let rotate = u32::from(tokens == 1);
        // Gemma-3: every head of Q and K normalised, a row of head_dim each
        let (head_norms, qk_norm) = match &layer.qk_norm {
            Some((q_norm, k_norm)) if rotate == 1 => ((q_norm, k_norm), 1),
            Some((q_norm, k_norm)) => {
                b.norm_rows(&q_raw, q_norm, &q, s.head_dim, tokens * s.n_heads, s.eps)?;
                b.norm_rows(&k_raw, k_norm, &k, s.head_dim, tokens * s.n_kv_heads, s.eps)?;
                ((&shaders.ops.no_norm, &shaders.ops.no_norm), 0)
            }
            None => ((&shaders.ops.no_norm, &shaders.ops.no_norm), 0),
        };
        // what attention reads: the products' Q and K where it norms them
        let (q_in, k_in) = if qk_norm == 1 {
            (q_out, k_out)
        } else {
            (&q, &k)
        };
        if rotate == 0 {
            let pairs = (s.n_heads + s.n_kv_heads) * s.head_dim / 2;
            b.grid(
                &shaders.ops.rope,
                &[step, &q, &k],
                &[nh, nkv, hd, halves, table, 0, 0, 0],
                (groups_of_64(pairs), tokens),
            )?;
        }
        // attention's output is the output product's input: quantized by the attention
        // shader where its format's blocks lie inside a head (Q8_0's and Q8_1's 32 values;
        // Q8_K's 256, where a head is whole super-blocks, in workgroups as wide)
        let mut input = b.input(&heads, q_dim, tokens);
        let by_attention = match layer.wo.format.activation() {
            Some(f @ (ActFormat::Q8_0 | ActFormat::Q8_1)) if s.head_dim.is_multiple_of(32) => {
                Some(f)
            }
            Some(f @ ActFormat::Q8_K) if s.head_dim.is_multiple_of(WIDE_ATTENTION) => Some(f),
            _ => None,
        };
        let acts = match by_attention {
            Some(f) => b.quantized_by_caller(&mut input, f),
            None => shaders.ops.no_acts.clone(),
        };
        let quant = quant_word(by_attention);
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
            quant,
            rotate,
            halves,
            table,
            qk_norm,
            s.eps.to_bits(),
            0,
            0,
        ];
        b.grid(
            &shaders.ops.attention_for(b.gpu, s.head_dim)?,
            &[
                step,
                q_in,
                k_in,
                &v,
                k_cache,
                v_cache,
                &heads,
                &shared.scores,
                &acts,
                head_norms.0,
                head_norms.1,
            ],
            &params,
            (s.n_heads, tokens),
        )?;
        b.product(&layer.wo, &mut input, &o)?;
        // Gemma's norm after the block is made by the next norm's workgroup, before its add
        pending = Some(Residual {
            y: &o,
            post: layer.post_attn_norm.as_ref(),
        });
        // ANCHOR_END: attention_half
        // ANCHOR: ffn
        // feed-forward: x += attention's output, normed and quantized, in one dispatch
        let (w, f) = (&layer.ffn_norm, layer.gate_up[0].format);
        let mut input = b.norm_input(&x, pending, w, &xn, dim, tokens, s.eps, f)?;
        products(b, &layer.gate_up, &mut input, &[&gate, &up])?;
        // SiLU(gate) · up (Gemma: GELU), computed as the down product's input is quantized
        let act = model.gelu.as_ref().map_or(Gate::Swiglu, Gate::Gelu);
        let mut input = b.gated_input(&gate, &up, act, ffn, tokens, layer.w_down.format)?;
        b.product(&layer.w_down, &mut input, &o)?;
        // what the next norm adds to x (Gemma: normed first, by that norm's workgroup)
        pending = Some(Residual {
            y: &o,
            post: layer.post_ffn_norm.as_ref(),
        });
        // ANCHOR_END: ffn
    }
    head(b, model, shared, &x, pending, &normed, tokens)?;
    Ok(Activations {
        x,
        xn,
        q,
        k,
        v,
        heads,
        o,
        gate,
    })
}
// ANCHOR_END: build

// ANCHOR: head
/// The logits of the last token only, and their argmax, after `x += pending` (the last
/// block's output): a prefill first adds it to every row (normed into `scratch` first where
/// it has a post-norm) and copies its last row out of `x` (`shaders/last.wgsl`), so the
/// final norm and the LM head run on one row.
fn head(
    b: &mut Builder,
    model: &GpuModel,
    shared: &Shared,
    x: &wgpu::Buffer,
    pending: Option<Residual>,
    scratch: &wgpu::Buffer,
    tokens: usize,
) -> Result<()> {
    let s = model.shape;
    let shaders: &Shaders = b.shaders;
    let (last, pending) = match tokens {
        1 => (x.clone(), pending), // the final norm adds it
        _ => {
            if let Some(Residual { y, post }) = pending {
                let y = match post {
                    Some(w) => {
                        b.norm_rows(y, w, scratch, s.dim, tokens, s.eps)?;
                        scratch
                    }
                    None => y,
                };
                add(b, x, y)?; // every row, before the last is copied out
            }
            let last = b.f32s("last", s.dim);
            let params = [u(s.dim)?, 0, 0, 0];
            b.shader(
                &shaders.ops.last,
                &[&shared.step, x, &last],
                &params,
                groups_of_64(s.dim),
            )?;
            (last, None)
        }
    };
    let xn = b.f32s("xn last", s.dim);
    let (w, f) = (&model.final_norm, model.lm_head().format);
    let mut input = b.norm_input(&last, pending, w, &xn, s.dim, 1, s.eps, f)?;
    b.product_split(model.lm_head(), &mut input, &shared.logits)?;
    if s.final_softcap.is_some() {
        let [cap, inv_cap] = cap_words(s.final_softcap); // Gemma-2
        b.shader(
            &shaders.ops.softcap,
            &[&shared.logits],
            &[u(s.vocab)?, cap, inv_cap, 0],
            groups_of_64(s.vocab),
        )?;
    }
    b.shader(
        &shaders.ops.argmax,
        &[&shared.logits, &shared.best],
        &[u(s.vocab)?, 0, 0, 0],
        1,
    )
}
// ANCHOR_END: head

/// The products of `stacks` (of matrices that read `input`), one dispatch a stack, into
/// `outs`, one buffer a matrix, in the order the stacks hold them.
fn products(
    b: &mut Builder,
    stacks: &[GpuMatrix],
    input: &mut Input,
    outs: &[&wgpu::Buffer],
) -> Result<()> {
    let mut rest = outs;
    for m in stacks {
        let n = m.parts.len().min(rest.len());
        let (now, later) = rest.split_at(n);
        b.product_into(m, input, now)?;
        rest = later;
    }
    Ok(())
}

/// `n` as a shader's u32, or an error saying it does not fit.
pub fn u(n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::Input(format!("{n} does not fit a u32")))
}

/// A soft-cap as the shaders take it: `cap` and `1/cap` (rounded in f32, as chapter 8
/// rounds it) as bits; 0 and 0 for none.
fn cap_words(cap: Option<f32>) -> [u32; 2] {
    cap.map_or([0, 0], |c| [c.to_bits(), (1.0 / c).to_bits()])
}

/// `x += y`, value by value (`shaders/add.wgsl`): the residual; or a bias, `y` added to
/// each of `x`'s rows of `y`'s length.
fn add(b: &mut Builder, x: &wgpu::Buffer, y: &wgpu::Buffer) -> Result<()> {
    let (n, m) = ((x.size() / 4) as usize, (y.size() / 4) as usize);
    let shaders = b.shaders;
    b.shader(
        &shaders.ops.add,
        &[x, y],
        &[u(n)?, u(m)?, 0, 0],
        groups_of_64(n),
    )
}
