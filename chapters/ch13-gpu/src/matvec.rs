//! The decode product `y = W · x` on the GPU: a weight matrix uploaded as the file's raw
//! blocks ([`GpuMatrix`]), the shaders that multiply it by one quantized vector
//! ([`MatVec`]), and a [`Product`] that binds one matrix, one input and one output so it
//! can be recorded into a command encoder as many times as wanted.

use ch06_quantization::Format;
use ch08_gguf::TensorInfo;

use crate::acts::{self, BLOCK_WORDS};
use crate::gpu::{Error, Gpu, Result};

/// How a product's lanes get their blocks: each lane straight from storage
/// (`shaders/direct.wgsl`), or the workgroup's rows a step at a time through workgroup
/// memory, loaded together so that neighbouring invocations load neighbouring words
/// (`shaders/staged.wgsl`). The same blocks in the same order either way: the same bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reading {
    Direct,
    Staged,
}

/// How a product's work is laid out: how its lanes read, and how many rows each lane
/// takes (`ROWS_EACH` in the shaders), all of a lane's rows sharing the activation blocks
/// it reads. A workgroup takes four groups of lanes, so 4 × `rows_each` rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub reading: Reading,
    pub rows_each: u32,
}

/// The environment variable that picks a [`Layout`] for the reductions that add a tree,
/// `staged-1`, `staged-2`, or `direct-` and 1, 2, 4 or 8; `tuned` tries [`CANDIDATES`] on
/// any adapter (unset or empty: the adapter's own, [`Layout::for_gpu`], tried against the
/// others on a GPU, [`Layout::tuning`]).
pub const LAYOUT_VAR: &str = "LLM_BOOK_GPU_LAYOUT";

/// The layouts a model's decode step is timed with when it is opened on a GPU
/// (`tune.rs`), the adapter's own first.
pub const CANDIDATES: [Layout; 6] = [
    Layout::GPU,
    Layout {
        reading: Reading::Staged,
        rows_each: 1,
    },
    Layout {
        reading: Reading::Direct,
        rows_each: 1,
    },
    Layout::CPU,
    Layout {
        reading: Reading::Direct,
        rows_each: 4,
    },
    Layout {
        reading: Reading::Direct,
        rows_each: 8,
    },
];

impl Layout {
    /// What the engine uses with a tree reduction on a GPU: staged, two rows a lane.
    pub const GPU: Layout = Layout {
        reading: Reading::Staged,
        rows_each: 2,
    };
    /// What it uses on a driver that runs on the CPU (lavapipe): reading directly, two rows
    /// a lane. There a workgroup's invocations are a few threads' SIMD lanes, a load is
    /// cached like any other (no line to share out), and every barrier switches each of those
    /// threads out and in: staged, the products took about three times as long on this
    /// book's Xeon.
    pub const CPU: Layout = Layout {
        reading: Reading::Direct,
        rows_each: 2,
    };
    /// The in-order reduction's: its workgroup memory holds one row's terms a group of lanes.
    pub const IN_ORDER: Layout = Layout {
        reading: Reading::Direct,
        rows_each: 1,
    };

    /// The layout for `reduction` on `gpu`: the in-order one's, or [`Layout::GPU`] or
    /// [`Layout::CPU`] by the adapter's kind, or the one `LLM_BOOK_GPU_LAYOUT` names (an
    /// error if it names none).
    pub fn for_gpu(gpu: &Gpu, reduction: Reduction) -> Result<Layout> {
        if reduction == Reduction::InOrder {
            return Ok(Layout::IN_ORDER);
        }
        let own = match gpu.info.device_type == wgpu::DeviceType::Cpu {
            true => Layout::CPU,
            false => Layout::GPU,
        };
        match std::env::var(LAYOUT_VAR).as_deref() {
            Err(_) | Ok("") | Ok("tuned") => Ok(own),
            Ok(v) => Layout::parse(v).ok_or_else(|| {
                Error::Input(format!(
                    "{LAYOUT_VAR}={v:?}: staged-1, staged-2, direct-1, direct-2, direct-4, \
                     direct-8 or tuned (unset: this adapter's own, {})",
                    own.name()
                ))
            }),
        }
    }

