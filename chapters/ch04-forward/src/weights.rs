//! Every weight of the model, taken from `model.safetensors` and checked against the config.
//!
//! The file is chapter 1's memory-mapped [`SafeTensors`]: an F32 tensor is a view of the
//! mapped bytes, so "loading" 540 MB of weights copies nothing. What this module adds is
//! the contract between the file and the config: before the first multiplication, every
//! tensor the config calls for must be present with exactly the shape the config implies.
//! A checkpoint for a different model (or a config for a different checkpoint) then fails
//! with the tensor's name and both shapes, instead of producing garbage or panicking deep
//! in a matmul.
//!
//! The names are Hugging Face's (`model.layers.3.self_attn.q_proj.weight`), and every
//! matrix is stored `(out_features, in_features)`, the `nn.Linear` layout that chapter 1's
//! `matmul_transb` multiplies by directly.

use std::ops::Deref;

use ch01_tensors::Tensor;
use ch01_tensors::safetensors::SafeTensors;

use crate::{Config, Error};

/// One weight tensor, contiguous by construction, usable wherever a `&[f32]` is.
#[derive(Clone, Debug)]
pub struct Param(Tensor);

impl Param {
    /// The shape as stored in the file.
    pub fn shape(&self) -> &[usize] {
        self.0.shape()
    }

    /// The underlying tensor (a view of the mapped file for an aligned F32 weight).
    pub fn tensor(&self) -> &Tensor {
        &self.0
    }
}

impl Deref for Param {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        self.0
            .as_slice()
            .expect("a Param is contiguous by construction")
    }
}

// ANCHOR: layer_weights
/// The nine tensors of one decoder layer (SmolLM2-135M's shapes in the comments;
/// `dim` = hidden_size = 576, `q_dim` = 9 × 64, `kv_dim` = 3 × 64, `ffn` = 1536).
#[derive(Clone, Debug)]
pub struct LayerWeights {
    pub input_norm: Param, // (dim)              input_layernorm: RMSNorm before attention
    pub wq: Param,         // (q_dim, dim)       self_attn.q_proj
    pub wk: Param,         // (kv_dim, dim)      self_attn.k_proj
    pub wv: Param,         // (kv_dim, dim)      self_attn.v_proj
    pub wo: Param,         // (dim, q_dim)       self_attn.o_proj
    pub post_norm: Param,  // (dim)              post_attention_layernorm: RMSNorm before the FFN
    pub w_gate: Param,     // (ffn, dim)         mlp.gate_proj
    pub w_up: Param,       // (ffn, dim)         mlp.up_proj
    pub w_down: Param,     // (dim, ffn)         mlp.down_proj
}

/// The whole model's weights.
#[derive(Clone, Debug)]
pub struct Weights {
    pub embed: Param, // (vocab, dim)  model.embed_tokens: one row per token id
    pub layers: Vec<LayerWeights>, // num_layers of them
    pub final_norm: Param, // (dim)         model.norm
    /// `(vocab, dim)`, or `None` when the LM head is tied to `embed`.
    pub lm_head: Option<Param>,
}
// ANCHOR_END: layer_weights

impl Weights {
    /// The LM head's matrix `(vocab, dim)`: its own, or the embedding table when tied.
    pub fn lm_head(&self) -> &Param {
        self.lm_head.as_ref().unwrap_or(&self.embed)
    }

