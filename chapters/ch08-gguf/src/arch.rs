//! Both architectures from their files, into [`crate::engine::Model`].
//!
//! The tensor names are llama.cpp's (`blk.N.attn_q.weight`, …); Gemma-3 adds four norms per
//! layer. Which layers slide and which RoPE base each uses are llama.cpp's rules for
//! `gemma3`: layer `l` is a sliding-window layer unless `l % 6 == 5`, sliding layers rotate
//! with base 10 000 and the others with `gemma3.rope.freq_base` (1 000 000).

use std::sync::Arc;

use rayon::prelude::*;

use ch06_quantization::{Bytes, QMatrix};

use crate::config::config;
use crate::engine::{Family, Layer, LazyRope, Model};
use crate::error::{Error, Result};
use crate::file::GgufFile;
use crate::matrix::{KMatrix, Matrix, Packed, packed};
use crate::model::{Rows, check_dims, matrix, unpermute_rows, vector};
use crate::types::GgmlType;
use ch06_quantization::Format;
use ch07_simd_parallel::huge::Arena;

/// Tensor `name` as a `(rows, cols)` matrix of whatever supported format it is stored in.
fn any_matrix(f: &GgufFile, name: &str, rows: usize, cols: usize, how: Rows) -> Result<Matrix> {
    let t = f.info(name)?;
    let k = match t.ty.format() {
        Some(k @ (Format::Q5_0 | Format::Q4_K | Format::Q6_K)) => k,
        _ => return matrix(f, name, rows, cols, how).map(Matrix::Q),
    };
    check_dims(t, &[cols, rows])?;
    let (values, bytes) = (k.block_values(), k.block_bytes());
    let data = match how {
        // A Llama file's Q and K rows in chapter 3's order (a Q4_K_M file stores them in
        // Q4_K): whole rows move, as for chapter 6's formats. Rows that are not whole
        // blocks are left as stored for KMatrix::new to refuse.
        Rows::Unpermute(hd) if cols.is_multiple_of(values) => {
            Bytes::from_vec(unpermute_rows(f.data(t), cols / values * bytes, hd))
        }
        _ => f.shared(t), // zero copy: a window on the mapping
    };
    KMatrix::new(k, rows, cols, data)
        .map(Matrix::K)
        .map_err(|message| Error::Tensor {
            name: name.into(),
            message,
        })
}

// ANCHOR: packed_matrix
/// [`any_matrix`], with a Q4_0, Q4_1, Q5_0, Q4_K or Q6_K matrix interleaved eight rows at a time
/// ([`Packed`]) where this machine's kernels want that ([`crate::matrix::policy::packs`]); the
/// mapped pages it was copied from are then given back.
fn layer_matrix(
    f: &GgufFile,
    name: &str,
    rows: usize,
    cols: usize,
    how: Rows,
    arena: Option<&Arc<Arena>>,
) -> Result<Matrix> {
    let m = any_matrix(f, name, rows, cols, how)?;
    if !crate::matrix::policy::packs() {
        return Ok(m);
    }
    let format = match &m {
        Matrix::Q(q) => q.format(),
        Matrix::K(k) => k.format,
        Matrix::P(p) => p.format,
    };
    let format = Some(format).filter(|&f| packed::can_pack(f));
    let packed = format.and_then(|format| match &m {
        Matrix::Q(q) => {
            Packed::new_in(format, q.rows(), q.cols(), q.rows_bytes(0, q.rows()), arena)
        }
        Matrix::K(k) => Packed::new_in(format, k.rows, k.cols, k.bytes_all(), arena),
        Matrix::P(_) => None,
    });
    Ok(match packed {
        Some(p) => {
            drop(m);
            f.release(f.info(name)?);
            Matrix::P(p)
        }
        None => onto_huge_pages(f, name, m, arena)?,
    })
}
// ANCHOR_END: packed_matrix

