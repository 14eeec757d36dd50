//! Chapter 8's loaded model on the GPU: every matrix uploaded once as the file's blocks
//! ([`GpuMatrix`], the embedding a [`SplitMatrix`] since Gemma-3's is larger than one
//! binding), every norm as f32, and the numbers a step needs ([`Shape`]). What a family
//! changes (chapter 8's `Family`) is carried as data: the embedding's scale, the soft-caps, the GELU table,
//! the optional norms, biases and window of each layer, one RoPE table per base. A model
//! with something the GPU step does not run (a format with no shader, a shape its shaders
//! do not take) is refused here, with what it is, before anything is uploaded.

use std::borrow::Cow;

use ch06_quantization::Format;
use ch08_gguf::engine::{Activation, Model, gelu_table};
use ch08_gguf::matrix::Matrix;

use crate::gpu::{Error, Gpu, Result};
use crate::matvec::{GpuMatrix, padded_bytes};
use crate::split::SplitMatrix;

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
    /// Gemma-2: scores, and the logits, become `cap · tanh(x / cap)`.
    pub attn_softcap: Option<f32>,
    pub final_softcap: Option<f32>,
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
    /// Q's, K's and V's matrices, `(n_heads * head_dim, dim)` and `(n_kv_heads * head_dim,
    /// dim)` twice, rows as chapter 8 holds them: stacked where their formats agree
    /// ([`stacks`]), so one dispatch makes all three.
    pub qkv: Vec<GpuMatrix>,
    pub wo: GpuMatrix,          // (dim, n_heads * head_dim)
    pub ffn_norm: wgpu::Buffer, // (dim) f32
    /// The gate's and up's `(ffn, dim)`, stacked where their formats agree.
    pub gate_up: Vec<GpuMatrix>,
    pub w_down: GpuMatrix, // (dim, ffn)
    /// Qwen2: biases added to the products' Q, K and V, `(q_dim)`, `(kv_dim)`, `(kv_dim)` f32.
    pub bq: Option<wgpu::Buffer>,
    pub bk: Option<wgpu::Buffer>,
    pub bv: Option<wgpu::Buffer>,
    /// Gemma-3, Qwen3: RMSNorm on every head of Q and of K, `(head_dim)` f32 each.
    pub qk_norm: Option<(wgpu::Buffer, wgpu::Buffer)>,
    /// Gemma: RMSNorm on the attention's and the feed-forward's outputs, `(dim)` f32.
    pub post_attn_norm: Option<wgpu::Buffer>,
    pub post_ffn_norm: Option<wgpu::Buffer>,
    /// Positions a query sees, counting itself (`None`: all before it).
    pub window: Option<usize>,
    /// Which of the model's RoPE tables the layer rotates with.
    pub rope: usize,
}

/// RoPE's frequencies, one a pair, as chapter 8's table computes its angles from them.
pub struct RopeAngles {
    pub freqs: Vec<f64>, // (head_dim / 2)
    pub mscale: f32,
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
    pub embed: SplitMatrix, // (vocab, dim)
    /// The embedding's rows are multiplied by this (Gemma: √dim, rounded to f32; else 1).
    pub embed_scale: f32,
    pub layers: Vec<GpuLayer>,
    pub final_norm: wgpu::Buffer, // (dim) f32
    /// `None`: tied to the embedding (SmolLM2, Gemma-3), the same buffers read twice.
    pub lm_head: Option<SplitMatrix>, // (vocab, dim)
    /// One table a RoPE base (chapter 8's `m.ropes`): Gemma-3's sliding layers turn with
    /// 10 000, its global ones with 1 000 000.
    pub ropes: Vec<RopeAngles>,
    /// The longest sequence the model runs (chapter 8's `max_positions`).
    pub max_pos: usize,
    /// GELU of every f16 value (`(65536)` f32, chapter 8's table) where the gate is GELU;
    /// `None`: SiLU.
    pub gelu: Option<wgpu::Buffer>,
}

// ANCHOR: refuse
impl GpuModel {
    /// The formats of the matrices a decode step multiplies, each once.
    pub fn formats(&self) -> Vec<Format> {
        let layers = self.layers.iter().flat_map(|l| {
            let stacks = l.qkv.iter().chain(&l.gate_up);
            stacks.chain([&l.wo, &l.w_down]).map(|m| m.format)
        });
        let heads = [Some(&self.embed), self.lm_head.as_ref()];
        let mut formats = Vec::new();
        for f in layers.chain(heads.into_iter().flatten().map(|m| m.format)) {
            if !formats.contains(&f) {
                formats.push(f);
            }
        }
        formats
    }
}

