//! RMSNorm on the GPU (`shaders/rmsnorm.wgsl`): chapter 1's `ops::rmsnorm`, one workgroup a
//! row.

use crate::gpu::{Error, Gpu, Result};

/// The compiled shader: made once.
pub struct RmsNorm {
    pipeline: wgpu::ComputePipeline,
}

impl RmsNorm {
    /// The f64 shader where the device has f64 arithmetic (chapter 1's `rmsnorm` sums in
    /// f64: an f32 sum gives outputs a unit in the last place apart, enough to move a
    /// quantized activation across a rounding boundary), else the f32 one.
    pub fn new(gpu: &Gpu) -> Result<RmsNorm> {
        let wgsl = match gpu.found.shader_f64 {
            true => include_str!("../shaders/rmsnorm_f64.wgsl"),
            false => include_str!("../shaders/rmsnorm.wgsl"),
        };
        Ok(RmsNorm {
            pipeline: gpu.pipeline("rmsnorm", wgsl)?,
        })
    }
}

// ANCHOR: step
/// One RMSNorm bound and ready to record: `rows` rows of `n` values from `x` into `out`,
/// scaled by `weight` (`n` f32, the file's norm).
pub struct NormStep {
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
    rows: u32,
}

impl NormStep {
    #[allow(clippy::too_many_arguments)] // the buffers, the shape and epsilon: what it is
    pub fn new(
        gpu: &Gpu,
        shader: &RmsNorm,
        x: &wgpu::Buffer,
        weight: &wgpu::Buffer,
        out: &wgpu::Buffer,
        n: usize,
        rows: usize,
        eps: f32,
    ) -> Result<NormStep> {
        let values = (n as u64).saturating_mul(rows as u64).saturating_mul(4);
        let max_rows = u64::from(gpu.limits.max_compute_workgroups_per_dimension);
        if n == 0 || rows == 0 || rows as u64 > max_rows || n > u32::MAX as usize {
            return Err(Error::Input(format!(
                "RMSNorm of {rows} rows of {n} values"
            )));
        }
        if x.size() < values || out.size() < values || weight.size() < n as u64 * 4 {
            return Err(Error::Input(format!(
                "RMSNorm of {rows}x{n}: a buffer is too small (x {}, weight {}, out {} bytes)",
                x.size(),
                weight.size(),
                out.size()
            )));
        }
        let params = gpu.uniform(&[n as u32, rows as u32, eps.to_bits(), 0]);
        let bind_group = gpu.bind(&shader.pipeline, &[x, weight, out, &params])?;
        Ok(NormStep {
            pipeline: shader.pipeline.clone(),
            bind_group,
            rows: rows as u32,
        })
    }

    /// Records the norm into `pass`: one dispatch, one workgroup a row.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind_group, &[]);
        pass.dispatch_workgroups(self.rows, 1, 1);
    }
}
// ANCHOR_END: step
