//! Chapter 8's loaded model on the GPU: every matrix uploaded once as the file's blocks
//! ([`GpuMatrix`]), every norm as f32, and the numbers a step needs ([`Shape`]). A model
//! with something the GPU step does not run yet (Gemma-3's extra norms, sliding windows,
//! GELU, soft-caps; Qwen2's biases; a format with no shader) is refused here, with what it
//! is, before anything is uploaded.

use std::borrow::Cow;

use ch06_quantization::Format;
use ch08_gguf::engine::{Activation, Model};
use ch08_gguf::matrix::Matrix;

use crate::gpu::{Error, Gpu, Result};
use crate::matvec::GpuMatrix;

/// The sizes and constants of one decode step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    pub layers: usize,
    pub dim: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub ffn: usize,
    pub vocab: usize,
    pub eps: f32,
    /// Attention scores are `scale · q·k`, as chapter 8 computes it.
    pub scale: f32,
}

impl Shape {
    pub fn q_dim(&self) -> usize {
        self.n_heads * self.head_dim
    }
    pub fn kv_dim(&self) -> usize {
        self.n_kv_heads * self.head_dim
    }
}

/// One decoder layer's weights on the GPU.
pub struct GpuLayer {
    pub attn_norm: wgpu::Buffer, // (dim) f32
    pub wq: GpuMatrix,           // (n_heads * head_dim, dim), rows as chapter 8 holds them
    pub wk: GpuMatrix,           // (n_kv_heads * head_dim, dim)
    pub wv: GpuMatrix,           // (n_kv_heads * head_dim, dim)
    pub wo: GpuMatrix,           // (dim, n_heads * head_dim)
    pub ffn_norm: wgpu::Buffer,  // (dim) f32
    pub w_gate: GpuMatrix,       // (ffn, dim)
    pub w_up: GpuMatrix,         // (ffn, dim)
    pub w_down: GpuMatrix,       // (dim, ffn)
}

/// RoPE's frequencies, one a pair, as chapter 8's table computes its angles from them.
pub struct RopeAngles {
    pub freqs: Vec<f64>, // (head_dim / 2)
    pub mscale: f32,
    pub max_pos: usize,
}

impl RopeAngles {
    /// cos then sin of every pair's angle at `pos`: `(2, head_dim / 2)`, each rounded from
    /// f64 once, as chapter 8's `LazyRope` fills its table.
    pub fn at(&self, pos: usize) -> Vec<f32> {
        let angles = self.freqs.iter().map(|f| pos as f64 * f);
        let cos = angles.clone().map(|a| a.cos() as f32 * self.mscale);
        let sin = angles.map(|a| a.sin() as f32 * self.mscale);
        cos.chain(sin).collect()
    }
}

/// The whole model on the GPU.
pub struct GpuModel {
    pub shape: Shape,
    pub embed: GpuMatrix, // (vocab, dim)
    pub layers: Vec<GpuLayer>,
    pub final_norm: wgpu::Buffer, // (dim) f32
    /// `None`: tied to the embedding (SmolLM2), the same buffer read twice.
    pub lm_head: Option<GpuMatrix>, // (vocab, dim)
    pub rope: RopeAngles,
}

// ANCHOR: refuse
/// What in `m` the GPU step does not run yet, if anything.
pub fn unsupported(m: &Model) -> Option<String> {
    let f = &m.family;
    let family = f.name;
    let has = |what: &str| {
        Some(format!(
            "{family}: {what} (the GPU step runs Llama-family models; Gemma-3 comes later)"
        ))
    };
    if f.embed_scale.is_some() {
        return has("the embedding is scaled");
    }
    if f.activation != Activation::Silu {
        return has("the feed-forward gate is GELU, not SiLU");
    }
    if f.qk_norm || f.post_norms {
        return has("extra norms (on Q and K, or after each block)");
    }
    if f.attn_softcap.is_some() || f.final_softcap.is_some() {
        return has("soft-capped scores or logits");
    }
    if f.sliding.is_some() || m.layers.iter().any(|l| l.window.is_some()) {
        return has("sliding-window attention");
    }
    if m.ropes.len() != 1 || m.layers.iter().any(|l| l.rope != 0) {
        return has("more than one RoPE base");
    }
    if m.layers
        .iter()
        .any(|l| l.bq.is_some() || l.bk.is_some() || l.bv.is_some())
    {
        return has("biases on Q, K or V");
    }
    let c = &m.config;
    if c.n_kv_heads == 0 || !c.n_heads.is_multiple_of(c.n_kv_heads) {
        return has("query heads that do not share KV heads evenly");
    }
    if c.head_dim == 0 || c.head_dim > 256 || !c.head_dim.is_multiple_of(2) {
        return has("a head size other than an even number up to 256");
    }
    None
}
// ANCHOR_END: refuse

