//! Looking at real attention: SmolLM2 from the token ids up to one layer's attention
//! weights.
//!
//! For layer 0 this is exactly what the model computes: embedding lookup, the layer's
//! RMSNorm, the Q and K projections, RoPE, then `softmax(q·kᵀ/√d)` under the causal mask.
//! For a deeper layer `L` the real input is the residual stream after `L` layers, which
//! needs the whole forward pass of chapter 4; here layer `L` is fed the embeddings
//! directly, so its pattern shows what its projections make of raw tokens, not what the
//! model does at that depth.

use std::path::Path;

use ch01_tensors::Tensor;
use ch01_tensors::ops;
use ch01_tensors::safetensors::SafeTensors;

use crate::Error;
use crate::attention::{Heads, attention_weights};
use crate::mask::Mask;
use crate::rope::{Pairing, RopeTable};

/// The numbers of a Llama-style `config.json` this chapter needs.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    /// Width of the residual stream (SmolLM2-135M: 576).
    pub hidden_size: usize,
    /// Transformer layers (30).
    pub num_layers: usize,
    /// Query heads (9), KV heads (3) and head_dim (64).
    pub heads: Heads,
    /// RMSNorm epsilon (1e-5).
    pub rms_norm_eps: f32,
    /// RoPE base θ (100 000).
    pub rope_theta: f32,
    /// Tokens in the vocabulary (49 152).
    pub vocab_size: usize,
}

impl From<&crate::config::Config> for ModelConfig {
    fn from(c: &crate::config::Config) -> ModelConfig {
        ModelConfig {
            hidden_size: c.hidden_size,
            num_layers: c.num_layers,
            heads: c.heads(),
            rms_norm_eps: c.rms_norm_eps,
            rope_theta: c.rope_theta,
            vocab_size: c.vocab_size,
        }
    }
}

impl ModelConfig {
    /// Reads the fields from the text of a `config.json`, through the book's one validated
    /// parser ([`crate::config::Config`]): a bad field is an error naming it, never a default.
    pub fn from_json(text: &str) -> Result<ModelConfig, Error> {
        Ok(ModelConfig::from(&crate::config::Config::from_json(text)?))
    }

    /// Reads `config.json` from a file.
    pub fn load(path: &Path) -> Result<ModelConfig, Error> {
        Ok(ModelConfig::from(&crate::config::Config::load(path)?))
    }
}

/// A tensor from the file, checked to have `shape`.
fn weight(st: &SafeTensors, name: &str, shape: &[usize]) -> Result<Tensor, Error> {
    let t = st.tensor(name)?;
    if t.shape() != shape {
        return Err(Error::Model(format!(
            "{name} has shape {:?}, expected {shape:?}",
            t.shape()
        )));
    }
    Ok(t.contiguous())
}

fn slice(t: &Tensor) -> &[f32] {
    t.as_slice().expect("weight() returns contiguous tensors")
}

/// One layer's rotated queries and keys for a sequence of tokens.
#[derive(Clone, Debug)]
pub struct LayerQk {
    /// `(seq, n_heads * head_dim)`, RoPE applied.
    pub q: Vec<f32>,
    /// `(seq, n_kv_heads * head_dim)`, RoPE applied.
    pub k: Vec<f32>,
}

// ANCHOR: layer_qk
/// Embeds `ids`, applies `layer`'s input RMSNorm and its Q/K projections, and rotates
/// both with RoPE (split halves: the safetensors hold Hugging Face's layout).
pub fn layer_qk(
    st: &SafeTensors,
    cfg: &ModelConfig,
    layer: usize,
    ids: &[u32],
) -> Result<LayerQk, Error> {
    let (dim, h) = (cfg.hidden_size, cfg.heads);
    if layer >= cfg.num_layers {
        return Err(Error::Config(format!(
            "layer {layer} does not exist (the model has {})",
            cfg.num_layers
        )));
    }
    let seq = ids.len();
    let emb = weight(st, "model.embed_tokens.weight", &[cfg.vocab_size, dim])?; // (vocab, dim)
    let p = format!("model.layers.{layer}");
    let norm = weight(st, &format!("{p}.input_layernorm.weight"), &[dim])?; // (dim)
    let wq = weight(
        st,
        &format!("{p}.self_attn.q_proj.weight"),
        &[h.q_dim(), dim],
    )?; // (q_dim, dim)
    let wk = weight(
        st,
        &format!("{p}.self_attn.k_proj.weight"),
        &[h.kv_dim(), dim],
    )?; // (kv_dim, dim)

    let mut x = vec![0.0f32; seq * dim]; // (seq, dim) normalised embeddings
    for (row, &id) in x.chunks_exact_mut(dim).zip(ids) {
        let id = id as usize;
        if id >= cfg.vocab_size {
            return Err(Error::Model(format!(
                "token id {id} is outside the vocabulary ({})",
                cfg.vocab_size
            )));
        }
        let e = &slice(&emb)[id * dim..(id + 1) * dim]; // (dim)
        ops::rmsnorm(row, e, slice(&norm), cfg.rms_norm_eps);
    }
    let mut q = vec![0.0f32; seq * h.q_dim()]; // (seq, n_heads * head_dim)
    let mut k = vec![0.0f32; seq * h.kv_dim()]; // (seq, n_kv_heads * head_dim)
    ops::matmul_transb(&mut q, &x, slice(&wq), seq, dim, h.q_dim());
    ops::matmul_transb(&mut k, &x, slice(&wk), seq, dim, h.kv_dim());

    let rope = RopeTable::new(h.head_dim, seq, cfg.rope_theta)?;
    rope.apply(&mut q, h.n_heads, 0, Pairing::SplitHalves);
    rope.apply(&mut k, h.n_kv_heads, 0, Pairing::SplitHalves);
    Ok(LayerQk { q, k })
}
// ANCHOR_END: layer_qk

/// The causal attention pattern of every head of `layer` for `ids`:
/// `(n_heads, seq, seq)`, row `i` of head `h` = where token `i` looks.
pub fn layer_pattern(
    st: &SafeTensors,
    cfg: &ModelConfig,
    layer: usize,
    ids: &[u32],
) -> Result<Vec<f32>, Error> {
    let LayerQk { q, k } = layer_qk(st, cfg, layer, ids)?;
    Ok(attention_weights(&q, &k, cfg.heads, Mask::Causal))
}