    // ANCHOR: load
    /// Takes every tensor `cfg` calls for from `st`, checking each shape.
    pub fn load(st: &SafeTensors, cfg: &Config) -> Result<Weights, Error> {
        let (dim, q, kv, ffn) = (
            cfg.hidden_size,
            cfg.q_dim(),
            cfg.kv_dim(),
            cfg.intermediate_size,
        );
        let take = |name: &str, shape: &[usize], what: &'static str| param(st, name, shape, what);
        let mut layers = Vec::new(); // grown layer by layer: num_layers comes from a file
        for l in 0..cfg.num_layers {
            let p = format!("model.layers.{l}");
            layers.push(LayerWeights {
                input_norm: take(
                    &format!("{p}.input_layernorm.weight"),
                    &[dim],
                    "(hidden_size)",
                )?,
                wq: take(
                    &format!("{p}.self_attn.q_proj.weight"),
                    &[q, dim],
                    "(num_attention_heads * head_dim, hidden_size)",
                )?,
                wk: take(
                    &format!("{p}.self_attn.k_proj.weight"),
                    &[kv, dim],
                    "(num_key_value_heads * head_dim, hidden_size)",
                )?,
                wv: take(
                    &format!("{p}.self_attn.v_proj.weight"),
                    &[kv, dim],
                    "(num_key_value_heads * head_dim, hidden_size)",
                )?,
                wo: take(
                    &format!("{p}.self_attn.o_proj.weight"),
                    &[dim, q],
                    "(hidden_size, num_attention_heads * head_dim)",
                )?,
                post_norm: take(
                    &format!("{p}.post_attention_layernorm.weight"),
                    &[dim],
                    "(hidden_size)",
                )?,
                w_gate: take(
                    &format!("{p}.mlp.gate_proj.weight"),
                    &[ffn, dim],
                    "(intermediate_size, hidden_size)",
                )?,
                w_up: take(
                    &format!("{p}.mlp.up_proj.weight"),
                    &[ffn, dim],
                    "(intermediate_size, hidden_size)",
                )?,
                w_down: take(
                    &format!("{p}.mlp.down_proj.weight"),
                    &[dim, ffn],
                    "(hidden_size, intermediate_size)",
                )?,
            });
        }
        // ANCHOR_END: load
        // ANCHOR: load_rest
        let lm_head = if cfg.tie_word_embeddings {
            None // the file may still carry a copy; a tied model ignores it, as Hugging Face does
        } else {
            Some(take(
                "lm_head.weight",
                &[cfg.vocab_size, dim],
                "(vocab_size, hidden_size)",
            )?)
        };
        let weights = Weights {
            embed: take(
                "model.embed_tokens.weight",
                &[cfg.vocab_size, dim],
                "(vocab_size, hidden_size)",
            )?,
            layers,
            final_norm: take("model.norm.weight", &[dim], "(hidden_size)")?,
            lm_head,
        };
        // Every tensor in the file must be one of those: a tensor nobody asked for means the
        // config describes another model (fewer layers, a bias this code does not apply).
        let unused: Vec<&str> = st
            .names()
            .into_iter()
            .filter(|n| !is_weight_name(n, cfg.num_layers))
            .collect();
        if let Some(first) = unused.first() {
            return Err(Error::UnusedTensors {
                count: unused.len(),
                first: first.to_string(),
            });
        }
        Ok(weights)
    }
    // ANCHOR_END: load_rest
}

/// Whether `name` is a tensor of a Llama with `layers` layers (`lm_head.weight` included: a
/// tied model may still carry a copy, which it ignores, as Hugging Face does).
fn is_weight_name(name: &str, layers: usize) -> bool {
    const LAYER: [&str; 9] = [
        "input_layernorm.weight",
        "self_attn.q_proj.weight",
        "self_attn.k_proj.weight",
        "self_attn.v_proj.weight",
        "self_attn.o_proj.weight",
        "post_attention_layernorm.weight",
        "mlp.gate_proj.weight",
        "mlp.up_proj.weight",
        "mlp.down_proj.weight",
    ];
    if matches!(
        name,
        "model.embed_tokens.weight" | "model.norm.weight" | "lm_head.weight"
    ) {
        return true;
    }
    let Some(rest) = name.strip_prefix("model.layers.") else {
        return false;
    };
    let Some((index, tail)) = rest.split_once('.') else {
        return false;
    };
    index
        .parse::<usize>()
        .is_ok_and(|l| l < layers && index == l.to_string())
        && LAYER.contains(&tail)
}