    /// Whether a model opened for `reduction` on `gpu` times its step with each of
    /// [`CANDIDATES`] and keeps the fastest: on a GPU (not a driver on the CPU) with a
    /// reduction that adds a tree and no layout named in `LLM_BOOK_GPU_LAYOUT`, or anywhere
    /// with `LLM_BOOK_GPU_LAYOUT=tuned`. An error where the variable names no layout.
    pub fn tuning(gpu: &Gpu, reduction: Reduction) -> Result<bool> {
        Layout::for_gpu(gpu, reduction)?;
        Ok(reduction != Reduction::InOrder
            && match std::env::var(LAYOUT_VAR).as_deref() {
                Ok("tuned") => true,
                Err(_) | Ok("") => gpu.info.device_type != wgpu::DeviceType::Cpu,
                Ok(_) => false,
            })
    }

    fn parse(v: &str) -> Option<Layout> {
        let (reading, n) = v.split_once('-')?;
        let reading = match reading {
            "direct" => Reading::Direct,
            "staged" => Reading::Staged,
            _ => return None,
        };
        let layout = Layout {
            reading,
            rows_each: n.parse().ok()?,
        };
        layout.fits().then_some(layout)
    }

    /// Rows a lane: 1, 2, 4 or 8 reading directly; staged, 1 or 2 (a tile of 8 rows of 32
    /// Q8_0 blocks and their activations is most of the 16 KiB of workgroup memory every
    /// adapter has).
    fn fits(self) -> bool {
        match self.reading {
            Reading::Direct => [1, 2, 4, 8].contains(&self.rows_each),
            Reading::Staged => [1, 2].contains(&self.rows_each),
        }
    }

    /// `staged-2`, `direct-1`, …: as `LLM_BOOK_GPU_LAYOUT` takes it.
    pub fn name(self) -> String {
        let reading = match self.reading {
            Reading::Direct => "direct",
            Reading::Staged => "staged",
        };
        format!("{reading}-{}", self.rows_each)
    }
}

/// How a workgroup adds its lanes' sums: through workgroup memory, which every adapter has,
/// or with subgroup operations, where the adapter has them; or, for the CPU's bits, each
/// row's terms (blocks; the K-quants' super-blocks) one after another as the CPU adds them
/// (`InOrder`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduction {
    Workgroup,
    Subgroup,
    InOrder,
}

/// The environment variable that picks a reduction by its name: `workgroup`, `subgroup` or
/// `in-order` (unset or empty: the adapter's own, [`Reduction::for_gpu`]).
pub const REDUCTION_VAR: &str = "LLM_BOOK_GPU_REDUCTION";

/// The most terms a row may have under [`Reduction::InOrder`] (`MOST_TERMS` in
/// `shaders/reduce_in_order.wgsl`: they fill 16 KiB of workgroup memory). A term is what the
/// CPU rounds and adds: a block of 32, or a K-quant's super-block of 256.
pub const IN_ORDER_MOST_TERMS: usize = 1024;

