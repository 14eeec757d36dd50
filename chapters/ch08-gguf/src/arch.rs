//! Both architectures from their files, into [`crate::engine::Model`].
//!
//! The tensor names are llama.cpp's (`blk.N.attn_q.weight`, …); Gemma-3 adds four norms per
//! layer. Which layers slide and which RoPE base each uses are llama.cpp's rules for
//! `gemma3`: layer `l` is a sliding-window layer unless `l % 6 == 5`, sliding layers rotate
//! with base 10 000 and the others with `gemma3.rope.freq_base` (1 000 000).

use ch03_attention::RopeTable;

use crate::config::config;
use crate::engine::{Family, Layer, Model};
use crate::error::{Error, Result};
use crate::file::GgufFile;
use crate::matrix::{KFormat, KMatrix, Matrix};
use crate::model::{Rows, check_dims, format_of, matrix, vector};
use crate::types::GgmlType;

/// Tensor `name` as a `(rows, cols)` matrix of whatever supported format it is stored in.
fn any_matrix(f: &GgufFile, name: &str, rows: usize, cols: usize, how: Rows) -> Result<Matrix> {
    let t = f.info(name)?;
    let k = match t.ty.id() {
        6 => KFormat::Q5_0,
        12 => KFormat::Q4_K,
        14 => KFormat::Q6_K,
        _ => return matrix(f, name, rows, cols, how).map(Matrix::Q),
    };
    check_dims(t, &[cols, rows])?;
    if how != Rows::AsStored {
        return Err(Error::Unsupported(format!(
            "reordering the rows of a {} tensor",
            t.ty
        )));
    }
    KMatrix::new(k, rows, cols, f.shared(t))
        .map(Matrix::K)
        .map_err(|message| Error::Tensor {
            name: name.into(),
            message,
        })
}

/// Whether the chapter can run a tensor of this type.
pub fn supported(ty: GgmlType) -> bool {
    format_of(ty).is_some() || matches!(ty.id(), 6 | 12 | 14)
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
    let max_pos = cfg.max_position_embeddings;
    let mut ropes = vec![
        RopeTable::new(hd, max_pos, cfg.rope_theta)
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
        ropes.push(
            RopeTable::new(hd, max_pos, base).map_err(|e| Error::Unsupported(e.to_string()))?,
        );
        Some(w)
    } else {
        None
    };
    // ANCHOR_END: load_model
    // ANCHOR: load_model_layers
    let mut layers = Vec::with_capacity(cfg.num_layers);
    for l in 0..cfg.num_layers {
        let name = |t: &str| format!("blk.{l}.{t}.weight");
        let m = |t: &str, rows, cols, how| any_matrix(f, &name(t), rows, cols, how);
        let opt = |t: &str, len| -> Result<Option<Vec<f32>>> {
            if gemma {
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
            q_norm: opt("attn_q_norm", hd)?,
            k_norm: opt("attn_k_norm", hd)?,
            post_attn_norm: opt("post_attention_norm", dim)?,
            ffn_norm: vector(f, &name("ffn_norm"), dim)?,
            w_gate: m("ffn_gate", ffn, dim, Rows::AsStored)?,
            w_up: m("ffn_up", ffn, dim, Rows::AsStored)?,
            w_down: m("ffn_down", dim, ffn, Rows::AsStored)?,
            post_ffn_norm: opt("post_ffw_norm", dim)?,
            window: if sliding { window } else { None },
            rope: if sliding { 1 } else { 0 },
        });
    }
    // ANCHOR_END: load_model_layers
    // ANCHOR: load_model_rest
    let embed = any_matrix(f, "token_embd.weight", cfg.vocab_size, dim, Rows::AsStored)?;
    let lm_head = if cfg.tie_word_embeddings {
        None
    } else {
        Some(any_matrix(
            f,
            "output.weight",
            cfg.vocab_size,
            dim,
            Rows::AsStored,
        )?)
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
