//! The prefill product `Y = X · Wᵀ` on the GPU: many tokens' quantized activations against
//! one [`GpuMatrix`] in a single dispatch (`shaders/matmul.wgsl`), tile by tile, each tile
//! reading its weights from memory once for all of its tokens. [`MatMul`] holds the
//! compiled shaders, a [`Tiled`] product binds one matrix to an input and an output as
//! [`Product`](crate::Product) does for one token, and [`matmul`] runs one start to finish.
//!
//! The activations are the matrix-vector product's blocks, one token's after another, as
//! [`acts::quantize`] makes them from `(tokens, cols)` values, or as
//! [`QuantizeStep`](crate::quantize::QuantizeStep) makes them on the GPU over
//! `tokens · cols / 32` blocks (the blocks of a token's row are whole, so the tokens'
//! rows quantized together are the rows quantized one by one).

use std::sync::OnceLock;

use ch06_quantization::Format;

use crate::acts::{self, BLOCK_WORDS};
use crate::gpu::{Error, Gpu, Result};
use crate::matvec::{FORMATS, GpuMatrix, block_source, spare_outputs, three_outputs};

/// Rows and tokens of the output one workgroup takes (`TILE_ROWS`, `TILE_TOKENS` in
/// `shaders/matmul.wgsl`).
pub const TILE_ROWS: usize = 32;
pub const TILE_TOKENS: usize = 16;
/// Blocks of 32 a workgroup copies per row per step: one K-quant super-block.
pub const CHUNK: usize = 8;

// ANCHOR: source
/// The WGSL of a format's tiled product: the same `block_dot` file the matrix-vector
/// product uses, the bytes `CHUNK` blocks of a row take in this format, the tile, and the
/// invocations' `main`: with [`Tiling::Tokens`] four tokens each where the format unpacks
/// a block once for many ([`unpacks`]), else one. `None` for a format with no shader.
pub fn source(format: Format, tiling: Tiling) -> Option<String> {
    let block = block_source(format)?;
    let chunk_bytes = format.row_bytes(CHUNK * 32);
    let tile = include_str!("../shaders/matmul.wgsl");
    let main = match tiling == Tiling::Tokens && unpacks(format) {
        true => include_str!("../shaders/tiled_tokens.wgsl"),
        false => include_str!("../shaders/tiled_rows.wgsl"),
    };
    Some(format!(
        "{block}\nconst CHUNK_BYTES: u32 = {chunk_bytes}u;\n{tile}\n{main}"
    ))
}
// ANCHOR_END: source

/// Whether the format's file has `unpack` and `unpacked_dot` (a block of 32 read out once
/// for many activation blocks): the formats whose term is one block.
pub fn unpacks(format: Format) -> bool {
    match format {
        Format::Q4_0 | Format::Q4_1 | Format::Q5_0 | Format::Q8_0 => true,
        Format::Q4_K | Format::Q6_K | Format::F32 | Format::Int8 => false,
    }
}

/// How a tiled product's invocations share the tile: each one token and eight rows
/// (`shaders/tiled_rows.wgsl`, every format), or four tokens and two rows where the format
/// unpacks a block once for many (`shaders/tiled_tokens.wgsl`). The same bits either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tiling {
    Rows,
    Tokens,
}

impl Tiling {
    /// Both, the one a model starts with first (`tune.rs` times both on a GPU).
    pub const ALL: [Tiling; 2] = [Tiling::Rows, Tiling::Tokens];

    pub fn name(self) -> &'static str {
        match self {
            Tiling::Rows => "rows",
            Tiling::Tokens => "tokens",
        }
    }
}

/// The tiled-product pipelines, one per format in [`FORMATS`], each compiled the first time
/// a product of that format is bound (a model uses two to four of the six).
pub struct MatMul {
    pub tiling: Tiling,
    pipelines: [OnceLock<wgpu::ComputePipeline>; FORMATS.len()],
    /// Bound as `out1` and `out2` where a product has fewer matrices: never written.
    spare: [wgpu::Buffer; 2],
}

impl MatMul {
    /// The tiled products with [`Tiling::Rows`]: on lavapipe the faster for Q4_0, and what
    /// a model on a GPU starts from before `tune.rs` times the other.
    pub fn new(gpu: &Gpu) -> Result<MatMul> {
        MatMul::with(gpu, Tiling::Rows)
    }

    pub fn with(gpu: &Gpu, tiling: Tiling) -> Result<MatMul> {
        Ok(MatMul {
            tiling,
            pipelines: Default::default(),
            spare: spare_outputs(gpu),
        })
    }