impl Reduction {
    /// Subgroups if the device has them (in subgroups of at least 4, which the shader's
    /// table of subgroup totals assumes), else workgroup memory; or the one
    /// `LLM_BOOK_GPU_REDUCTION` names (`workgroup`, `subgroup`, or `in-order`: the CPU's
    /// order, [`Reduction::InOrder`]). Another value is an error, not a quiet default.
    pub fn for_gpu(gpu: &Gpu) -> Result<Reduction> {
        let own = if gpu.found.subgroups && gpu.info.subgroup_min_size >= 4 {
            Reduction::Subgroup
        } else {
            Reduction::Workgroup
        };
        match std::env::var(REDUCTION_VAR).as_deref() {
            Err(_) | Ok("") => Ok(own),
            Ok("workgroup") => Ok(Reduction::Workgroup),
            Ok("subgroup") => Ok(Reduction::Subgroup),
            Ok("in-order") => Ok(Reduction::InOrder),
            Ok(other) => Err(Error::Input(format!(
                "{REDUCTION_VAR}={other:?}: the reductions are workgroup, subgroup and in-order \
                 (unset: this adapter's own, {})",
                own.name()
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Reduction::Workgroup => "workgroup",
            Reduction::Subgroup => "subgroup",
            Reduction::InOrder => "in order",
        }
    }
}

// ANCHOR: sources
/// The WGSL of a format's product: its `block_dot` and `term`, the shared bindings, the
/// layout's way of reading and its lane sums, and the reduction's `main`. `None` for a
/// format with no shader yet.
pub fn source(format: Format, reduction: Reduction, layout: Layout) -> Option<String> {
    source_for(format, reduction, layout, false)
}

/// [`source`], with `whole_subgroups` the subgroup reduction of adapters whose subgroups
/// are the groups of lanes ([`subgroups_are_groups`]).
fn source_for(
    format: Format,
    reduction: Reduction,
    layout: Layout,
    whole_subgroups: bool,
) -> Option<String> {
    let block = block_source(format)?;
    let rows_each = layout.rows_each;
    let common = include_str!("../shaders/matvec.wgsl");
    let reading = match layout.reading {
        Reading::Direct => include_str!("../shaders/direct.wgsl").to_string(),
        Reading::Staged => format!(
            "const STEP_BYTES: u32 = {}u;\n{}",
            format.row_bytes(32 * STEP),
            include_str!("../shaders/staged.wgsl")
        ),
    };
    let reduce = match reduction {
        Reduction::InOrder => include_str!("../shaders/reduce_in_order.wgsl"),
        Reduction::Workgroup => include_str!("../shaders/reduce_workgroup.wgsl"),
        Reduction::Subgroup if whole_subgroups => {
            include_str!("../shaders/reduce_subgroup_32.wgsl")
        }
        Reduction::Subgroup => include_str!("../shaders/reduce_subgroup.wgsl"),
    };
    Some(format!(
        "{block}\nconst ROWS_EACH: u32 = {rows_each}u;\n{common}\n{reading}\n{reduce}"
    ))
}

/// Blocks of a row a staged product takes a step (`STEP` in `shaders/staged.wgsl`: one a
/// lane).
pub const STEP: usize = 32;
// ANCHOR_END: sources

/// A format's file of WGSL, after `shaders/halves.wgsl`: its `block_dot` and `term`, which
/// the matrix-vector product and the tiled one (`matmul.rs`) both put in front of their own
/// `main`. `None` for a format with no shader yet.
pub fn block_source(format: Format) -> Option<String> {
    let file = match format {
        Format::Q4_0 => include_str!("../shaders/q4_0.wgsl"),
        Format::Q8_0 => include_str!("../shaders/q8_0.wgsl"),
        Format::Q4_1 => include_str!("../shaders/q4_1.wgsl"),
        Format::Q5_0 => include_str!("../shaders/q5_0.wgsl"),
        Format::Q4_K => include_str!("../shaders/q4_k.wgsl"),
        Format::Q6_K => include_str!("../shaders/q6_k.wgsl"),
        Format::F32 | Format::Int8 => return None,
    };
    let halves = include_str!("../shaders/halves.wgsl");
    Some(format!("{halves}\n{file}"))
}

/// The pipeline compiled for `format` among `pipelines`, or an error naming what has none.
pub fn pipeline_for<'p>(
    pipelines: &'p [(Format, wgpu::ComputePipeline)],
    format: Format,
    what: &str,
) -> Result<&'p wgpu::ComputePipeline> {
    pipelines
        .iter()
        .find(|(f, _)| *f == format)
        .map(|(_, p)| p)
        .ok_or_else(|| Error::Input(format!("no {what} for {}", format.name())))
}

/// The formats with a product shader.
pub const FORMATS: [Format; 6] = [
    Format::Q4_0,
    Format::Q8_0,
    Format::Q4_1,
    Format::Q5_0,
    Format::Q4_K,
    Format::Q6_K,
];

/// A weight matrix on the GPU: the file's blocks, row after row, as they were; or a stack
/// of up to [`MOST_PARTS`] matrices of one format and width, one after another, which one
/// dispatch multiplies by their shared input, each into its own output.
pub struct GpuMatrix {
    pub format: Format,
    pub rows: usize,
    pub cols: usize,
    /// Bytes of weights (without the padding).
    pub bytes: usize,
    pub buffer: wgpu::Buffer,
    /// The rows of each matrix in the stack, in order: `[rows]` for one matrix.
    pub parts: Vec<usize>,
}

/// The most matrices a stack holds: the product shaders' outputs (`out`, `out1`, `out2`).
pub const MOST_PARTS: usize = 3;

impl GpuMatrix {
    /// Uploads `rows × cols` weights of `format` held as raw blocks in `blocks`.
    pub fn from_blocks(
        gpu: &Gpu,
        format: Format,
        rows: usize,
        cols: usize,
        blocks: &[u8],
    ) -> Result<GpuMatrix> {
        GpuMatrix::stacked(gpu, format, cols, &[(rows, blocks)])
    }

