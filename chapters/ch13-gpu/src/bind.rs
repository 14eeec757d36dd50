//! The dispatches of a decode step or a prefill, each bound once to its buffers ([`Op`]),
//! and the builder that makes them in order ([`Builder`]): a product's input quantized once
//! for each activation format its matrices want (the matrix-vector product for one token,
//! the tiled product for many), an RMSNorm, a small shader. `step.rs` builds a model's
//! passes with it.

use ch06_quantization::Format;
use ch06_quantization::matrix::ActFormat;

use crate::gpu::{Error, Gpu, Result};
use crate::matmul::{MatMul, Tiled};
use crate::matvec::{GpuMatrix, Layout, MatVec, Product, Reduction};
use crate::ops::{Dispatch, Ops};
use crate::quantize::{Gate, Quantize, QuantizeStep};
use crate::rmsnorm::{NormStep, Residual, RmsNorm};
use crate::split::SplitMatrix;

/// One dispatch of the step, bound to its buffers.
pub enum Op {
    Norm(NormStep),
    Quantize(QuantizeStep),
    Product(Product),
    Tiled(Tiled),
    Shader(Dispatch),
}

impl Op {
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        match self {
            Op::Norm(s) => s.record(pass),
            Op::Quantize(s) => s.record(pass),
            Op::Product(s) => s.record(pass),
            Op::Tiled(s) => s.record(pass),
            Op::Shader(s) => s.record(pass),
        }
    }

    /// What the op is, for a profile: the products by format and shape.
    pub fn what(&self) -> String {
        match self {
            Op::Norm(_) => "rmsnorm".into(),
            Op::Quantize(_) => "quantize".into(),
            Op::Product(p) => format!("product {}", p.what),
            Op::Tiled(t) => format!("tiled {}", t.what),
            Op::Shader(d) => d.what.into(),
        }
    }

    /// [`Op::record`] for a piece of a prefill of `tokens` tokens: the tiled products and
    /// the shaders whose grid runs over the tokens dispatch only the piece's; the rest (the
    /// norms, the quantizers, the gates and adds, value by value) run over the whole buffers.
    pub fn record_tokens(&self, pass: &mut wgpu::ComputePass<'_>, tokens: usize) {
        match self {
            Op::Tiled(s) => s.record_tokens(pass, tokens),
            Op::Shader(s) => s.record_tokens(pass, tokens as u32),
            Op::Norm(_) | Op::Quantize(_) | Op::Product(_) => self.record(pass),
        }
    }
}

/// The shaders a step uses, compiled once.
pub struct Shaders {
    pub matvec: MatVec,
    pub matmul: MatMul,
    pub quantize: Quantize,
    pub norm: RmsNorm,
    pub ops: Ops,
}

impl Shaders {
    pub fn new(gpu: &Gpu) -> Result<Shaders> {
        Shaders::with(gpu, Reduction::for_gpu(gpu)?)
    }

    /// The step's shaders with the products' sums added `reduction`'s way:
    /// [`Reduction::InOrder`] for a step whose logits are the CPU engine's bits.
    pub fn with(gpu: &Gpu, reduction: Reduction) -> Result<Shaders> {
        Shaders::around(gpu, MatVec::with(gpu, reduction)?)
    }

    /// [`Shaders::with`], its products compiled for `formats` only (a model's: the others
    /// are never dispatched).
    pub fn for_formats(gpu: &Gpu, reduction: Reduction, formats: &[Format]) -> Result<Shaders> {
        let layout = Layout::for_gpu(gpu, reduction)?;
        Shaders::around(gpu, MatVec::for_formats(gpu, reduction, layout, formats)?)
    }

    /// The step's other shaders around the products `matvec`.
    fn around(gpu: &Gpu, matvec: MatVec) -> Result<Shaders> {
        Ok(Shaders {
            matvec,
            matmul: MatMul::new(gpu)?,
            quantize: Quantize::new(gpu)?,
            norm: RmsNorm::new(gpu)?,
            ops: Ops::new(gpu)?,
        })
    }
}

