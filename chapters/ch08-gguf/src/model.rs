//! Weights that stay in the mapped file.
//!
//! Chapter 6's `QModel` holds [`QMatrix`]es over [`Bytes`]; here those bytes are windows
//! on the mapping, so "loading" a matrix is checking its type and shape and recording where
//! it is. Two things are copied: the norm gains (f32 vectors, 141 kB in all), and the query
//! and key matrices, whose rows llama.cpp's converter reordered (see [`unpermute_rows`]).

use ch01_tensors::Tensor;
use ch06_quantization::{Bytes, Format, QMatrix};

use crate::error::{Error, Result};
use crate::file::GgufFile;
use crate::gguf::TensorInfo;
use crate::types::GgmlType;

/// The chapter 6 format that holds a ggml type's blocks in a [`QMatrix`], if there is one.
pub fn format_of(ty: GgmlType) -> Option<Format> {
    ty.format()
        .filter(|f| matches!(f, Format::F32 | Format::Q8_0 | Format::Q4_0 | Format::Q4_1))
}

// ANCHOR: unpermute
/// Undoes llama.cpp's reordering of a query or key matrix's rows.
///
/// Chapter 3 rotates each head's coordinate `i` with coordinate `i + head_dim/2` (the
/// Hugging Face pairing). llama.cpp rotates adjacent coordinates `2i` and `2i + 1`, so its
/// converter moves the rows of `W_q` and `W_k`: within each head, the row that produces
/// coordinate `j·head_dim/2 + i` (half `j`, 0 or 1) is stored at `2i + j`. Reading row
/// `2i + j` back into place `j·head_dim/2 + i` gives chapter 3's order. Rows are whole
/// runs of blocks, so this moves bytes and never touches a value.
pub fn unpermute_rows(data: &[u8], row_bytes: usize, head_dim: usize) -> Vec<u8> {
    let mut out = vec![0u8; data.len()];
    let half = head_dim / 2;
    for (r, dst) in out.chunks_exact_mut(row_bytes).enumerate() {
        let (head, within) = (r / head_dim, r % head_dim);
        let (j, i) = (within / half, within % half);
        let src = head * head_dim + 2 * i + j;
        dst.copy_from_slice(&data[src * row_bytes..(src + 1) * row_bytes]);
    }
    out
}
// ANCHOR_END: unpermute

/// How a matrix is taken from the file.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Rows {
    AsStored,
    /// Query or key: un-permute the rows of heads of this size.
    Unpermute(usize),
}

// ANCHOR: matrix
/// Tensor `t` as a `(rows, cols)` matrix: the shape is checked (ggml stores it as
/// `[cols, rows]`), then the blocks are used in place.
pub(crate) fn matrix(
    f: &GgufFile,
    t: &TensorInfo,
    rows: usize,
    cols: usize,
    how: Rows,
) -> Result<QMatrix> {
    let name = &t.name;
    check_dims(t, &[cols, rows])?;
    let format = format_of(t.ty).ok_or_else(|| Error::Tensor {
        name: name.into(),
        message: format!(
            "type {} is not one chapter 6 implements (F32, Q4_0, Q4_1, Q8_0)",
            t.ty
        ),
    })?;
    let bad = |message: String| Error::Tensor {
        name: name.into(),
        message,
    };
    if format == Format::F32 {
        let mut values = f.f32s(t)?;
        if let Rows::Unpermute(hd) = how {
            let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            values = unpermute_rows(&bytes, cols * 4, hd)
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
                .collect();
        }
        let tensor = Tensor::from_vec(values, &[rows, cols]).map_err(|e| bad(e.to_string()))?;
        return QMatrix::from_f32(tensor).map_err(bad);
    }
    let bytes = match how {
        Rows::AsStored => f.shared(t), // zero copy: a window on the mapping
        Rows::Unpermute(hd) => {
            Bytes::from_vec(unpermute_rows(f.data(t), format.row_bytes(cols), hd))
        }
    };
    QMatrix::from_blocks(format, rows, cols, bytes).map_err(bad)
}
// ANCHOR_END: matrix