    /// Uploads matrices of `format`, `cols` wide, each `(rows, raw blocks)`, one after
    /// another in one buffer: checked against their shapes and the device's limits, padded
    /// to whole words plus one (the shader reads a word past an unaligned last block's end),
    /// and copied once, as they are, into the buffer's memory.
    pub fn stacked(
        gpu: &Gpu,
        format: Format,
        cols: usize,
        parts: &[(usize, &[u8])],
    ) -> Result<GpuMatrix> {
        if !FORMATS.contains(&format) {
            return Err(Error::Input(format!("no GPU shader for {}", format.name())));
        }
        if parts.is_empty() || parts.len() > MOST_PARTS {
            return Err(Error::Input(format!(
                "a stack of {} matrices: 1 to {MOST_PARTS}",
                parts.len()
            )));
        }
        for &(rows, blocks) in parts {
            if rows == 0 || cols == 0 || !cols.is_multiple_of(format.block_values()) {
                return Err(Error::Input(format!(
                    "a {rows}x{cols} matrix is not whole {} blocks",
                    format.name()
                )));
            }
            let want = rows.checked_mul(format.row_bytes(cols));
            if want != Some(blocks.len()) {
                return Err(Error::Input(format!(
                    "a {rows}x{cols} {} matrix takes {} bytes, not {}",
                    format.name(),
                    want.map_or("too many".to_string(), |w| w.to_string()),
                    blocks.len()
                )));
            }
        }
        let rows: usize = parts.iter().map(|(r, _)| r).sum();
        let bytes: usize = parts.iter().map(|(_, b)| b.len()).sum();
        // ANCHOR: upload
        let padded = padded_bytes(bytes);
        let limit = gpu.largest_binding();
        if padded as u64 > limit {
            return Err(Error::Input(format!(
                "{padded} bytes of weights exceed this GPU's largest storage binding ({limit})"
            )));
        }
        // written straight into the new buffer's mapping: no padded copy on the host first
        let buffer = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("weights"),
            size: padded as u64,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: true,
        });
        {
            let mut mapped = buffer
                .slice(..)
                .get_mapped_range_mut()
                .map_err(|e| Error::Gpu(format!("mapping the weights' buffer: {e}")))?;
            let mut at = 0;
            for (_, blocks) in parts {
                mapped.slice(at..at + blocks.len()).copy_from_slice(blocks);
                at += blocks.len();
            }
            let tail = padded - bytes; // 4 to 7 bytes
            mapped.slice(bytes..).copy_from_slice(&[0; 8][..tail]);
        }
        buffer.unmap();
        Ok(GpuMatrix {
            format,
            rows,
            cols,
            bytes,
            buffer,
            parts: parts.iter().map(|(r, _)| *r).collect(),
        })
    }
    // ANCHOR_END: upload

    /// Its format and shape, as a profile names it: "q4_0 576x1536".
    pub fn what(&self) -> String {
        format!("{} {}x{}", self.format.name(), self.rows, self.cols)
    }

    /// The first rows of the stack's second and third matrices, as the shaders' `split1`
    /// and `split2` take them (`rows` where there is none).
    pub fn splits(&self) -> Result<[u32; 2]> {
        let first = |i: usize| match i < self.parts.len() {
            true => self.parts[..i].iter().sum(),
            false => self.rows,
        };
        let u = |n: usize| u32::try_from(n).map_err(|_| Error::Input("too many rows".into()));
        Ok([u(first(1))?, u(first(2))?])
    }

    /// Checks that `outs` are one output for each matrix of the stack, each at least
    /// `tokens` of its rows.
    pub fn check_outs(&self, outs: &[&wgpu::Buffer], tokens: usize) -> Result<()> {
        if outs.len() != self.parts.len() {
            return Err(Error::Input(format!(
                "a stack of {} matrices with {} outputs",
                self.parts.len(),
                outs.len()
            )));
        }
        for (rows, out) in self.parts.iter().zip(outs) {
            let need = (rows * tokens * 4) as u64;
            if out.size() < need {
                return Err(Error::Input(format!(
                    "a product's output of {} bytes for {tokens} tokens of {rows} rows",
                    out.size()
                )));
            }
        }
        Ok(())
    }

    /// Uploads a tensor of chapter 8's file: `info` from its header, `data` its bytes
    /// (`GgufFile::data`).
    pub fn from_tensor(gpu: &Gpu, info: &TensorInfo, data: &[u8]) -> Result<GpuMatrix> {
        let [cols, rows] = info.dims[..] else {
            return Err(Error::Input(format!(
                "{} has {} dimensions, not 2",
                info.name,
                info.dims.len()
            )));
        };
        let format = info.ty.format().ok_or_else(|| {
            Error::Input(format!(
                "{}: type {} has no format",
                info.name,
                info.ty.name()
            ))
        })?;
        let (Ok(rows), Ok(cols)) = (usize::try_from(rows), usize::try_from(cols)) else {
            return Err(Error::Input(format!("{}: shape too large", info.name)));
        };
        GpuMatrix::from_blocks(gpu, format, rows, cols, data)
            .map_err(|e| Error::Input(format!("{}: {e}", info.name)))
    }
}

