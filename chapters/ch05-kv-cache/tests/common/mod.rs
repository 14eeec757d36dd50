//! A tiny random Llama for the equivalence tests: every code path of the real model
//! (GQA, RoPE, SwiGLU, tied head), small enough to run hundreds of forward passes.
#![allow(dead_code)]

use std::path::PathBuf;

use ch01_tensors::{Tensor, safetensors};
use ch04_forward::Model;

/// `(layers, heads, kv_heads, head_dim)` of the tiny model.
pub const LAYERS: usize = 3;
pub const VOCAB: usize = 64;
pub const MAX_POS: usize = 128;

fn values(n: usize, seed: u64) -> Vec<f32> {
    ch01_tensors::random::uniform(n, seed)
        .into_iter()
        .map(|x| x * 0.5)
        .collect()
}

/// Writes the tiny model to a fresh directory and loads it with chapter 4's loader.
pub fn tiny_model(tag: &str) -> Model {
    let (dim, heads, kv_heads, head_dim, ffn) = (32, 4, 2, 8, 48);
    let dir: PathBuf = std::env::temp_dir().join(format!("ch05-tiny-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = serde_json::json!({
        "model_type": "llama", "hidden_size": dim, "num_hidden_layers": LAYERS,
        "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": head_dim,
        "intermediate_size": ffn, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "vocab_size": VOCAB,
        "tie_word_embeddings": true, "max_position_embeddings": MAX_POS, "bos_token_id": 1, "eos_token_id": 2
    });
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let (q, kv) = (heads * head_dim, kv_heads * head_dim);
    let mut shapes: Vec<(String, Vec<usize>)> =
        vec![("model.embed_tokens.weight".into(), vec![VOCAB, dim])];
    for l in 0..LAYERS {
        let p = format!("model.layers.{l}");
        for (name, shape) in [
            ("input_layernorm", vec![dim]),
            ("self_attn.q_proj", vec![q, dim]),
            ("self_attn.k_proj", vec![kv, dim]),
            ("self_attn.v_proj", vec![kv, dim]),
            ("self_attn.o_proj", vec![dim, q]),
            ("post_attention_layernorm", vec![dim]),
            ("mlp.gate_proj", vec![ffn, dim]),
            ("mlp.up_proj", vec![ffn, dim]),
            ("mlp.down_proj", vec![dim, ffn]),
        ] {
            shapes.push((format!("{p}.{name}.weight"), shape));
        }
    }
    shapes.push(("model.norm.weight".into(), vec![dim]));
    let tensors: Vec<(String, Tensor)> = shapes
        .into_iter()
        .enumerate()
        .map(|(i, (name, shape))| {
            let mut data = values(shape.iter().product(), i as u64 + 1);
            if name.ends_with("norm.weight") {
                data.iter_mut().for_each(|x| *x += 1.0);
            } else {
                data.iter_mut().for_each(|x| *x *= 2.0); // large enough that attention is not uniform
            }
            (name, Tensor::from_vec(data, &shape).unwrap())
        })
        .collect();
    let refs: Vec<(&str, &Tensor)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
    safetensors::write(dir.join("model.safetensors"), &refs).unwrap();
    let model = Model::load(&dir).unwrap();
    std::fs::remove_dir_all(&dir).ok(); // the weights stay mapped; the files can go
    model
}

/// Deterministic ids in `3..VOCAB` (avoiding the end token 2).
pub fn ids(n: usize, seed: u64) -> Vec<u32> {
    let mut s = seed.wrapping_add(0x9E3779B97F4A7C15);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            3 + (s % (VOCAB as u64 - 3)) as u32
        })
        .collect()
}
