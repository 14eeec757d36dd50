//! The input vector quantized on the GPU (`shaders/quantize.wgsl`), by chapter 6's rule, so a
//! decode step never brings its activations back to the host between products. Most inputs
//! are quantized by the RMSNorm before them, in its own dispatch (`rmsnorm.rs`); this one
//! quantizes the rest: attention's output, and the feed-forward gate, computed on the way.
//!
//! Chapter 6's `quantize_q8_0` divides, rounds halves away from zero and rounds the scale to
//! an f16; the shader does the same steps. Chapter 7's `quantize_q8_k` (the K-quants'
//! activations) finds each super-block's value of largest magnitude and rounds halves to
//! even; `shaders/quantize_chunk.wgsl` does both, for either shader. On lavapipe the blocks come out bit for bit
//! the CPU's (`tests/ops.rs`). Vulkan lets a driver's f32 division be off by 2.5 units in the
//! last place and leaves the f32-to-f16 rounding to the driver, so on another GPU a quant at
//! an exact rounding boundary may differ by one from the CPU's.

use ch06_quantization::matrix::ActFormat;

use crate::acts::BLOCK_WORDS;
use crate::gpu::{Error, Gpu, Result};

/// The compiled shaders: made once. Each quantizes to any of the three formats
/// (`shaders/quantize_chunk.wgsl`); they differ in what they read: the buffer as it is, or
/// a feed-forward gate's values, SiLU(g) · u or GELU(g) · u, computed on the way in.
pub struct Quantize {
    plain: wgpu::ComputePipeline,
    swiglu: wgpu::ComputePipeline,
    gelu: wgpu::ComputePipeline,
}

/// The gate a [`QuantizeStep::gated`] computes from its two inputs as it reads them.
pub enum Gate<'a> {
    /// SiLU(gate) · up (the Llama families)
    Swiglu,
    /// GELU(gate) · up, GELU from chapter 8's table of the f16 values (the Gemma families)
    Gelu(&'a wgpu::Buffer),
}

impl Quantize {
    pub fn new(gpu: &Gpu) -> Result<Quantize> {
        // `exp_cpu`: in f64 where the device has it, to give the CPU's f32::exp bits
        let exp = match gpu.found.shader_f64 {
            true => include_str!("../shaders/exp_f64.wgsl"),
            false => include_str!("../shaders/exp_f32.wgsl"),
        };
        let chunk = include_str!("../shaders/quantize_chunk.wgsl");
        let main = include_str!("../shaders/quantize.wgsl");
        let with = |value: &str| format!("{chunk}\n{value}\n{main}");
        Ok(Quantize {
            plain: gpu.pipeline(
                "quantize",
                &with(include_str!("../shaders/value_plain.wgsl")),
            )?,
            swiglu: gpu.pipeline(
                "SwiGLU, quantized",
                &format!("{exp}\n{}", with(include_str!("../shaders/swiglu.wgsl"))),
            )?,
            gelu: gpu.pipeline(
                "GELU, quantized",
                &with(include_str!("../shaders/gelu.wgsl")),
            )?,
        })
    }
}

/// `format` as `quantize_chunk.wgsl` names it.
pub(crate) fn code(format: ActFormat) -> u32 {
    match format {
        ActFormat::Q8_0 => 0,
        ActFormat::Q8_1 => 1,
        ActFormat::Q8_K => 2,
    }
}

/// The `quant` word of a shader that may also quantize its output (RMSNorm's, attention's):
/// 0 for none, else `format`'s code plus one.
pub(crate) fn quant_word(format: Option<ActFormat>) -> u32 {
    format.map_or(0, |f| 1 + code(f))
}

// ANCHOR: step
/// One quantization bound and ready to record: `blocks` blocks of 32 values into `acts`
/// (the matrix-vector shader's `ActBlock`), as Q8_0, Q8_1 or Q8_K.
pub struct QuantizeStep {
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
    groups: (u32, u32),
}

impl QuantizeStep {
    /// `x` (f32, `blocks × 32` values) quantized as it is.
    pub fn new(
        gpu: &Gpu,
        shader: &Quantize,
        format: ActFormat,
        x: &wgpu::Buffer,
        acts: &wgpu::Buffer,
        blocks: usize,
    ) -> Result<QuantizeStep> {
        QuantizeStep::bound(gpu, &shader.plain, format, &[x], acts, blocks)
    }

    /// The feed-forward gate `gate = act(gate) · up` (`blocks × 32` values each), written
    /// back into `gate` and quantized in the same dispatch: the down product's input.
    #[allow(clippy::too_many_arguments)] // the gate's buffers and the quantizer's
    pub fn gated(
        gpu: &Gpu,
        shader: &Quantize,
        act: Gate<'_>,
        format: ActFormat,
        gate: &wgpu::Buffer,
        up: &wgpu::Buffer,
        acts: &wgpu::Buffer,
        blocks: usize,
    ) -> Result<QuantizeStep> {
        if up.size() < blocks as u64 * 32 * 4 {
            return Err(Error::Input(format!(
                "a gate of {blocks} blocks: up has {} bytes",
                up.size()
            )));
        }
        match act {
            Gate::Swiglu => {
                QuantizeStep::bound(gpu, &shader.swiglu, format, &[gate, up], acts, blocks)
            }
            Gate::Gelu(table) => {
                QuantizeStep::bound(gpu, &shader.gelu, format, &[gate, up, table], acts, blocks)
            }
        }
    }

    /// `pipeline` bound with `inputs[0]` at binding 0, `acts` at 1, the parameters at 2 and
    /// the rest of `inputs` from 3.
    fn bound(
        gpu: &Gpu,
        pipeline: &wgpu::ComputePipeline,
        format: ActFormat,
        inputs: &[&wgpu::Buffer],
        acts: &wgpu::Buffer,
        blocks: usize,
    ) -> Result<QuantizeStep> {
        let per_group = match format {
            ActFormat::Q8_K => 8, // whole super-blocks of 8 blocks
            ActFormat::Q8_0 | ActFormat::Q8_1 => 1,
        };
        let need_x = blocks as u64 * 32 * 4;
        let need_acts = (blocks * BLOCK_WORDS * 4) as u64;
        if blocks == 0 || !blocks.is_multiple_of(per_group) {
            return Err(Error::Input(format!(
                "{blocks} blocks of 32 are not whole {format:?} blocks"
            )));
        }
        if inputs[0].size() < need_x || acts.size() < need_acts {
            return Err(Error::Input(format!(
                "quantizing {blocks} blocks needs {need_x} bytes of input and {need_acts} of \
                 output; the buffers have {} and {}",
                inputs[0].size(),
                acts.size()
            )));
        }
        // one workgroup per 256 values: eight blocks, or a Q8_K super-block
        let too_many = |_| Error::Input(format!("{blocks} blocks to quantize: too many"));
        let n = u32::try_from(blocks).map_err(too_many)?;
        let groups = gpu.grid(n.div_ceil(8));
        let params = gpu.uniform(&[n, code(format), groups.0, 0]);
        let mut all = vec![inputs[0], acts, &params];
        all.extend_from_slice(&inputs[1..]);
        let bind_group = gpu.bind(pipeline, &all)?;
        Ok(QuantizeStep {
            pipeline: pipeline.clone(),
            bind_group,
            groups,
        })
    }

    /// Records the quantization into `pass`: one dispatch, one workgroup per 256 values.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind_group, &[]);
        pass.dispatch_workgroups(self.groups.0, self.groups.1, 1);
    }
}
// ANCHOR_END: step