    fn pipeline(&self, gpu: &Gpu, format: Format) -> Result<wgpu::ComputePipeline> {
        let i = FORMATS.iter().position(|&f| f == format);
        let (Some(i), Some(wgsl)) = (i, source(format, self.tiling)) else {
            return Err(Error::Input(format!(
                "no tiled shader for {}",
                format.name()
            )));
        };
        if let Some(p) = self.pipelines[i].get() {
            return Ok(p.clone());
        }
        let p = gpu.pipeline(&format!("{} tiled product", format.name()), &wgsl)?;
        Ok(self.pipelines[i].get_or_init(|| p).clone())
    }
}

// ANCHOR: tiled
/// One tiled product bound and ready to record: `out (tokens, rows) = acts (tokens, cols) ·
/// Wᵀ`, where `acts` holds every token's quantized input, one token after another.
pub struct Tiled {
    /// The matrix's format and shape, for a profile.
    pub what: String,
    pub acts: wgpu::Buffer, // (tokens × cols / 32) blocks × BLOCK_WORDS words
    pub out: wgpu::Buffer,  // (tokens, rows) f32
    /// Tokens the next dispatch multiplies; at most `capacity`, the tokens bound.
    pub tokens: usize,
    pub capacity: usize,
    uniform: wgpu::Buffer,
    bind_group: wgpu::BindGroup,
    pipeline: wgpu::ComputePipeline,
    groups: (u32, u32),
    rows: usize,
    blocks: usize,
    splits: [u32; 2],
}

impl Tiled {
    /// Binds `m` to a new input and a new output buffer for `tokens` tokens.
    pub fn new(gpu: &Gpu, shaders: &MatMul, m: &GpuMatrix, tokens: usize) -> Result<Tiled> {
        let (acts_bytes, out_bytes) = sizes(gpu, m, tokens)?;
        let acts = gpu.storage("tokens' acts", acts_bytes, wgpu::BufferUsages::COPY_DST);
        let out = gpu.storage("tokens' out", out_bytes, wgpu::BufferUsages::COPY_SRC);
        Tiled::between(gpu, shaders, m, &acts, &out, tokens)
    }

    /// Binds `m` to buffers a prefill already has: `acts` (the tokens' quantized inputs,
    /// from a [`QuantizeStep`](crate::quantize::QuantizeStep) over all of them) and `out`
    /// (at least `tokens × rows` f32).
    pub fn between(
        gpu: &Gpu,
        shaders: &MatMul,
        m: &GpuMatrix,
        acts: &wgpu::Buffer,
        out: &wgpu::Buffer,
        tokens: usize,
    ) -> Result<Tiled> {
        Tiled::into(gpu, shaders, m, acts, &[out], tokens)
    }

    /// [`Tiled::between`] for a stack of matrices: `outs`, one for each, in order, each
    /// `(tokens, its rows)`.
    pub fn into(
        gpu: &Gpu,
        shaders: &MatMul,
        m: &GpuMatrix,
        acts: &wgpu::Buffer,
        outs: &[&wgpu::Buffer],
        tokens: usize,
    ) -> Result<Tiled> {
        let pipeline = shaders.pipeline(gpu, m.format)?;
        let (acts_bytes, _) = sizes(gpu, m, tokens)?;
        m.check_outs(outs, tokens)?;
        if acts.size() < acts_bytes as u64 {
            return Err(Error::Input(format!(
                "a {}x{} product of {tokens} tokens needs {acts_bytes} bytes of input; the \
                 buffer has {}",
                m.rows,
                m.cols,
                acts.size()
            )));
        }
        // one workgroup per tile: rows along x, tokens along y
        let tiles = |n: usize, per: usize| u32::try_from(n.div_ceil(per)).ok();
        let most = gpu.limits.max_compute_workgroups_per_dimension;
        let groups = match (tiles(m.rows, TILE_ROWS), tiles(tokens, TILE_TOKENS)) {
            (Some(x), Some(y)) if x <= most && y <= most => (x, y),
            _ => {
                return Err(Error::Input(format!(
                    "{} rows and {tokens} tokens take more tiles than a dispatch holds ({most} \
                     a side)",
                    m.rows
                )));
            }
        };
        let blocks = m.cols / 32;
        let uniform = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("dims"),
            size: 32,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST, // set_tokens
            mapped_at_creation: false,
        });
        let splits = m.splits()?;
        write_dims(gpu, &uniform, m.rows, blocks, tokens, splits);
        let [out, out1, out2] = three_outputs(outs, &shaders.spare);
        let buffers = [&m.buffer, acts, out, &uniform, out1, out2];
        let bind_group = gpu.bind(&pipeline, &buffers)?;
        Ok(Tiled {
            what: m.what(),
            acts: acts.clone(),
            out: outs[0].clone(),
            tokens,
            capacity: tokens,
            uniform,
            bind_group,
            pipeline,
            groups,
            rows: m.rows,
            blocks,
            splits,
        })
    }
    // ANCHOR_END: tiled

    /// Makes the next submissions multiply the first `tokens` tokens of the buffers bound
    /// (at most the tokens bound): a prompt's last, shorter piece through the same binding.
    /// The new count is written with the queue, so it holds for the whole of the next
    /// submission.
    pub fn set_tokens(&mut self, gpu: &Gpu, tokens: usize) -> Result<()> {
        if !(1..=self.capacity).contains(&tokens) {
            return Err(Error::Input(format!(
                "{tokens} tokens: this product was bound for 1 to {}",
                self.capacity
            )));
        }
        write_dims(
            gpu,
            &self.uniform,
            self.rows,
            self.blocks,
            tokens,
            self.splits,
        );
        self.groups.1 = tokens.div_ceil(TILE_TOKENS) as u32;
        self.tokens = tokens;
        Ok(())
    }

    /// Queues the quantized inputs of `tokens` tokens (`acts::quantize` of their values).
    pub fn write_input(&self, gpu: &Gpu, words: &[u32]) -> Result<()> {
        if words.len() != self.tokens * self.blocks * BLOCK_WORDS {
            return Err(Error::Input(format!(
                "the input has {} blocks; {} tokens of {} blocks were bound",
                words.len() / BLOCK_WORDS,
                self.tokens,
                self.blocks
            )));
        }
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        gpu.queue.write_buffer(&self.acts, 0, &bytes);
        Ok(())
    }

    /// Records the product into `pass`: one dispatch for every token.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        self.record_tokens(pass, self.tokens);
    }

    /// Records the product of the first `tokens` tokens bound (at most [`Tiled::tokens`]):
    /// only their tiles are dispatched, so a prompt's short last piece costs its own tokens.
    pub fn record_tokens(&self, pass: &mut wgpu::ComputePass<'_>, tokens: usize) {
        let tiles = tokens.min(self.tokens).div_ceil(TILE_TOKENS).max(1) as u32;
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind_group, &[]);
        pass.dispatch_workgroups(self.groups.0, tiles, 1);
    }
}

