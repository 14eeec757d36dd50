//! Building a [`QMatrix`] by quantizing f32 weights, a row of blocks at a time.

use ch01_tensors::Tensor;
use rayon::prelude::*;

use super::{Bytes, Data, Format, QBlocks, QMatrix};
use crate::blocks::{BlockQ4_0, BlockQ4_1, BlockQ8_0, QK};
use crate::quantize::*;
use crate::search::{ScaleRule, search_q4_0, search_q4_1, search_q8_0};

impl QMatrix {
    // ANCHOR: quantize_matrix
    /// Quantizes the f32 matrix `w` (`(rows, cols)`) to `format`, rows in parallel.
    pub fn quantize(
        w: &[f32],
        rows: usize,
        cols: usize,
        format: Format,
        rule: ScaleRule,
    ) -> Result<QMatrix, String> {
        if w.len() != rows * cols {
            return Err(format!(
                "{} weights are not a ({rows}, {cols}) matrix",
                w.len()
            ));
        }
        if !Format::ALL.contains(&format) {
            return Err(format!(
                "{} is one of chapter 8's formats, read from files: this chapter does not quantize to it",
                format.name()
            ));
        }
        if format != Format::F32 && !cols.is_multiple_of(QK) {
            return Err(format!(
                "{} needs rows of whole blocks of {QK}; these have {cols}",
                format.name()
            ));
        }
        let data = match format.qblocks() {
            None if format == Format::F32 => {
                Data::F32(Tensor::from_vec(w.to_vec(), &[rows, cols]).map_err(|e| e.to_string())?)
            }
            // INT8, the one other format of Format::ALL
            None => {
                let mut q = vec![0u8; rows * cols];
                let mut scales = vec![0.0f32; rows];
                q.par_chunks_mut(cols)
                    .zip(scales.par_iter_mut())
                    .zip(w.par_chunks(cols))
                    .for_each(|((q_row, scale), w_row)| {
                        *scale = crate::int8::quantize_row(w_row, q_row)
                    });
                Data::Int8 {
                    q: Bytes::from_vec(q),
                    scales,
                }
            }
            Some(blocks) => {
                let row_bytes = format.row_bytes(cols);
                let mut bytes = vec![0u8; rows * row_bytes];
                bytes
                    .par_chunks_mut(row_bytes)
                    .zip(w.par_chunks(cols))
                    .for_each(|(out, w_row)| {
                        quantize_row(blocks, rule, w_row, out);
                    });
                Data::Blocks(Bytes::from_vec(bytes))
            }
        };
        Ok(QMatrix {
            format,
            rows,
            cols,
            data,
        })
    }
    // ANCHOR_END: quantize_matrix
}

/// Quantizes one row of `w` into `out` (that row's blocks) with the given scale rule.
fn quantize_row(format: QBlocks, rule: ScaleRule, w: &[f32], out: &mut [u8]) {
    let blocks = w.as_chunks::<QK>().0;
    match format {
        QBlocks::Q8_0 => {
            for (x, o) in blocks
                .iter()
                .zip(out.as_chunks_mut::<{ BlockQ8_0::BYTES }>().0)
            {
                let b = match rule {
                    ScaleRule::Absmax => quantize_q8_0(x),
                    ScaleRule::Search => search_q8_0(x),
                };
                b.write(o);
            }
        }
        QBlocks::Q4_0 => {
            for (x, o) in blocks
                .iter()
                .zip(out.as_chunks_mut::<{ BlockQ4_0::BYTES }>().0)
            {
                match rule {
                    ScaleRule::Absmax => quantize_q4_0(x, o),
                    ScaleRule::Search => search_q4_0(x, o),
                }
            }
        }
        QBlocks::Q4_1 => {
            for (x, o) in blocks
                .iter()
                .zip(out.as_chunks_mut::<{ BlockQ4_1::BYTES }>().0)
            {
                match rule {
                    ScaleRule::Absmax => quantize_q4_1(x, o),
                    ScaleRule::Search => search_q4_1(x, o),
                }
            }
        }
    }
}
