//! The small shaders of a decode step, besides the products, quantization (with the
//! feed-forward gates) and RMSNorm (with most residual adds): the embedding lookup, RoPE,
//! attention over the KV cache, an add (a bias; a prefill's last residual), Gemma-2's
//! soft-cap, a prefill's last row and greedy argmax (`shaders/embed.wgsl` …
//! `argmax.wgsl`). Each is compiled once ([`Ops`]) and bound once per place it is used in
//! the step ([`Dispatch`]).

use std::sync::OnceLock;

use crate::gpu::{Error, Gpu, Result};

/// The widest head attention takes (`MOST_HEAD_DIM` in `shaders/attention.wgsl`: a
/// workgroup keeps its query there).
pub const MOST_HEAD_DIM: usize = 256;

/// The width of the attention workgroup for heads of a multiple of 256 values (Gemma-3's):
/// a head's output is then whole Q8_K super-blocks, which it quantizes for an output product
/// of K-quants (a Q8_K scale needs all 256 values). Other heads take 64.
pub const WIDE_ATTENTION: usize = 256;

/// The compiled small shaders: made once.
pub struct Ops {
    pub embed: wgpu::ComputePipeline,
    pub rope: wgpu::ComputePipeline,
    /// Attention in workgroups of 64; [`Ops::attention_for`] picks by the heads' width.
    pub attention: wgpu::ComputePipeline,
    attention_wide: OnceLock<wgpu::ComputePipeline>,
    pub add: wgpu::ComputePipeline,
    pub softcap: wgpu::ComputePipeline,
    pub last: wgpu::ComputePipeline,
    pub argmax: wgpu::ComputePipeline,
    /// Bound as attention's `acts` where it does not quantize its output: never written.
    pub no_acts: wgpu::Buffer,
    /// Bound as attention's `q_norm` and `k_norm` where it norms no heads: never read.
    pub no_norm: wgpu::Buffer,
}

impl Ops {
    pub fn new(gpu: &Gpu) -> Result<Ops> {
        Ok(Ops {
            embed: gpu.pipeline("embed", include_str!("../shaders/embed.wgsl"))?,
            rope: gpu.pipeline("rope", include_str!("../shaders/rope.wgsl"))?,
            attention: gpu.pipeline("attention", &attention_source(gpu, 64))?,
            attention_wide: OnceLock::new(),
            add: gpu.pipeline("add", include_str!("../shaders/add.wgsl"))?,
            softcap: gpu.pipeline("softcap", include_str!("../shaders/softcap.wgsl"))?,
            last: gpu.pipeline("last", include_str!("../shaders/last.wgsl"))?,
            argmax: gpu.pipeline("argmax", include_str!("../shaders/argmax.wgsl"))?,
            no_acts: gpu.storage("no blocks", 64, wgpu::BufferUsages::empty()),
            no_norm: gpu.storage("no head norm", 16, wgpu::BufferUsages::empty()),
        })
    }

    /// The name of one of these pipelines, for a profile ("shader" if none).
    pub fn name_of(&self, pipeline: &wgpu::ComputePipeline) -> &'static str {
        let named = [
            (&self.embed, "embedding"),
            (&self.rope, "rope"),
            (&self.attention, "attention"),
            (&self.add, "add"),
            (&self.softcap, "softcap"),
            (&self.last, "last row"),
            (&self.argmax, "argmax"),
        ];
        match named.into_iter().find(|(p, _)| *p == pipeline) {
            Some((_, name)) => name,
            None if self.attention_wide.get() == Some(pipeline) => "attention",
            None => "shader",
        }
    }

    /// The attention pipeline for heads of `head_dim`: [`WIDE_ATTENTION`] invocations a
    /// workgroup where that divides it (compiled the first time asked), else 64. The same
    /// bits either way: every score, sum and value is one lane's, in the same order.
    pub fn attention_for(&self, gpu: &Gpu, head_dim: usize) -> Result<wgpu::ComputePipeline> {
        if !head_dim.is_multiple_of(WIDE_ATTENTION) {
            return Ok(self.attention.clone());
        }
        if let Some(p) = self.attention_wide.get() {
            return Ok(p.clone());
        }
        let p = gpu.pipeline(
            "attention (256 wide)",
            &attention_source(gpu, WIDE_ATTENTION),
        )?;
        Ok(self.attention_wide.get_or_init(|| p).clone())
    }
}

