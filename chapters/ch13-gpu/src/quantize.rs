//! The input vector quantized on the GPU (`shaders/quantize.wgsl`), by chapter 6's rule, so a
//! decode step never brings its activations back to the host between products.
//!
//! Chapter 6's `quantize_q8_0` divides, rounds halves away from zero and rounds the scale to
//! an f16; the shader does the same steps. Chapter 7's `quantize_q8_k` (the K-quants'
//! activations) finds each super-block's value of largest magnitude and rounds halves to
//! even; `shaders/quantize_k.wgsl` does that. On lavapipe the blocks come out bit for bit
//! the CPU's (`tests/ops.rs`). Vulkan lets a driver's f32 division be off by 2.5 units in the
//! last place and leaves the f32-to-f16 rounding to the driver, so on another GPU a quant at
//! an exact rounding boundary may differ by one from the CPU's.

use ch06_quantization::matrix::ActFormat;

use crate::acts::BLOCK_WORDS;
use crate::gpu::{Error, Gpu, Result};

/// The compiled shaders, Q8_0/Q8_1 and Q8_K: made once.
pub struct Quantize {
    pipeline: wgpu::ComputePipeline,
    k_pipeline: wgpu::ComputePipeline,
}

impl Quantize {
    pub fn new(gpu: &Gpu) -> Result<Quantize> {
        let wgsl = include_str!("../shaders/quantize.wgsl");
        let k_wgsl = include_str!("../shaders/quantize_k.wgsl");
        Ok(Quantize {
            pipeline: gpu.pipeline("quantize", wgsl)?,
            k_pipeline: gpu.pipeline("quantize to Q8_K", k_wgsl)?,
        })
    }
}

// ANCHOR: step
/// One quantization bound and ready to record: `x` (f32, `blocks × 32` values) into `acts`
/// (`blocks` of the matrix-vector shader's `ActBlock`), as Q8_0, Q8_1 or Q8_K.
pub struct QuantizeStep {
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
    groups: (u32, u32),
}

impl QuantizeStep {
    pub fn new(
        gpu: &Gpu,
        shader: &Quantize,
        format: ActFormat,
        x: &wgpu::Buffer,
        acts: &wgpu::Buffer,
        blocks: usize,
    ) -> Result<QuantizeStep> {
        // Q8_K: one workgroup per super-block of 8 blocks, the other shader
        let (pipeline, with_sum, per_group) = match format {
            ActFormat::Q8_0 => (&shader.pipeline, 0, 1),
            ActFormat::Q8_1 => (&shader.pipeline, 1, 1),
            ActFormat::Q8_K => (&shader.k_pipeline, 0, 8),
        };
        let need_x = blocks as u64 * 32 * 4;
        let need_acts = (blocks * BLOCK_WORDS * 4) as u64;
        if blocks == 0 || !blocks.is_multiple_of(per_group) {
            return Err(Error::Input(format!(
                "{blocks} blocks of 32 are not whole {format:?} blocks"
            )));
        }
        if x.size() < need_x || acts.size() < need_acts {
            return Err(Error::Input(format!(
                "quantizing {blocks} blocks needs {need_x} bytes of input and {need_acts} of \
                 output; the buffers have {} and {}",
                x.size(),
                acts.size()
            )));
        }
        let workgroups = u32::try_from(blocks / per_group)
            .map_err(|_| Error::Input("too many blocks".into()))?;
        let groups = gpu.grid(workgroups);
        let params = gpu.uniform(&[workgroups, with_sum, groups.0, 0]);
        let bind_group = gpu.bind(pipeline, &[x, acts, &params])?;
        Ok(QuantizeStep {
            pipeline: pipeline.clone(),
            bind_group,
            groups,
        })
    }

    /// Records the quantization into `pass`: one dispatch, one workgroup a block (Q8_K: a
    /// super-block).
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind_group, &[]);
        pass.dispatch_workgroups(self.groups.0, self.groups.1, 1);
    }
}
// ANCHOR_END: step