// ANCHOR: onto_huge_pages
/// A quantized matrix that keeps the file's layout (Q8_0: the LM head, which no kernel wants
/// interleaved), copied onto the arena's huge pages, as the packed matrices are: a head
/// as large as Gemma-3's (178 of the 246 MB a decode step reads) streams with fewer TLB
/// misses from 2 MiB pages than from the mapping's 4 KiB ones. The copy goes a slice at a time
/// (on every thread: most of its time is the kernel zeroing the new pages), each slice's
/// mapped pages given back once it is copied, so the process never holds the matrix twice.
/// Anything else, or no arena, or a full one: `m` unchanged.
fn onto_huge_pages(
    f: &GgufFile,
    name: &str,
    m: Matrix,
    arena: Option<&Arc<Arena>>,
) -> Result<Matrix> {
    const SLICE: usize = 4 << 20;
    let (Some(arena), Matrix::Q(q)) = (arena, &m) else {
        return Ok(m);
    };
    if q.format() == Format::F32 {
        return Ok(m); // already this program's own, and not streamed by a decode step
    }
    let bytes = q.rows_bytes(0, q.rows());
    let Some(mut piece) = arena.take(bytes.len()) else {
        return Ok(m);
    };
    let t = f.info(name)?;
    let mapped = std::ptr::eq(bytes.as_ptr(), f.data(t).as_ptr()); // not a re-ordered copy
    piece
        .as_mut_slice()
        .par_chunks_mut(SLICE)
        .zip(bytes.par_chunks(SLICE))
        .enumerate()
        .for_each(|(i, (to, from))| {
            to.copy_from_slice(from);
            if mapped {
                f.release_part(t, i * SLICE..(i + 1) * SLICE);
            }
        });
    let len = bytes.len();
    let data = Bytes::slice_of(Arc::new(piece), 0, len).expect("the piece is the matrix's size");
    let copy = QMatrix::from_blocks(q.format(), q.rows(), q.cols(), data).map_err(|message| {
        Error::Tensor {
            name: name.into(),
            message,
        }
    })?;
    Ok(Matrix::Q(copy))
}
// ANCHOR_END: onto_huge_pages

/// Whether the chapter can run a tensor of this type.
pub fn supported(ty: GgmlType) -> bool {
    ty.format().is_some()
}