/// The attention shader for workgroups of `lanes`, with the quantizer it calls,
/// `exp_cpu` and the heads' norms' `Sum`: in f64 where the device has it, to give the CPU's
/// f32::exp bits and `rmsnorm.wgsl`'s sums.
fn attention_source(gpu: &Gpu, lanes: usize) -> String {
    let (exp, sum) = match gpu.found.shader_f64 {
        true => (
            include_str!("../shaders/exp_f64.wgsl"),
            include_str!("../shaders/sum_f64.wgsl"),
        ),
        false => (
            include_str!("../shaders/exp_f32.wgsl"),
            include_str!("../shaders/sum_f32.wgsl"),
        ),
    };
    format!(
        "{exp}\n{sum}\nconst LANES: u32 = {lanes}u;\n{}\n{}",
        include_str!("../shaders/quantize_chunk.wgsl"),
        include_str!("../shaders/attention.wgsl")
    )
}

// ANCHOR: dispatch
/// One shader bound to its buffers and parameters, ready to record: what every step of a
/// token is, once made.
pub struct Dispatch {
    /// What it is, for a profile: the shader's name (`Ops::name_of`), or "shader".
    pub what: &'static str,
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
    groups: (u32, u32), // y: the tokens of a pass (1 for a decode step's and `new`'s)
}

impl Dispatch {
    /// `pipeline` with `buffers` at bindings 0.. and a uniform of `params` after them, run
    /// as `groups` workgroups.
    pub fn new(
        gpu: &Gpu,
        pipeline: &wgpu::ComputePipeline,
        buffers: &[&wgpu::Buffer],
        params: &[u32],
        groups: usize,
    ) -> Result<Dispatch> {
        Dispatch::grid(gpu, pipeline, buffers, params, (groups, 1))
    }

    /// [`Dispatch::new`] with a grid of `(x, y)` workgroups, y a pass's tokens: a prefill's
    /// shaders take its tokens along y, and a shorter piece dispatches fewer rows.
    pub fn grid(
        gpu: &Gpu,
        pipeline: &wgpu::ComputePipeline,
        buffers: &[&wgpu::Buffer],
        params: &[u32],
        (x, y): (usize, usize),
    ) -> Result<Dispatch> {
        let max = gpu.limits.max_compute_workgroups_per_dimension as usize;
        if x == 0 || x > max || y == 0 || y > max {
            return Err(Error::Input(format!(
                "{x}x{y} workgroups: this GPU takes 1 to {max} a side in a dispatch"
            )));
        }
        let uniform = gpu.uniform(params);
        let mut all = buffers.to_vec();
        all.push(&uniform);
        Ok(Dispatch {
            what: "shader",
            pipeline: pipeline.clone(),
            bind_group: gpu.bind(pipeline, &all)?,
            groups: (x as u32, y as u32),
        })
    }

    /// Records the dispatch into `pass`.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        self.record_tokens(pass, self.groups.1);
    }

    /// [`Dispatch::record`] for a piece of `tokens` tokens: the grid's rows of workgroups,
    /// one a token, only for the piece's (at most the tokens bound).
    pub fn record_tokens(&self, pass: &mut wgpu::ComputePass<'_>, tokens: u32) {
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind_group, &[]);
        pass.dispatch_workgroups(self.groups.0, tokens.clamp(1, self.groups.1), 1);
    }
}
// ANCHOR_END: dispatch

/// Workgroups of 64 invocations that cover `n` values, one an invocation.
pub fn groups_of_64(n: usize) -> usize {
    n.div_ceil(64)
}
