//! The input vector quantized on the GPU (`shaders/quantize.wgsl`), by chapter 6's rule, so a
//! decode step never brings its activations back to the host between products.
//!
//! Chapter 6's `quantize_q8_0` divides, rounds halves away from zero and rounds the scale to
//! an f16; the shader does the same steps. On lavapipe the blocks come out bit for bit the
//! CPU's (`tests/ops.rs`). Vulkan lets a driver's f32 division be off by 2.5 units in the
//! last place and leaves the f32-to-f16 rounding to the driver, so on another GPU a quant at
//! an exact rounding boundary may differ by one from the CPU's.

use ch06_quantization::matrix::ActFormat;

use crate::acts::BLOCK_WORDS;
use crate::gpu::{Error, Gpu, Result};

/// The compiled shader: made once.
pub struct Quantize {
    pipeline: wgpu::ComputePipeline,
}

impl Quantize {
    pub fn new(gpu: &Gpu) -> Result<Quantize> {
        let wgsl = include_str!("../shaders/quantize.wgsl");
        Ok(Quantize {
            pipeline: gpu.pipeline("quantize", wgsl)?,
        })
    }
}

// ANCHOR: step
/// One quantization bound and ready to record: `x` (f32, `blocks × 32` values) into `acts`
/// (`blocks` of the matrix-vector shader's `ActBlock`), as Q8_0 or Q8_1.
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
        let with_sum = match format {
            ActFormat::Q8_0 => 0,
            ActFormat::Q8_1 => 1,
            ActFormat::Q8_K => return Err(Error::Input("no GPU shader quantizes to Q8_K".into())),
        };
        let need_x = blocks as u64 * 32 * 4;
        let need_acts = (blocks * BLOCK_WORDS * 4) as u64;
        if blocks == 0 || x.size() < need_x || acts.size() < need_acts {
            return Err(Error::Input(format!(
                "quantizing {blocks} blocks needs {need_x} bytes of input and {need_acts} of \
                 output; the buffers have {} and {}",
                x.size(),
                acts.size()
            )));
        }
        let blocks = u32::try_from(blocks).map_err(|_| Error::Input("too many blocks".into()))?;
        let groups = gpu.grid(blocks);
        let params = gpu.uniform(&[blocks, with_sum, groups.0, 0]);
        let bind_group = gpu.bind(&shader.pipeline, &[x, acts, &params])?;
        Ok(QuantizeStep {
            pipeline: shader.pipeline.clone(),
            bind_group,
            groups,
        })
    }

    /// Records the quantization into `pass`: one dispatch, one workgroup a block.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind_group, &[]);
        pass.dispatch_workgroups(self.groups.0, self.groups.1, 1);
    }
}
// ANCHOR_END: step