// ANCHOR: load_model
/// The model in `f`, of either architecture.
pub fn load_model(f: &GgufFile) -> Result<Model> {
    let g = &f.gguf;
    let cfg = config(g)?;
    let arch = g.str("general.architecture")?;
    let (dim, q_dim, kv_dim, ffn, hd) = (
        cfg.hidden_size,
        cfg.q_dim(),
        cfg.kv_dim(),
        cfg.intermediate_size,
        cfg.head_dim,
    );
    let gemma = arch == "gemma3";
    let (family, qk_rows) = if gemma {
        (Family::gemma3(dim), Rows::AsStored) // rotated in halves: stored as trained
    } else {
        (Family::llama(), Rows::Unpermute(hd)) // see model::unpermute_rows
    };
    let max_pos = cfg.max_position_embeddings; // the context limit; no table is computed yet
    let mut ropes = vec![
        LazyRope::new(hd, max_pos, cfg.rope_theta)
            .map_err(|e| Error::Unsupported(e.to_string()))?,
    ];
    let window = if gemma {
        let w = g.u64("gemma3.attention.sliding_window")?;
        let w = usize::try_from(w)
            .ok()
            .filter(|&w| w > 0)
            .ok_or_else(|| Error::Metadata {
                key: "gemma3.attention.sliding_window".into(),
                message: format!("{w} is not a window"),
            })?;
        let base = g.opt_f64("gemma3.rope.freq_base_swa")?.unwrap_or(10_000.0) as f32;
        ropes
            .push(LazyRope::new(hd, max_pos, base).map_err(|e| Error::Unsupported(e.to_string()))?);
        Some(w)
    } else {
        None
    };
    // ANCHOR_END: load_model
    // The packed copies share one arena of huge pages (chapter 7's `huge`). The file's size is
    // an upper bound on them: reserved as address space, and only what is written is memory.
    let arena = crate::matrix::policy::packs()
        .then(|| Arena::new(f.bytes().len()))
        .flatten();
    // ANCHOR: load_model_layers
    let mut layers = Vec::with_capacity(cfg.num_layers);
    for l in 0..cfg.num_layers {
        let name = |t: &str| format!("blk.{l}.{t}.weight");
        let m =
            |t: &str, rows, cols, how| layer_matrix(f, &name(t), rows, cols, how, arena.as_ref());
        // the norms the family has (Gemma-3's), read; the others absent
        let opt = |has: bool, t: &str, len| -> Result<Option<Vec<f32>>> {
            if has {
                vector(f, &name(t), len).map(Some)
            } else {
                Ok(None)
            }
        };
        let sliding = gemma && l % 6 != 5;
        layers.push(Layer {
            attn_norm: vector(f, &name("attn_norm"), dim)?,
            wq: m("attn_q", q_dim, dim, qk_rows)?,
            wk: m("attn_k", kv_dim, dim, qk_rows)?,
            wv: m("attn_v", kv_dim, dim, Rows::AsStored)?,
            wo: m("attn_output", dim, q_dim, Rows::AsStored)?,
            q_norm: opt(family.qk_norm, "attn_q_norm", hd)?,
            k_norm: opt(family.qk_norm, "attn_k_norm", hd)?,
            post_attn_norm: opt(family.post_norms, "post_attention_norm", dim)?,
            ffn_norm: vector(f, &name("ffn_norm"), dim)?,
            w_gate: m("ffn_gate", ffn, dim, Rows::AsStored)?,
            w_up: m("ffn_up", ffn, dim, Rows::AsStored)?,
            w_down: m("ffn_down", dim, ffn, Rows::AsStored)?,
            post_ffn_norm: opt(family.post_norms, "post_ffw_norm", dim)?,
            window: if sliding { window } else { None },
            rope: if sliding { 1 } else { 0 },
        });
    }
    // ANCHOR_END: load_model_layers
    // ANCHOR: load_model_rest
    let embed = any_matrix(f, "token_embd.weight", cfg.vocab_size, dim, Rows::AsStored)?;
    // a tied embedding is the LM head too, read whole every step: onto huge pages with the
    // rest (an embedding alone is read a few rows a step, and stays in the mapping)
    let (embed, lm_head) = if cfg.tie_word_embeddings {
        let embed = onto_huge_pages(f, "token_embd.weight", embed, arena.as_ref())?;
        (embed, None)
    } else {
        let head = layer_matrix(
            f,
            "output.weight",
            cfg.vocab_size,
            dim,
            Rows::AsStored,
            arena.as_ref(),
        )?;
        (embed, Some(head))
    };
    let per_layer = if gemma { 13 } else { 9 };
    let expected = 2 + usize::from(lm_head.is_some()) + per_layer * cfg.num_layers;
    if g.tensors.len() != expected {
        return Err(Error::Unsupported(format!(
            "{} tensors in the file; a {arch} model of {} layers has {expected}",
            g.tensors.len(),
            cfg.num_layers
        )));
    }
    Ok(Model {
        final_norm: vector(f, "output_norm.weight", dim)?,
        config: cfg,
        family,
        embed,
        layers,
        lm_head,
        ropes,
    })
}
// ANCHOR_END: load_model_rest

#[cfg(test)]
mod tests {
    use super::*;
    use ch01_tensors::models;

    /// A Llama file's Q and K rows come back in chapter 3's order for the K-quant formats
    /// too (a Llama Q4_K_M file stores them in Q4_K): row `j·hd/2 + i` of a head is the
    /// stored row `2i + j`, byte for byte. Gemma-3's file has such a matrix to move.
    #[test]
    fn k_quant_rows_are_unpermuted_like_chapter_6s() {
        let path = models::require(&models::gemma3_gguf()).unwrap_or_else(|e| panic!("{e}"));
        let f = GgufFile::open(&path).unwrap();
        let name = "blk.0.attn_q.weight";
        let t = f.info(name).unwrap();
        let (cols, rows) = (t.dims[0] as usize, t.dims[1] as usize);
        let hd = 256;
        let stored = match any_matrix(&f, name, rows, cols, Rows::AsStored).unwrap() {
            Matrix::K(m) => m,
            Matrix::Q(_) | Matrix::P(_) => {
                panic!("{name} is expected in a K-quant format ({})", t.ty)
            }
        };
        let Matrix::K(moved) = any_matrix(&f, name, rows, cols, Rows::Unpermute(hd)).unwrap()
        else {
            unreachable!("the same tensor")
        };
        for r in 0..rows {
            let (head, within) = (r / hd, r % hd);
            let src = head * hd + 2 * (within % (hd / 2)) + within / (hd / 2);
            assert_eq!(moved.row_bytes(r), stored.row_bytes(src), "row {r}");
        }
    }
}