pub(crate) fn check_dims(t: &TensorInfo, want: &[usize]) -> Result<()> {
    let want: Vec<u64> = want.iter().map(|&d| d as u64).collect();
    if t.dims != want {
        return Err(Error::Tensor {
            name: t.name.clone(),
            message: format!(
                "shape {:?} (ggml order), but the metadata implies {want:?}",
                t.dims
            ),
        });
    }
    Ok(())
}

pub(crate) fn vector(f: &GgufFile, name: &str, len: usize) -> Result<Vec<f32>> {
    let t = f.info(name)?;
    check_dims(t, &[len])?;
    f.f32s(t)
}

// ANCHOR: rows_of
/// Rows `rows` of the `(total, cols)` matrix `t`, described as a tensor of their own (a
/// window on the same bytes): how a fused matrix (Phi-3's Q, K and V in one) is cut into the
/// engine's separate ones. A matrix's rows are contiguous and all the same size, so the
/// part starts `rows.start` rows in.
pub(crate) fn rows_of(
    t: &TensorInfo,
    total: usize,
    cols: usize,
    rows: std::ops::Range<usize>,
    part: &str,
) -> Result<TensorInfo> {
    check_dims(t, &[cols, total])?;
    if total == 0 || !t.size.is_multiple_of(total as u64) {
        return Err(Error::Tensor {
            name: t.name.clone(),
            message: format!("{} bytes do not cut into {total} rows", t.size),
        });
    }
    let row_bytes = t.size / total as u64;
    Ok(TensorInfo {
        name: format!("{} ({part})", t.name),
        dims: vec![cols as u64, rows.len() as u64],
        ty: t.ty,
        offset: t.offset + rows.start as u64 * row_bytes,
        size: rows.len() as u64 * row_bytes,
    })
}
// ANCHOR_END: rows_of

/// Undoes llama.cpp's Q/K row order in a bias vector (one value a row).
pub(crate) fn unpermute_values(v: &[f32], head_dim: usize) -> Vec<f32> {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    unpermute_rows(&bytes, 4, head_dim)
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Phi-3's `attn_qkv` of (q + 2·kv) rows: the K part starts q rows in, and is kv rows long,
    /// whatever the bytes per row.
    #[test]
    fn a_fused_matrix_cuts_into_whole_rows() {
        let (cols, q, kv) = (64, 8, 4);
        let fused = TensorInfo {
            name: "blk.0.attn_qkv.weight".into(),
            dims: vec![cols as u64, (q + 2 * kv) as u64],
            ty: GgmlType::Q8_0,
            offset: 1024,
            size: ((q + 2 * kv) * 68) as u64, // Q8_0: 64 values are two blocks of 34 bytes
        };
        let k = rows_of(&fused, q + 2 * kv, cols, q..q + kv, "K").unwrap();
        assert_eq!(k.dims, [cols as u64, kv as u64], "K is (kv, cols)");
        assert_eq!(
            k.offset,
            1024 + (q * 68) as u64,
            "K starts after Q's {q} rows of 68 bytes"
        );
        assert_eq!(k.size, (kv * 68) as u64, "K is {kv} rows of 68 bytes");
        assert!(
            rows_of(&fused, q + 2 * kv + 1, cols, 0..q, "Q").is_err(),
            "a row count the shape does not have is refused"
        );
    }

    /// A Llama file's Q and K biases are in the converter's row order, like the rows: value
    /// `2i + j` of a head goes back to `j·head_dim/2 + i`.
    #[test]
    fn biases_move_with_their_rows() {
        let stored = [0.0, 10.0, 1.0, 11.0, 100.0, 110.0, 101.0, 111.0]; // two heads of 4
        assert_eq!(
            unpermute_values(&stored, 4),
            [0.0, 1.0, 10.0, 11.0, 100.0, 101.0, 110.0, 111.0],
            "each head's first half is its even values, its second half its odd ones"
        );
    }
}