/// Rows some products read (one token's, or each of a prefill's tokens'), quantized once
/// for each activation format they want.
pub struct Input {
    x: wgpu::Buffer,
    tokens: usize,
    blocks: usize, // of every token
    acts: Vec<(ActFormat, wgpu::Buffer)>,
}

/// The step being built: the ops so far and what they need.
pub struct Builder<'a> {
    pub gpu: &'a Gpu,
    pub shaders: &'a Shaders,
    pub ops: Vec<Op>,
}

impl Builder<'_> {
    pub fn f32s(&self, label: &str, n: usize) -> wgpu::Buffer {
        self.gpu.storage(label, n * 4, wgpu::BufferUsages::COPY_SRC)
    }

    pub fn norm(
        &mut self,
        x: &wgpu::Buffer,
        w: &wgpu::Buffer,
        out: &wgpu::Buffer,
        n: usize,
        eps: f32,
    ) -> Result<()> {
        self.norm_rows(x, w, out, n, 1, eps)
    }

    /// RMSNorm of each of `rows` rows of `n` values (Gemma-3's every head of Q or K).
    pub fn norm_rows(
        &mut self,
        x: &wgpu::Buffer,
        w: &wgpu::Buffer,
        out: &wgpu::Buffer,
        n: usize,
        rows: usize,
        eps: f32,
    ) -> Result<()> {
        let s = NormStep::new(self.gpu, &self.shaders.norm, x, w, out, n, rows, eps)?;
        self.ops.push(Op::Norm(s));
        Ok(())
    }

    /// RMSNorm of `tokens` rows of `n` values of `x` into `out`, after `x += add` where
    /// that is given (normed first with its post-norm, Gemma's), as the input of products
    /// of `first`'s format: quantized for them in the same dispatch. Products that want
    /// another activation format quantize `out` again, as [`Builder::product`] does.
    #[allow(clippy::too_many_arguments)] // the norm's arguments, and what comes next
    pub fn norm_input(
        &mut self,
        x: &wgpu::Buffer,
        add: Option<Residual<'_>>,
        w: &wgpu::Buffer,
        out: &wgpu::Buffer,
        n: usize,
        tokens: usize,
        eps: f32,
        first: Format,
    ) -> Result<Input> {
        let mut input = self.input(out, n, tokens);
        let quant = first
            .activation()
            .map(|format| (format, self.acts_buffer(&input)));
        let s = NormStep::fused(
            self.gpu,
            &self.shaders.norm,
            x,
            add,
            w,
            out,
            n,
            tokens,
            eps,
            quant.as_ref().map(|(f, b)| (*f, b)),
        )?;
        self.ops.push(Op::Norm(s));
        input.acts.extend(quant);
        Ok(input)
    }

    /// The feed-forward gate, `gate = act(gate) · up` over `tokens` rows of `n`, as the
    /// input of products of `first`'s format: computed by the quantizer as it reads it.
    pub fn gated_input(
        &mut self,
        gate: &wgpu::Buffer,
        up: &wgpu::Buffer,
        act: Gate<'_>,
        n: usize,
        tokens: usize,
        first: Format,
    ) -> Result<Input> {
        let format = activation(first)?;
        let mut input = self.input(gate, n, tokens);
        let b = self.acts_buffer(&input);
        let blocks = tokens * input.blocks;
        let q = QuantizeStep::gated(
            self.gpu,
            &self.shaders.quantize,
            act,
            format,
            gate,
            up,
            &b,
            blocks,
        )?;
        self.ops.push(Op::Quantize(q));
        input.acts.push((format, b));
        Ok(input)
    }

    /// A buffer for `input` quantized to `format` by an op of the caller's (attention's
    /// output, quantized by the attention shader), which products of that format then read.
    pub fn quantized_by_caller(&self, input: &mut Input, format: ActFormat) -> wgpu::Buffer {
        let b = self.acts_buffer(input);
        input.acts.push((format, b.clone()));
        b
    }

    /// The first `tokens` rows of `n` values in `x`, as products' input.
    pub fn input(&self, x: &wgpu::Buffer, n: usize, tokens: usize) -> Input {
        Input {
            x: x.clone(),
            tokens,
            blocks: n / 32,
            acts: Vec::new(),
        }
    }

    /// `out = m · input` for each of its tokens: the input quantized to `m`'s activation
    /// format first, unless an earlier product of the same input already has it; the
    /// matrix-vector product for one token, the tiled product for more.
    pub fn product(&mut self, m: &GpuMatrix, input: &mut Input, out: &wgpu::Buffer) -> Result<()> {
        self.product_into(m, input, &[out])
    }

    /// [`Builder::product`] for a stack of matrices ([`GpuMatrix::stacked`]): one dispatch,
    /// each matrix's rows into its own buffer of `outs`, in order.
    pub fn product_into(
        &mut self,
        m: &GpuMatrix,
        input: &mut Input,
        outs: &[&wgpu::Buffer],
    ) -> Result<()> {
        let acts = self.acts(m.format, input)?;
        let (gpu, shaders) = (self.gpu, self.shaders);
        let op = match input.tokens {
            1 => Op::Product(Product::into(gpu, &shaders.matvec, m, &acts, outs)?),
            n => Op::Tiled(Tiled::into(gpu, &shaders.matmul, m, &acts, outs, n)?),
        };
        self.ops.push(op);
        Ok(())
    }

    /// [`Builder::product`] for a matrix split over bindings: one dispatch per part, each
    /// writing its rows of `out`.
    pub fn product_split(
        &mut self,
        m: &SplitMatrix,
        input: &mut Input,
        out: &wgpu::Buffer,
    ) -> Result<()> {
        if input.tokens != 1 {
            return Err(Error::Input(format!(
                "a split matrix's product of {} tokens: the LM head takes one",
                input.tokens
            )));
        }
        let acts = self.acts(m.format, input)?;
        for (first, part) in &m.parts {
            let at = *first as u64 * 4;
            let p = Product::bound(self.gpu, &self.shaders.matvec, part, &acts, out, at)?;
            self.ops.push(Op::Product(p));
        }
        Ok(())
    }

    /// `input` quantized to the activation format that `format`'s products read: made by a
    /// new dispatch, or the one an earlier product of the same input made.
    fn acts(&mut self, format: Format, input: &mut Input) -> Result<wgpu::Buffer> {
        let format = activation(format)?;
        if let Some((_, b)) = input.acts.iter().find(|(f, _)| *f == format) {
            return Ok(b.clone());
        }
        let blocks = input.tokens * input.blocks;
        let b = self.acts_buffer(input);
        let q = QuantizeStep::new(
            self.gpu,
            &self.shaders.quantize,
            format,
            &input.x,
            &b,
            blocks,
        )?;
        self.ops.push(Op::Quantize(q));
        input.acts.push((format, b.clone()));
        Ok(b)
    }

    /// A buffer for `input` quantized: its blocks of 32, [`crate::acts::BLOCK_WORDS`] words each.
    fn acts_buffer(&self, input: &Input) -> wgpu::Buffer {
        let words = input.tokens * input.blocks * crate::acts::BLOCK_WORDS;
        self.gpu
            .storage("acts", words * 4, wgpu::BufferUsages::empty())
    }

    pub fn shader(
        &mut self,
        pipeline: &wgpu::ComputePipeline,
        buffers: &[&wgpu::Buffer],
        params: &[u32],
        groups: usize,
    ) -> Result<()> {
        self.grid(pipeline, buffers, params, (groups, 1))
    }

    /// [`Builder::shader`] over a grid of workgroups: `(x, tokens)`.
    pub fn grid(
        &mut self,
        pipeline: &wgpu::ComputePipeline,
        buffers: &[&wgpu::Buffer],
        params: &[u32],
        groups: (usize, usize),
    ) -> Result<()> {
        let mut d = Dispatch::grid(self.gpu, pipeline, buffers, params, groups)?;
        d.what = self.shaders.ops.name_of(pipeline);
        self.ops.push(Op::Shader(d));
        Ok(())
    }
}

/// The activation format `format`'s products read, or an error saying it has none.
fn activation(format: Format) -> Result<ActFormat> {
    format
        .activation()
        .ok_or_else(|| Error::Input(format!("{} has no quantized activations", format.name())))
}
