//! A matrix larger than one storage binding may be, split by rows over several buffers.
//!
//! A shader sees a buffer through a binding, and a device caps a binding's size
//! (`max_storage_buffer_binding_size`: 128 MiB on lavapipe, often 2 or 4 GiB on a discrete
//! GPU). Gemma-3's embedding, 262144 rows of 640 Q8_0 weights, is 170 MiB, and it is also
//! the output matrix. So a [`SplitMatrix`] is a stack of [`GpuMatrix`] parts, each of whole
//! rows and each within the limit, and a [`SplitProduct`] records one dispatch per part,
//! every part reading the same input and writing its own rows of one output buffer (bound
//! from an offset, which the device wants aligned: each part but the last has a multiple of
//! `min_storage_buffer_offset_alignment / 4` rows). Every row is the same shader on the same
//! blocks as in one buffer, so the result is bit for bit the unsplit product's.

use ch06_quantization::Format;

use crate::acts::{self, BLOCK_WORDS};
use crate::gpu::{Error, Gpu, Result};
use crate::matvec::{GpuMatrix, MatVec, Product};

/// A `rows × cols` matrix as parts of whole rows, each a [`GpuMatrix`] of its own.
pub struct SplitMatrix {
    pub format: Format,
    pub rows: usize,
    pub cols: usize,
    /// The parts, top to bottom, and the first row of each.
    pub parts: Vec<(usize, GpuMatrix)>,
}

impl SplitMatrix {
    /// Uploads `blocks` (raw, row after row) in as few parts as the device's largest storage
    /// binding allows.
    pub fn from_blocks(
        gpu: &Gpu,
        format: Format,
        rows: usize,
        cols: usize,
        blocks: &[u8],
    ) -> Result<SplitMatrix> {
        let limit = gpu.largest_binding();
        SplitMatrix::with_limit(gpu, format, rows, cols, blocks, limit)
    }

    // ANCHOR: split
    /// The same, with parts of at most `limit` bytes (a test forces a small one).
    pub fn with_limit(
        gpu: &Gpu,
        format: Format,
        rows: usize,
        cols: usize,
        blocks: &[u8],
        limit: u64,
    ) -> Result<SplitMatrix> {
        let row_bytes = format.row_bytes(cols);
        if rows == 0 || row_bytes == 0 || rows.checked_mul(row_bytes) != Some(blocks.len()) {
            return Err(Error::Input(format!(
                "a {rows}x{cols} {} matrix does not take {} bytes",
                format.name(),
                blocks.len()
            )));
        }
        // Rows a part may hold: its bytes plus GpuMatrix's padding (at most 8) within the
        // limit, in whole steps of the output's offset alignment.
        let step = (gpu.limits.min_storage_buffer_offset_alignment as usize / 4).max(1);
        let fit = usize::try_from(limit.saturating_sub(8)).unwrap_or(usize::MAX) / row_bytes;
        let per_part = if fit >= rows { rows } else { fit / step * step };
        if per_part == 0 {
            return Err(Error::Input(format!(
                "{step} rows of {row_bytes} bytes exceed the {limit}-byte limit of one binding"
            )));
        }
        let mut parts = Vec::new();
        for first in (0..rows).step_by(per_part) {
            let n = per_part.min(rows - first);
            let bytes = &blocks[first * row_bytes..(first + n) * row_bytes];
            parts.push((first, GpuMatrix::from_blocks(gpu, format, n, cols, bytes)?));
        }
        Ok(SplitMatrix {
            format,
            rows,
            cols,
            parts,
        })
    }
    // ANCHOR_END: split
}

// ANCHOR: split_product
/// A split matrix's product: one [`Product`] per part, all on one input and one output.
pub struct SplitProduct {
    pub acts: wgpu::Buffer, // (cols / 32) blocks × BLOCK_WORDS words
    pub out: wgpu::Buffer,  // (rows) f32, part after part
    pub rows: usize,
    parts: Vec<Product>,
}

impl SplitProduct {
    pub fn new(gpu: &Gpu, shaders: &MatVec, m: &SplitMatrix) -> Result<SplitProduct> {
        let acts = gpu.storage(
            "acts",
            m.cols / 32 * BLOCK_WORDS * 4,
            wgpu::BufferUsages::COPY_DST,
        );
        let out = gpu.storage("out", m.rows * 4, wgpu::BufferUsages::COPY_SRC);
        let parts = m
            .parts
            .iter()
            .map(|(first, part)| Product::bound(gpu, shaders, part, &acts, &out, *first as u64 * 4))
            .collect::<Result<Vec<_>>>()?;
        Ok(SplitProduct {
            acts,
            out,
            rows: m.rows,
            parts,
        })
    }

    /// Queues the quantized input: one buffer that every part reads.
    pub fn write_input(&self, gpu: &Gpu, words: &[u32]) -> Result<()> {
        self.parts[0].write_input(gpu, words)
    }

    /// Records one dispatch per part.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        for p in &self.parts {
            p.record(pass);
        }
    }
}
// ANCHOR_END: split_product

/// `W · x` for one vector with a split matrix, start to finish, as [`crate::matvec()`] does.
pub fn matvec_split(gpu: &Gpu, shaders: &MatVec, m: &SplitMatrix, x: &[f32]) -> Result<Vec<f32>> {
    if x.len() != m.cols {
        return Err(Error::Input(format!(
            "a vector of {} values for a matrix of {} columns",
            x.len(),
            m.cols
        )));
    }
    let activation = m.format.activation().expect("block formats have one");
    let product = SplitProduct::new(gpu, shaders, m)?;
    product.write_input(gpu, &acts::quantize(activation, x)?)?;
    gpu.submit_pass("the split product", |pass| product.record(pass))?;
    gpu.read_f32(&product.out, product.rows)
}