/// The compiled product pipelines, one per format in [`FORMATS`]: made once.
pub struct MatVec {
    pub reduction: Reduction,
    pub layout: Layout,
    /// The subgroup reduction as one `subgroupAdd` a row (`reduce_subgroup_32.wgsl`), where
    /// the adapter's subgroups are the groups of lanes (`subgroups_are_groups`).
    pub whole_subgroups: bool,
    pipelines: Vec<(Format, wgpu::ComputePipeline)>,
    /// Bound as `out1` and `out2` where a product has fewer matrices: never written.
    spare: [wgpu::Buffer; 2],
}

impl MatVec {
    /// Compiles every format's shader with the reduction [`Reduction::for_gpu`] picks.
    pub fn new(gpu: &Gpu) -> Result<MatVec> {
        MatVec::with(gpu, Reduction::for_gpu(gpu)?)
    }

    /// Compiles every format's shader with `reduction`; an error names the format and says
    /// what failed.
    pub fn with(gpu: &Gpu, reduction: Reduction) -> Result<MatVec> {
        MatVec::with_layout(gpu, reduction, Layout::for_gpu(gpu, reduction)?)
    }

    /// Compiles every format's shader with `reduction` and `layout`; an error names what
    /// does not fit (the in-order reduction takes [`Layout::IN_ORDER`] only).
    pub fn with_layout(gpu: &Gpu, reduction: Reduction, layout: Layout) -> Result<MatVec> {
        MatVec::for_formats(gpu, reduction, layout, &FORMATS)
    }

    /// [`MatVec::with_layout`] for `formats` only (a model's, [`GpuModel::formats`]): a
    /// product of another format is refused by name.
    ///
    /// [`GpuModel::formats`]: crate::model::GpuModel::formats
    pub fn for_formats(
        gpu: &Gpu,
        reduction: Reduction,
        layout: Layout,
        formats: &[Format],
    ) -> Result<MatVec> {
        let whole = reduction == Reduction::Subgroup && subgroups_are_groups(gpu);
        MatVec::build(gpu, reduction, layout, formats, whole)
    }

    fn build(
        gpu: &Gpu,
        reduction: Reduction,
        layout: Layout,
        formats: &[Format],
        whole_subgroups: bool,
    ) -> Result<MatVec> {
        if !layout.fits() || (reduction == Reduction::InOrder && layout != Layout::IN_ORDER) {
            return Err(Error::Input(format!(
                "the {} reduction with the layout {}: staged, 1 or 2 rows a lane; direct, 1, \
                 2, 4 or 8; in the CPU's order, direct-1",
                reduction.name(),
                layout.name()
            )));
        }
        if reduction == Reduction::Subgroup && !gpu.found.subgroups {
            return Err(Error::Input(format!(
                "{} has no subgroup operations",
                gpu.info.name
            )));
        }
        let mut pipelines = Vec::new();
        for &format in formats {
            let wgsl = source_for(format, reduction, layout, whole_subgroups)
                .ok_or_else(|| Error::Input(format!("no GPU shader for {}", format.name())))?;
            let label = format!(
                "{} ({} reduction{}, {})",
                format.name(),
                reduction.name(),
                if whole_subgroups {
                    " of whole subgroups"
                } else {
                    ""
                },
                layout.name()
            );
            pipelines.push((format, gpu.pipeline(&label, &wgsl)?));
        }
        Ok(MatVec {
            reduction,
            layout,
            whole_subgroups,
            pipelines,
            spare: spare_outputs(gpu),
        })
    }

