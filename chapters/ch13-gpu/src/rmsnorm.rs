//! RMSNorm on the GPU (`shaders/rmsnorm.wgsl`): chapter 1's `ops::rmsnorm`, one workgroup a
//! row; where a step asks, the same dispatch first adds the residual the last block left
//! (`x += y`, or with Gemma's norm after each block `x += RMSNorm(y)`) and afterwards
//! quantizes the row it normalised for the products that read it
//! (`shaders/quantize_chunk.wgsl`): three or four steps of the CPU's, one dispatch.

use ch06_quantization::matrix::ActFormat;

use crate::acts::BLOCK_WORDS;
use crate::gpu::{Error, Gpu, Result};

/// The compiled shader: made once, with the small buffers bound in place of the ones a
/// plain norm does not use.
pub struct RmsNorm {
    pipeline: wgpu::ComputePipeline,
    no_add: wgpu::Buffer,
    no_post: wgpu::Buffer,
    no_acts: wgpu::Buffer,
}

// ANCHOR: residual
/// What a norm adds to its rows first: the last block's output `y`, normed first with
/// `post` where the family norms each block's output (Gemma's post-attention and
/// post-feed-forward norms): the same arithmetic as a dispatch of its own (the shader's
/// `add == 2`), one dispatch fewer for each.
#[derive(Clone, Copy)]
pub struct Residual<'a> {
    pub y: &'a wgpu::Buffer,
    pub post: Option<&'a wgpu::Buffer>,
}
// ANCHOR_END: residual

impl RmsNorm {
    /// The shader with its sums in f64 where the device has f64 arithmetic (chapter 1's
    /// `rmsnorm` sums in f64: an f32 sum gives outputs a unit in the last place apart,
    /// enough to move a quantized activation across a rounding boundary), else in f32.
    pub fn new(gpu: &Gpu) -> Result<RmsNorm> {
        let sum = match gpu.found.shader_f64 {
            true => include_str!("../shaders/sum_f64.wgsl"),
            false => include_str!("../shaders/sum_f32.wgsl"),
        };
        let chunk = include_str!("../shaders/quantize_chunk.wgsl");
        let wgsl = include_str!("../shaders/rmsnorm.wgsl");
        Ok(RmsNorm {
            pipeline: gpu.pipeline("rmsnorm", &format!("{chunk}\n{sum}\n{wgsl}"))?,
            no_add: gpu.storage("no residual", 16, wgpu::BufferUsages::empty()),
            no_post: gpu.storage("no post-norm", 16, wgpu::BufferUsages::empty()),
            no_acts: gpu.storage("no blocks", BLOCK_WORDS * 4, wgpu::BufferUsages::empty()),
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
        NormStep::fused(gpu, shader, x, None, weight, out, n, rows, eps, None)
    }

    /// [`NormStep::new`], after `x += add` where `add` is given (`x` then keeps the sum;
    /// with a post-norm, `x += RMSNorm(add)`), and with `out` also quantized into `quant`'s
    /// blocks where that is given.
    #[allow(clippy::too_many_arguments)]
    pub fn fused(
        gpu: &Gpu,
        shader: &RmsNorm,
        x: &wgpu::Buffer,
        add: Option<Residual<'_>>,
        weight: &wgpu::Buffer,
        out: &wgpu::Buffer,
        n: usize,
        rows: usize,
        eps: f32,
        quant: Option<(ActFormat, &wgpu::Buffer)>,
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
        if add
            .is_some_and(|r| r.y.size() < values || r.post.is_some_and(|w| w.size() < n as u64 * 4))
        {
            return Err(Error::Input(format!(
                "RMSNorm of {rows}x{n} after a residual: the residual or its norm is too small"
            )));
        }
        let code = match quant {
            None => 0,
            Some((format, acts)) => {
                let whole = if format == ActFormat::Q8_K { 256 } else { 32 };
                let need = (rows * n / 32 * BLOCK_WORDS * 4) as u64;
                if !n.is_multiple_of(whole) || acts.size() < need {
                    return Err(Error::Input(format!(
                        "RMSNorm of {rows}x{n} quantized to {format:?}: rows of whole \
                         blocks of {whole}, {need} bytes of blocks (there are {})",
                        acts.size()
                    )));
                }
                crate::quantize::quant_word(Some(format))
            }
        };
        let words = [
            n as u32,
            rows as u32,
            eps.to_bits(),
            match add {
                None => 0,
                Some(Residual { post: None, .. }) => 1,
                Some(Residual { post: Some(_), .. }) => 2,
            },
            code,
            0,
            0,
            0,
        ];
        let params = gpu.uniform(&words);
        let y = add.map_or(&shader.no_add, |r| r.y);
        let post = add.and_then(|r| r.post).unwrap_or(&shader.no_post);
        let acts = quant.map_or(&shader.no_acts, |(_, b)| b);
        let bind_group = gpu.bind(&shader.pipeline, &[x, weight, out, &params, y, acts, post])?;
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