/// The formats `shaders/embed.wgsl` dequantizes, and its code for each.
fn embed_code(format: Format) -> Option<u32> {
    match format {
        Format::Q8_0 => Some(0),
        Format::Q4_0 => Some(1),
        Format::Q4_1 => Some(2),
        Format::Q5_0 => Some(3),
        Format::F32 | Format::Int8 | Format::Q4_K | Format::Q6_K => None,
    }
}

impl GpuModel {
    /// The embedding's format code for `shaders/embed.wgsl`.
    pub fn embed_format(&self) -> u32 {
        embed_code(self.embed.format).expect("checked at upload")
    }

    pub fn lm_head(&self) -> &GpuMatrix {
        self.lm_head.as_ref().unwrap_or(&self.embed)
    }

    // ANCHOR: upload
    /// Uploads every matrix and norm of `m` once, the blocks as chapter 8 holds them.
    pub fn upload(gpu: &Gpu, m: &Model) -> Result<GpuModel> {
        if let Some(why) = unsupported(m) {
            return Err(Error::Input(why));
        }
        let c = &m.config;
        let embed_format = format_of(&m.embed);
        if embed_code(embed_format).is_none() {
            return Err(Error::Input(format!(
                "the embedding is {}: the GPU's lookup reads Q8_0, Q4_0, Q4_1 and Q5_0",
                embed_format.name()
            )));
        }
        let matrix = |name: &str, w: &Matrix| {
            let (format, blocks) = blocks_of(w);
            GpuMatrix::from_blocks(gpu, format, w.rows(), w.cols(), &blocks)
                .map_err(|e| Error::Input(format!("{name}: {e}")))
        };
        let norm = |name: &str, v: &[f32]| gpu.upload_f32(name, v, wgpu::BufferUsages::empty());
        let mut layers = Vec::with_capacity(m.layers.len());
        for (i, l) in m.layers.iter().enumerate() {
            let at = |what: &str| format!("layer {i}'s {what}");
            layers.push(GpuLayer {
                attn_norm: norm("attn_norm", &l.attn_norm),
                wq: matrix(&at("wq"), &l.wq)?,
                wk: matrix(&at("wk"), &l.wk)?,
                wv: matrix(&at("wv"), &l.wv)?,
                wo: matrix(&at("wo"), &l.wo)?,
                ffn_norm: norm("ffn_norm", &l.ffn_norm),
                w_gate: matrix(&at("gate"), &l.w_gate)?,
                w_up: matrix(&at("up"), &l.w_up)?,
                w_down: matrix(&at("down"), &l.w_down)?,
            });
        }
        let rope = &m.ropes[0];
        let half = rope.head_dim / 2;
        Ok(GpuModel {
            shape: Shape {
                layers: m.layers.len(),
                dim: c.hidden_size,
                n_heads: c.n_heads,
                n_kv_heads: c.n_kv_heads,
                head_dim: c.head_dim,
                ffn: c.intermediate_size,
                vocab: m.embed.rows(),
                eps: c.rms_norm_eps,
                scale: m
                    .family
                    .attn_scale
                    .unwrap_or(1.0 / (c.head_dim as f32).sqrt()),
            },
            embed: matrix("the embedding", &m.embed)?,
            layers,
            final_norm: norm("final_norm", &m.final_norm),
            lm_head: m
                .lm_head
                .as_ref()
                .map(|h| matrix("the LM head", h))
                .transpose()?,
            rope: RopeAngles {
                freqs: (0..half)
                    .map(|i| rope.scaling.frequency(i, rope.head_dim, rope.theta))
                    .collect(),
                mscale: rope.scaling.mscale,
                max_pos: m.max_positions(),
            },
        })
    }
    // ANCHOR_END: upload
}

fn format_of(w: &Matrix) -> Format {
    match w {
        Matrix::Q(q) => q.format(),
        Matrix::K(k) => k.format,
        Matrix::P(p) => p.format,
    }
}

// ANCHOR: blocks_of
/// A matrix's blocks in the file's layout, row after row: borrowed where chapter 8 keeps
/// them so, taken back out of the eight-row interleaving where it packed them for the CPU's
/// kernels (one matrix at a time: a copy of its bytes, not a dequantized one).
fn blocks_of(w: &Matrix) -> (Format, Cow<'_, [u8]>) {
    match w {
        Matrix::Q(q) => (q.format(), Cow::Borrowed(q.rows_bytes(0, q.rows()))),
        Matrix::K(k) => (k.format, Cow::Borrowed(k.bytes_all())),
        Matrix::P(p) => {
            let mut bytes = Vec::new();
            p.rows_into(0..p.rows, &mut bytes);
            (p.format, Cow::Owned(bytes))
        }
    }
}
// ANCHOR_END: blocks_of