    /// The reduction's name, "subgroup, one add a row" where it is `reduce_subgroup_32.wgsl`.
    pub fn reduction_name(&self) -> &'static str {
        match self.whole_subgroups {
            true => "subgroup, one add a row",
            false => self.reduction.name(),
        }
    }

    /// Refuses a row longer than the in-order reduction's workgroup memory holds, under it,
    /// and one whose bytes a staged product's byte counts could not hold.
    fn check_row(&self, m: &GpuMatrix) -> Result<()> {
        let step_bytes = m.format.row_bytes(32 * STEP) as u64;
        if self.layout.reading == Reading::Staged
            && (m.cols as u64 / 32) * step_bytes > u32::MAX as u64
        {
            return Err(Error::Input(format!(
                "rows of {} columns are too long",
                m.cols
            )));
        }
        let terms = m.cols / m.format.block_values();
        if self.reduction == Reduction::InOrder && terms > IN_ORDER_MOST_TERMS {
            return Err(Error::Input(format!(
                "rows of {} columns: the in-order product adds at most {} {} blocks a row",
                m.cols,
                IN_ORDER_MOST_TERMS,
                m.format.name()
            )));
        }
        Ok(())
    }

    fn pipeline(&self, format: Format) -> Result<&wgpu::ComputePipeline> {
        pipeline_for(&self.pipelines, format, "GPU shader")
    }

    /// The workgroups a product of `rows` rows takes: four groups of lanes to one, each
    /// group `rows_each` rows (folded into 2-D past the per-dimension limit).
    fn groups(&self, gpu: &Gpu, rows: u32) -> (u32, u32) {
        gpu.grid(rows.div_ceil(4 * self.layout.rows_each))
    }
}

/// Whether this adapter's subgroups are exactly the product's groups of lanes: 32
/// invocations (its only subgroup size), a workgroup's 32 consecutive ones, so that a row's
/// total is one `subgroupAdd`. Vulkan does not promise how invocations form subgroups, so
/// it is checked, once for the device (how subgroups form does not depend on the layout):
/// [`whole_subgroups_agree`].
fn subgroups_are_groups(gpu: &Gpu) -> bool {
    let i = &gpu.info;
    gpu.found.subgroups
        && i.subgroup_min_size == 32
        && i.subgroup_max_size == 32
        && *gpu
            .whole_subgroups
            .get_or_init(|| whole_subgroups_agree(gpu, Layout::CPU).unwrap_or(false))
}

/// Random Q8_0 rows through `reduce_subgroup_32.wgsl` and through the general subgroup
/// reduction, with `layout`: whether every row's sum has the same bits. (On an adapter whose
/// subgroups are not the groups of 32, the first adds the wrong lanes: false.)
pub fn whole_subgroups_agree(gpu: &Gpu, layout: Layout) -> Result<bool> {
    let (rows, cols) = (67, 32 * 40);
    let mut rng = crate::random::Rng::new(32);
    let blocks = crate::random::blocks(Format::Q8_0, rows, cols, &mut rng);
    let m = GpuMatrix::from_blocks(gpu, Format::Q8_0, rows, cols, &blocks)?;
    let x: Vec<f32> = (0..cols).map(|_| rng.signed()).collect();
    let mut sums = Vec::new();
    for whole in [false, true] {
        let shaders = MatVec::build(gpu, Reduction::Subgroup, layout, &[Format::Q8_0], whole)?;
        sums.push(matvec(gpu, &shaders, &m, &x)?);
    }
    Ok(sums[0].len() == rows
        && sums[0]
            .iter()
            .zip(&sums[1])
            .all(|(a, b)| a.to_bits() == b.to_bits()))
}

