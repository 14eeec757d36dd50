//! Every supported architecture from its file, into [`crate::engine::Model`].
//!
//! The tensor names are llama.cpp's (`blk.N.attn_q.weight`, …). What a family adds is read
//! where the file has it, as llama.cpp's loader does: biases on Q, K and V (Qwen2), the
//! norms of Q and K (Qwen3, Gemma-3), the post-norms (Gemma), fused matrices (Phi-3's
//! `attn_qkv` and its `ffn_up` holding gate and up), RoPE factors (Llama 3, Phi-3). Which
//! layers slide and which RoPE each uses come from `families.rs`. A tensor the model never
//! reads is an error: the file is not the architecture it says.

use std::cell::RefCell;
use std::collections::HashSet;
use std::sync::Arc;

use rayon::prelude::*;

use ch06_quantization::{Bytes, QMatrix};

use crate::config::config;
use crate::engine::{Layer, Model, RopeRows};
use crate::error::{Error, Result};
use crate::families::{self, FREQS, LONG, SHORT};
use crate::file::GgufFile;
use crate::gguf::TensorInfo;
use crate::matrix::{KMatrix, Matrix, Packed, packed};
use crate::model::{Rows, check_dims, matrix, rows_of, unpermute_rows, unpermute_values, vector};
use crate::types::GgmlType;
use ch06_quantization::Format;
use ch07_simd_parallel::huge::Arena;

/// Tensor `t` as a `(rows, cols)` matrix of whatever supported format it is stored in.
fn any_matrix(f: &GgufFile, t: &TensorInfo, rows: usize, cols: usize, how: Rows) -> Result<Matrix> {
    let name = &t.name;
    // chapter 6's formats, and the types the engine does not run (which `matrix` refuses),
    // as a QMatrix; every other format in place, as a KMatrix
    let k = match t.ty.format() {
        Some(k) if !Format::ALL.contains(&k) => k,
        Some(_) | None => return matrix(f, t, rows, cols, how).map(Matrix::Q),
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
    t: &TensorInfo,
    rows: usize,
    cols: usize,
    how: Rows,
    arena: Option<&Arc<Arena>>,
) -> Result<Matrix> {
    let m = any_matrix(f, t, rows, cols, how)?;
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
            f.release(t);
            Matrix::P(p)
        }
        None => onto_huge_pages(f, t, m, arena)?,
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
    t: &TensorInfo,
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
            name: t.name.clone(),
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

/// The file's tensors, each one the loader reads noted, so that what is left over can be
/// named (a file that says `llama` but holds Gemma's norms is refused, not half read).
struct Tensors<'f> {
    f: &'f GgufFile,
    read: RefCell<HashSet<String>>,
}

impl<'f> Tensors<'f> {
    fn get(&self, name: &str) -> Result<&'f TensorInfo> {
        let t = self.f.info(name)?;
        self.read.borrow_mut().insert(name.to_string());
        Ok(t)
    }

    fn has(&self, name: &str) -> bool {
        self.f.gguf.tensor(name).is_some()
    }

    /// A vector the file may have (a bias, a norm): `None` when it does not.
    fn opt_vector(&self, name: &str, len: usize) -> Result<Option<Vec<f32>>> {
        if !self.has(name) {
            return Ok(None);
        }
        self.get(name)?;
        vector(self.f, name, len).map(Some)
    }

    fn vector(&self, name: &str, len: usize) -> Result<Vec<f32>> {
        self.get(name)?;
        vector(self.f, name, len)
    }
}