/// What in `m` the GPU step does not run yet, if anything: shapes its shaders do not take.
/// Every family of chapter 8 runs (`tests/families.rs` checks each against the CPU engine);
/// formats are checked at upload.
pub fn unsupported(m: &Model) -> Option<String> {
    let f = &m.family;
    let family = f.name;
    let has = |what: &str| Some(format!("{family}: {what} (the GPU step does not run it)"));
    if m.layers.iter().any(|l| l.rope >= m.ropes.len()) {
        return has("a layer whose RoPE table the model does not have");
    }
    if m.layers.iter().any(|l| l.window == Some(0)) {
        return has("a sliding window of 0 positions"); // the shader reads 0 as none
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

    pub fn lm_head(&self) -> &SplitMatrix {
        self.lm_head.as_ref().unwrap_or(&self.embed)
    }

    // ANCHOR: upload
    /// Uploads every matrix and norm of `m` once, the blocks as chapter 8 holds them.
    pub fn upload(gpu: &Gpu, m: &Model) -> Result<GpuModel> {
        if let Some(why) = unsupported(m) {
            return Err(Error::Input(why));
        }
        let (c, f) = (&m.config, &m.family);
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
        let split = |name: &str, w: &Matrix| {
            let (format, blocks) = blocks_of(w);
            SplitMatrix::from_blocks(gpu, format, w.rows(), w.cols(), &blocks)
                .map_err(|e| Error::Input(format!("{name}: {e}")))
        };
        let norm = |name: &str, v: &[f32]| gpu.upload_f32(name, v, wgpu::BufferUsages::empty());
        let opt = |name: &str, v: &Option<Vec<f32>>| v.as_ref().map(|v| norm(name, v));
        let mut layers = Vec::with_capacity(m.layers.len());
        for (i, l) in m.layers.iter().enumerate() {
            let at = |what: &str| format!("layer {i}'s {what}");
            layers.push(GpuLayer {
                attn_norm: norm("attn_norm", &l.attn_norm),
                qkv: stacks(gpu, &at("wq, wk, wv"), &[&l.wq, &l.wk, &l.wv])?,
                wo: matrix(&at("wo"), &l.wo)?,
                ffn_norm: norm("ffn_norm", &l.ffn_norm),
                gate_up: stacks(gpu, &at("gate, up"), &[&l.w_gate, &l.w_up])?,
                w_down: matrix(&at("down"), &l.w_down)?,
                bq: opt("bq", &l.bq),
                bk: opt("bk", &l.bk),
                bv: opt("bv", &l.bv),
                qk_norm: match (&l.q_norm, &l.k_norm) {
                    (Some(q), Some(k)) => Some((norm("q_norm", q), norm("k_norm", k))),
                    _ => None, // chapter 8 norms Q and K only with both weights
                },
                post_attn_norm: opt("post_attn_norm", &l.post_attn_norm),
                post_ffn_norm: opt("post_ffn_norm", &l.post_ffn_norm),
                window: l.window,
                rope: l.rope,
            });
        }
        let half = c.head_dim / 2;
        let gelu = match f.activation {
            Activation::Silu => None,
            Activation::GeluTanhF16 => Some(norm("gelu table", gelu_table())),
        };
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
                attn_softcap: f.attn_softcap,
                final_softcap: f.final_softcap,
            },
            embed: split("the embedding", &m.embed)?,
            embed_scale: f.embed_scale.unwrap_or(1.0),
            layers,
            final_norm: norm("final_norm", &m.final_norm),
            lm_head: m
                .lm_head
                .as_ref()
                .map(|h| split("the LM head", h))
                .transpose()?,
            ropes: m
                .ropes
                .iter()
                .map(|r| RopeAngles {
                    freqs: (0..half)
                        .map(|i| r.scaling.frequency(i, c.head_dim, r.theta))
                        .collect(),
                    mscale: r.scaling.mscale,
                })
                .collect(),
            max_pos: m.max_positions(),
            gelu,
        })
    }
    // ANCHOR_END: upload
}

// ANCHOR: stacks
/// `ws`, which read the same input, uploaded as few stacks as their formats allow: each run
/// of neighbours of one format one buffer ([`GpuMatrix::stacked`]), which one dispatch
/// multiplies, writing each matrix's rows to its own output. A stack larger than the
/// device's largest binding is uploaded one matrix at a time.
pub fn stacks(gpu: &Gpu, what: &str, ws: &[&Matrix]) -> Result<Vec<GpuMatrix>> {
    let blocks: Vec<_> = ws.iter().map(|w| blocks_of(w)).collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < ws.len() {
        let same = |k: usize| blocks[k].0 == blocks[i].0 && ws[k].cols() == ws[i].cols();
        let mut j = (i + 1..ws.len()).find(|&k| !same(k)).unwrap_or(ws.len());
        let bytes: usize = blocks[i..j].iter().map(|(_, b)| b.len()).sum();
        if padded_bytes(bytes) as u64 > gpu.largest_binding() {
            j = i + 1; // too large to bind whole: this one alone
        }
        let parts: Vec<_> = (i..j).map(|k| (ws[k].rows(), &*blocks[k].1)).collect();
        let m = GpuMatrix::stacked(gpu, blocks[i].0, ws[i].cols(), &parts)
            .map_err(|e| Error::Input(format!("{what}: {e}")))?;
        out.push(m);
        i = j;
    }
    Ok(out)
}
// ANCHOR_END: stacks

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