/// One tensor, checked against `shape` from the header before anything is read.
fn param(
    st: &SafeTensors,
    name: &str,
    shape: &[usize],
    meaning: &'static str,
) -> Result<Param, Error> {
    let info = st.info(name).ok_or_else(|| Error::MissingTensor {
        name: name.to_string(),
        expected: shape.to_vec(),
    })?;
    if info.shape != shape {
        return Err(Error::WrongShape {
            name: name.to_string(),
            expected: shape.to_vec(),
            found: info.shape.clone(),
            meaning,
        });
    }
    // Zero-copy for an aligned F32 tensor; `contiguous()` is then a cheap clone of the view.
    Ok(Param(st.tensor(name)?.contiguous()))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ch01_tensors::safetensors;
    use std::path::PathBuf;

    /// A tiny random Llama (2 layers, dim 8, 2 heads of 4 over 1 KV head, ffn 12, vocab 16)
    /// written to a temporary safetensors file; returns its config and path.
    pub(crate) fn tiny_model(tag: &str, tied: bool) -> (Config, PathBuf) {
        let cfg = tiny_config(tied);
        // One file per call: tests run in parallel, and two calls with the same tag must not
        // write, read and delete the same path.
        static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(
            "ch04-tiny-{tag}-{}-{n}.safetensors",
            std::process::id()
        ));
        let tensors = tiny_tensors(&cfg);
        let refs: Vec<(&str, &Tensor)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
        safetensors::write(&path, &refs).expect("write the tiny model");
        (cfg, path)
    }

    pub(crate) fn tiny_config(tied: bool) -> Config {
        Config {
            hidden_size: 8,
            num_layers: 2,
            n_heads: 2,
            n_kv_heads: 1,
            head_dim: 4,
            intermediate_size: 12,
            rms_norm_eps: 1e-5,
            rope_theta: 10_000.0,
            vocab_size: 16,
            tie_word_embeddings: tied,
            max_position_embeddings: 64,
            bos_token_id: Some(1),
            eos_token_ids: vec![2],
        }
    }

    /// Deterministic pseudo-random values in [-0.5, 0.5).
    fn values(n: usize, seed: u64) -> Vec<f32> {
        ch01_tensors::random::uniform(n, seed)
            .into_iter()
            .map(|x| x * 0.5)
            .collect()
    }

    pub(crate) fn tiny_tensors(cfg: &Config) -> Vec<(String, Tensor)> {
        let (d, q, kv, f, v) = (
            cfg.hidden_size,
            cfg.q_dim(),
            cfg.kv_dim(),
            cfg.intermediate_size,
            cfg.vocab_size,
        );
        let mut shapes: Vec<(String, Vec<usize>)> =
            vec![("model.embed_tokens.weight".into(), vec![v, d])];
        for l in 0..cfg.num_layers {
            let p = format!("model.layers.{l}");
            shapes.push((format!("{p}.input_layernorm.weight"), vec![d]));
            shapes.push((format!("{p}.self_attn.q_proj.weight"), vec![q, d]));
            shapes.push((format!("{p}.self_attn.k_proj.weight"), vec![kv, d]));
            shapes.push((format!("{p}.self_attn.v_proj.weight"), vec![kv, d]));
            shapes.push((format!("{p}.self_attn.o_proj.weight"), vec![d, q]));
            shapes.push((format!("{p}.post_attention_layernorm.weight"), vec![d]));
            shapes.push((format!("{p}.mlp.gate_proj.weight"), vec![f, d]));
            shapes.push((format!("{p}.mlp.up_proj.weight"), vec![f, d]));
            shapes.push((format!("{p}.mlp.down_proj.weight"), vec![d, f]));
        }
        shapes.push(("model.norm.weight".into(), vec![d]));
        if !cfg.tie_word_embeddings {
            shapes.push(("lm_head.weight".into(), vec![v, d]));
        }
        shapes
            .into_iter()
            .enumerate()
            .map(|(i, (name, shape))| {
                let n = shape.iter().product();
                let mut data = values(n, i as u64);
                if name.ends_with("norm.weight") {
                    data.iter_mut().for_each(|x| *x += 1.0); // norm gains near 1, like a trained model's
                }
                (name, Tensor::from_vec(data, &shape).unwrap())
            })
            .collect()
    }

    #[test]
    fn loads_a_complete_file() {
        let (cfg, path) = tiny_model("complete", false);
        let st = SafeTensors::open(&path).unwrap();
        let w = Weights::load(&st, &cfg).unwrap();
        assert_eq!(w.layers.len(), 2);
        assert_eq!(w.layers[1].wk.shape(), &[4, 8]);
        assert_eq!(w.lm_head().shape(), &[16, 8]);
        assert!(
            w.embed.tensor().is_mapped(),
            "an aligned F32 weight is a view of the mapped file"
        );
        std::fs::remove_file(path).ok();
    }

    #[test]
    fn tied_head_is_the_embedding() {
        let (cfg, path) = tiny_model("tied", true);
        let w = Weights::load(&SafeTensors::open(&path).unwrap(), &cfg).unwrap();
        assert!(w.lm_head.is_none());
        assert!(w.lm_head().tensor().shares_storage(w.embed.tensor()));
        std::fs::remove_file(path).ok();
    }

    #[test]
    fn a_config_with_fewer_layers_than_the_file_is_refused() {
        let (cfg, path) = tiny_model("fewer", true);
        let mut fewer = cfg.clone();
        fewer.num_layers = 1; // the file has 2
        let err = Weights::load(&SafeTensors::open(&path).unwrap(), &fewer)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("9 tensor(s) the config does not call for")
                && err.contains("model.layers.1."),
            "{err}"
        );
        std::fs::remove_file(path).ok();
    }

    #[test]
    fn names_the_missing_tensor() {
        let (cfg, path) = tiny_model("missing", true);
        let mut untied = cfg.clone();
        untied.tie_word_embeddings = false; // now lm_head.weight is required, and absent
        let err = Weights::load(&SafeTensors::open(&path).unwrap(), &untied).unwrap_err();
        assert_eq!(
            err.to_string(),
            "model.safetensors has no tensor \"lm_head.weight\" (expected one of shape [16, 8])"
        );
        std::fs::remove_file(path).ok();
    }

    #[test]
    fn names_the_misshapen_tensor() {
        let (cfg, path) = tiny_model("shape", true);
        let mut wrong = cfg.clone();
        wrong.n_kv_heads = 2; // the config now wants k_proj (8, 8); the file has (4, 8)
        let err = Weights::load(&SafeTensors::open(&path).unwrap(), &wrong).unwrap_err();
        assert_eq!(
            err.to_string(),
            "tensor \"model.layers.0.self_attn.k_proj.weight\" has shape [4, 8], expected [8, 8] \
             = (num_key_value_heads * head_dim, hidden_size)"
        );
        std::fs::remove_file(path).ok();
    }
}