// ANCHOR: load_model
/// The model in `f`, of any supported architecture.
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
    let family = families::family(g, arch, &cfg)?;
    let qk_rows = match family.rope_rows {
        RopeRows::Interleaved => Rows::Unpermute(hd), // see model::unpermute_rows
        RopeRows::Halves => Rows::AsStored,           // rotated in halves: stored as trained
    };
    let ropes = families::ropes(f, arch, &cfg, &family)?; // [global, sliding]
    // ANCHOR_END: load_model
    // The packed copies share one arena of huge pages (chapter 7's `huge`). The file's size is
    // an upper bound on them: reserved as address space, and only what is written is memory.
    let arena = crate::matrix::policy::packs()
        .then(|| Arena::new(f.bytes().len()))
        .flatten();
    let ts = Tensors {
        f,
        read: RefCell::new(HashSet::new()),
    };
    // ANCHOR: load_model_layers
    let mut layers = Vec::with_capacity(cfg.num_layers);
    for l in 0..cfg.num_layers {
        let name = |t: &str| format!("blk.{l}.{t}.weight");
        let bias = |t: &str| format!("blk.{l}.{t}.bias");
        let m =
            |t: &TensorInfo, rows, cols, how| layer_matrix(f, t, rows, cols, how, arena.as_ref());
        let whole = |t: &str, rows, cols, how| m(ts.get(&name(t))?, rows, cols, how);
        // the norms the family has, read; the others absent
        let norm = |has: bool, t: &str, len| -> Result<Option<Vec<f32>>> {
            if has {
                ts.vector(&name(t), len).map(Some)
            } else {
                Ok(None)
            }
        };
        // ANCHOR_END: load_model_layers
        // ANCHOR: fused
        // Q, K and V: three matrices, or one fused (Phi-3) cut into three
        let (wq, wk, wv, bq, bk, bv) = if ts.has(&name("attn_qkv")) {
            let t = ts.get(&name("attn_qkv"))?;
            let rows = q_dim + 2 * kv_dim;
            let part = |r: std::ops::Range<usize>, p: &str| rows_of(t, rows, dim, r, p);
            let (k0, v0) = (q_dim, q_dim + kv_dim);
            let b = ts.opt_vector(&bias("attn_qkv"), rows)?;
            let cut = |r: std::ops::Range<usize>| b.as_ref().map(|b| b[r].to_vec());
            (
                m(&part(0..k0, "Q")?, q_dim, dim, qk_rows)?,
                m(&part(k0..v0, "K")?, kv_dim, dim, qk_rows)?,
                m(&part(v0..rows, "V")?, kv_dim, dim, Rows::AsStored)?,
                cut(0..k0),
                cut(k0..v0),
                cut(v0..rows),
            )
        } else {
            (
                whole("attn_q", q_dim, dim, qk_rows)?,
                whole("attn_k", kv_dim, dim, qk_rows)?,
                whole("attn_v", kv_dim, dim, Rows::AsStored)?,
                ts.opt_vector(&bias("attn_q"), q_dim)?,
                ts.opt_vector(&bias("attn_k"), kv_dim)?,
                ts.opt_vector(&bias("attn_v"), kv_dim)?,
            )
        };
        // a Llama file's Q and K biases are in its reordered row order too
        let (bq, bk) = match qk_rows {
            Rows::Unpermute(hd) => (
                bq.map(|b| unpermute_values(&b, hd)),
                bk.map(|b| unpermute_values(&b, hd)),
            ),
            Rows::AsStored => (bq, bk),
        };
        // gate and up: two matrices, or Phi-3's `ffn_up` of both (gate first)
        let (w_gate, w_up) = if ts.has(&name("ffn_gate")) {
            (
                whole("ffn_gate", ffn, dim, Rows::AsStored)?,
                whole("ffn_up", ffn, dim, Rows::AsStored)?,
            )
        } else {
            let t = ts.get(&name("ffn_up"))?;
            let part = |r: std::ops::Range<usize>, p: &str| rows_of(t, 2 * ffn, dim, r, p);
            (
                m(&part(0..ffn, "gate")?, ffn, dim, Rows::AsStored)?,
                m(&part(ffn..2 * ffn, "up")?, ffn, dim, Rows::AsStored)?,
            )
        };
        // ANCHOR_END: fused
        // ANCHOR: load_model_layers_end
        let sliding = family.sliding.filter(|s| s.slides(l));
        layers.push(Layer {
            attn_norm: ts.vector(&name("attn_norm"), dim)?,
            wq,
            wk,
            wv,
            wo: whole("attn_output", dim, q_dim, Rows::AsStored)?,
            bq,
            bk,
            bv,
            q_norm: norm(family.qk_norm, "attn_q_norm", hd)?,
            k_norm: norm(family.qk_norm, "attn_k_norm", hd)?,
            post_attn_norm: norm(family.post_norms, "post_attention_norm", dim)?,
            ffn_norm: ts.vector(&name("ffn_norm"), dim)?,
            w_gate,
            w_up,
            w_down: whole("ffn_down", dim, ffn, Rows::AsStored)?,
            post_ffn_norm: norm(family.post_norms, "post_ffw_norm", dim)?,
            window: sliding.map(|s| s.window),
            rope: usize::from(sliding.is_some()),
        });
    }
    // ANCHOR_END: load_model_layers_end
    // ANCHOR: load_model_rest
    let embed_t = ts.get("token_embd.weight")?;
    let embed = any_matrix(f, embed_t, cfg.vocab_size, dim, Rows::AsStored)?;
    // a tied embedding is the LM head too, read whole every step: onto huge pages with the
    // rest (an embedding alone is read a few rows a step, and stays in the mapping)
    let (embed, lm_head) = if cfg.tie_word_embeddings {
        let embed = onto_huge_pages(f, embed_t, embed, arena.as_ref())?;
        (embed, None)
    } else {
        let head_t = ts.get("output.weight")?;
        let head = layer_matrix(
            f,
            head_t,
            cfg.vocab_size,
            dim,
            Rows::AsStored,
            arena.as_ref(),
        )?;
        (embed, Some(head))
    };
    let final_norm = ts.vector("output_norm.weight", dim)?;
    // the RoPE factors were read by families::ropes (Phi-3's file has both sets, uses one)
    let read = ts.read.into_inner();
    let left = g
        .tensors
        .iter()
        .map(|t| &t.name)
        .find(|n| !read.contains(n.as_str()) && !matches!(n.as_str(), FREQS | LONG | SHORT));
    if let Some(name) = left {
        return Err(Error::Unsupported(format!(
            "tensor {name} is not one a {arch} model reads (of {} tensors in the file, {} are \
             this model's)",
            g.tensors.len(),
            read.len()
        )));
    }
    Ok(Model {
        final_norm,
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
        let stored = match any_matrix(&f, t, rows, cols, Rows::AsStored).unwrap() {
            Matrix::K(m) => m,
            Matrix::Q(_) | Matrix::P(_) => {
                panic!("{name} is expected in a K-quant format ({})", t.ty)
            }
        };
        let Matrix::K(moved) = any_matrix(&f, t, rows, cols, Rows::Unpermute(hd)).unwrap() else {
            unreachable!("the same tensor")
        };
        for r in 0..rows {
            let (head, within) = (r / hd, r % hd);
            let src = head * hd + 2 * (within % (hd / 2)) + within / (hd / 2);
            assert_eq!(moved.row_bytes(r), stored.row_bytes(src), "row {r}");
        }
    }
}