// ANCHOR: product
/// One product bound and ready to record: `out[0..rows] = W · acts`, where `acts` holds the
/// quantized input ([`acts::quantize`], written with [`Product::write_input`]).
pub struct Product {
    /// The matrix's format and shape, for a profile: "q4_0 576x1536".
    pub what: String,
    pub acts: wgpu::Buffer, // (cols / 32) blocks × BLOCK_WORDS words
    pub out: wgpu::Buffer,  // (rows) f32
    bind_group: wgpu::BindGroup,
    pipeline: wgpu::ComputePipeline,
    groups: (u32, u32),
    rows: usize,
    blocks: usize,
}

impl Product {
    /// Binds `m` to a new input and a new output buffer.
    pub fn new(gpu: &Gpu, shaders: &MatVec, m: &GpuMatrix) -> Result<Product> {
        let blocks = m.cols / 32;
        let acts = gpu.storage(
            "acts",
            blocks * BLOCK_WORDS * 4,
            wgpu::BufferUsages::COPY_DST,
        );
        let out = gpu.storage("out", m.rows * 4, wgpu::BufferUsages::COPY_SRC);
        Product::between(gpu, shaders, m, &acts, &out)
    }
    // ANCHOR_END: product

    // ANCHOR: between
    /// Binds `m` to buffers a decode step already has: `acts` (its input, quantized on the
    /// GPU) and `out` (at least `rows` f32).
    pub fn between(
        gpu: &Gpu,
        shaders: &MatVec,
        m: &GpuMatrix,
        acts: &wgpu::Buffer,
        out: &wgpu::Buffer,
    ) -> Result<Product> {
        Product::into(gpu, shaders, m, acts, &[out])
    }

    /// [`Product::between`] for a stack of matrices: `outs`, one for each, in order.
    pub fn into(
        gpu: &Gpu,
        shaders: &MatVec,
        m: &GpuMatrix,
        acts: &wgpu::Buffer,
        outs: &[&wgpu::Buffer],
    ) -> Result<Product> {
        shaders.check_row(m)?;
        m.check_outs(outs, 1)?;
        let pipeline = shaders.pipeline(m.format)?.clone();
        let blocks = m.cols / 32;
        let rows = u32::try_from(m.rows).map_err(|_| Error::Input("too many rows".into()))?;
        if acts.size() < (blocks * BLOCK_WORDS * 4) as u64 {
            return Err(Error::Input(format!(
                "a {}x{} product's input of {} bytes is too small",
                m.rows,
                m.cols,
                acts.size()
            )));
        }
        let groups = shaders.groups(gpu, rows);
        let [split1, split2] = m.splits()?;
        let words = [rows, blocks as u32, groups.0, 0, split1, split2, 0, 0];
        let uniform = gpu.uniform(&words);
        let [out, out1, out2] = three_outputs(outs, &shaders.spare);
        let buffers = [&m.buffer, acts, out, &uniform, out1, out2];
        let bind_group = gpu.bind(&pipeline, &buffers)?;
        Ok(Product {
            what: m.what(),
            acts: acts.clone(),
            out: outs[0].clone(),
            bind_group,
            pipeline,
            groups,
            rows: m.rows,
            blocks,
        })
    }
    // ANCHOR_END: between