/// Queues the shader's `Dims`: each count below 2³², as [`sizes`] checked, the word
/// `zero` that keeps each term rounded on its own (`alone` in the shader), and where a
/// stack's matrices begin.
fn write_dims(
    gpu: &Gpu,
    uniform: &wgpu::Buffer,
    rows: usize,
    blocks: usize,
    tokens: usize,
    [split1, split2]: [u32; 2],
) {
    let words = [
        rows as u32,
        blocks as u32,
        tokens as u32,
        0,
        split1,
        split2,
        0,
        0,
    ];
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    gpu.queue.write_buffer(uniform, 0, &bytes);
}

/// The input's and the output's bytes for `tokens` tokens of `m`, checked against the
/// device's largest binding (so every index the shader computes fits in a u32).
fn sizes(gpu: &Gpu, m: &GpuMatrix, tokens: usize) -> Result<(usize, usize)> {
    let limit = gpu.largest_binding();
    let acts = tokens
        .checked_mul(m.cols / 32 * BLOCK_WORDS * 4)
        .filter(|&b| b as u64 <= limit);
    let out = tokens
        .checked_mul(m.rows * 4)
        .filter(|&b| b as u64 <= limit);
    match (acts, out) {
        _ if tokens == 0 => Err(Error::Input("a product of no tokens".into())),
        (Some(a), Some(o)) => Ok((a, o)),
        _ => Err(Error::Input(format!(
            "{tokens} tokens of a {}x{} product exceed this GPU's largest storage binding \
             ({limit} bytes)",
            m.rows, m.cols
        ))),
    }
}

// ANCHOR: matmul
/// `X · Wᵀ` for `tokens` rows of `x` (`(tokens, cols)`), start to finish: quantize each
/// token as the CPU engine would, upload, one dispatch, read back `(tokens, rows)`.
pub fn matmul(
    gpu: &Gpu,
    shaders: &MatMul,
    m: &GpuMatrix,
    x: &[f32],
    tokens: usize,
) -> Result<Vec<f32>> {
    if tokens.checked_mul(m.cols) != Some(x.len()) {
        return Err(Error::Input(format!(
            "{} values are not {tokens} tokens of {} columns",
            x.len(),
            m.cols
        )));
    }
    let activation = m.format.activation().expect("block formats have one");
    let product = Tiled::new(gpu, shaders, m, tokens)?;
    product.write_input(gpu, &acts::quantize(activation, x)?)?;
    gpu.submit_pass("the tiled product", |pass| product.record(pass))?;
    gpu.read_f32(&product.out, tokens * product.rows)
}
// ANCHOR_END: matmul