    /// Binds `m` to the input `acts` and to `m.rows` f32 of `out` from byte `out_at` on
    /// (a multiple of the device's storage offset alignment): how the parts of a
    /// [`SplitMatrix`](crate::split::SplitMatrix) share one input and one output.
    pub fn bound(
        gpu: &Gpu,
        shaders: &MatVec,
        m: &GpuMatrix,
        acts: &wgpu::Buffer,
        out: &wgpu::Buffer,
        out_at: u64,
    ) -> Result<Product> {
        shaders.check_row(m)?;
        if m.parts.len() != 1 {
            return Err(Error::Input(
                "a part of a split matrix is one matrix".into(),
            ));
        }
        let pipeline = shaders.pipeline(m.format)?.clone();
        let blocks = m.cols / 32;
        let rows = u32::try_from(m.rows).map_err(|_| Error::Input("too many rows".into()))?;
        let out_bytes = u64::from(rows) * 4;
        if acts.size() < (blocks * BLOCK_WORDS * 4) as u64 || out.size() < out_at + out_bytes {
            return Err(Error::Input(format!(
                "a {}x{} product's buffers are too small",
                m.rows, m.cols
            )));
        }
        let groups = shaders.groups(gpu, rows);
        let [split1, split2] = m.splits()?; // `rows`: one matrix
        let uniform = gpu.uniform(&[rows, blocks as u32, groups.0, 0, split1, split2, 0, 0]);
        fn whole(binding: u32, b: &wgpu::Buffer) -> wgpu::BindGroupEntry<'_> {
            wgpu::BindGroupEntry {
                binding,
                resource: b.as_entire_binding(),
            }
        }
        let out_range = wgpu::BindGroupEntry {
            binding: 2,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: out,
                offset: out_at,
                size: wgpu::BufferSize::new(out_bytes),
            }),
        };
        let entries = [
            whole(0, &m.buffer),
            whole(1, acts),
            out_range,
            whole(3, &uniform),
            whole(4, &shaders.spare[0]),
            whole(5, &shaders.spare[1]),
        ];
        let bind_group = gpu.checked("binding a product's buffers", || {
            gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: None,
                layout: &pipeline.get_bind_group_layout(0),
                entries: &entries,
            })
        })?;
        Ok(Product {
            what: m.what(),
            acts: acts.clone(),
            out: out.clone(),
            bind_group,
            pipeline,
            groups,
            rows: m.rows,
            blocks,
        })
    }

    /// Queues the quantized input (`acts::quantize`'s words) for the next submission.
    pub fn write_input(&self, gpu: &Gpu, words: &[u32]) -> Result<()> {
        if words.len() != self.blocks * BLOCK_WORDS {
            return Err(Error::Input(format!(
                "the input has {} blocks, the matrix's rows {}",
                words.len() / BLOCK_WORDS,
                self.blocks
            )));
        }
        gpu.queue
            .write_buffer(&self.acts, 0, &words_to_bytes(words));
        Ok(())
    }

    // ANCHOR: record
    /// Records the product into `pass`: one pipeline, one bind group, one dispatch. A decode
    /// step records many of these into one pass and submits once.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind_group, &[]);
        pass.dispatch_workgroups(self.groups.0, self.groups.1, 1);
    }
    // ANCHOR_END: record
}

/// The two small buffers bound in place of the outputs a product does not have.
pub(crate) fn spare_outputs(gpu: &Gpu) -> [wgpu::Buffer; 2] {
    [0, 1].map(|_| gpu.storage("no output", 16, wgpu::BufferUsages::empty()))
}

/// A product's `out`, `out1` and `out2`: `outs` (one to three, as [`GpuMatrix::check_outs`]
/// checked), then `spare` for those it lacks.
pub(crate) fn three_outputs<'a>(
    outs: &[&'a wgpu::Buffer],
    spare: &'a [wgpu::Buffer; 2],
) -> [&'a wgpu::Buffer; 3] {
    [
        outs[0],
        outs.get(1).copied().unwrap_or(&spare[0]),
        outs.get(2).copied().unwrap_or(&spare[1]),
    ]
}

/// The bytes a matrix's buffer takes for `bytes` of blocks: whole words plus one (the
/// shader reads a word past an unaligned last block's end).
pub(crate) fn padded_bytes(bytes: usize) -> usize {
    (bytes.div_ceil(4) + 1) * 4
}

fn words_to_bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

// ANCHOR: matvec
/// `W · x` for one vector, start to finish: quantize `x` as the CPU engine would, upload it,
/// one dispatch, read the rows back. For tests and one-off products; a decode step keeps
/// its [`Product`]s and records them all into one submission.
pub fn matvec(gpu: &Gpu, shaders: &MatVec, m: &GpuMatrix, x: &[f32]) -> Result<Vec<f32>> {
    if x.len() != m.cols {
        return Err(Error::Input(format!(
            "a vector of {} values for a matrix of {} columns",
            x.len(),
            m.cols
        )));
    }
    let activation = m.format.activation().expect("block formats have one");
    let product = Product::new(gpu, shaders, m)?;
    product.write_input(gpu, &acts::quantize(activation, x)?)?;
    gpu.submit_pass("the product", |pass| product.record(pass))?;
    gpu.read_f32(&product.out, product.rows)
}
// ANCHOR_END: matvec
