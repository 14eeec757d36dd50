//! Loading the real model, and refusing the wrong one: a config that does not match the
//! weights must fail with the tensor's name and both shapes.

use std::path::{Path, PathBuf};

use ch01_tensors::models;
use ch04_forward::{Error, Model};

fn hf_dir() -> PathBuf {
    let file = models::require(&models::smollm2_hf_dir().join("model.safetensors"))
        .unwrap_or_else(|e| panic!("{e}"));
    file.parent().unwrap().to_path_buf()
}

/// A model directory whose config.json is SmolLM2's with one field changed, and whose
/// model.safetensors is a symlink to the real one.
fn doctored(tag: &str, key: &str, value: serde_json::Value) -> PathBuf {
    let src = hf_dir();
    let dir = std::env::temp_dir().join(format!("ch04-doctored-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(src.join("config.json")).unwrap()).unwrap();
    cfg[key] = value;
    std::fs::write(dir.join("config.json"), cfg.to_string()).unwrap();
    let link = dir.join("model.safetensors");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(src.join("model.safetensors"), &link).unwrap();
    dir
}

fn load_err(dir: &Path) -> Error {
    match Model::load(dir) {
        Ok(_) => panic!(
            "{} loaded although its config does not match the weights",
            dir.display()
        ),
        Err(e) => e,
    }
}

#[test]
fn loads_smollm2_zero_copy() {
    let m = Model::load(&hf_dir()).unwrap();
    let c = &m.config;
    assert_eq!(
        (
            c.hidden_size,
            c.num_layers,
            c.n_heads,
            c.n_kv_heads,
            c.head_dim
        ),
        (576, 30, 9, 3, 64)
    );
    assert_eq!((c.intermediate_size, c.vocab_size), (1536, 49152));
    assert!(c.tie_word_embeddings && m.weights.lm_head.is_none());
    assert!(
        m.weights.embed.tensor().is_mapped(),
        "the F32 weights are views of the mapped file, not copies"
    );
    assert!(m.weights.layers[29].w_down.tensor().is_mapped());
}

#[test]
fn wrong_kv_heads_names_k_proj() {
    let dir = doctored("kv", "num_key_value_heads", 1.into());
    let err = load_err(&dir).to_string();
    assert_eq!(
        err,
        "tensor \"model.layers.0.self_attn.k_proj.weight\" has shape [192, 576], expected [64, 576] \
         = (num_key_value_heads * head_dim, hidden_size)"
    );
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn too_many_layers_names_the_missing_tensor() {
    let dir = doctored("layers", "num_hidden_layers", 31.into());
    let err = load_err(&dir).to_string();
    assert!(
        err.contains("no tensor \"model.layers.30.input_layernorm.weight\""),
        "{err}"
    );
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn untied_head_needs_lm_head() {
    let dir = doctored("untied", "tie_word_embeddings", false.into());
    let err = load_err(&dir).to_string();
    assert!(err.contains("no tensor \"lm_head.weight\""), "{err}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn impossible_config_names_the_field() {
    let dir = doctored("heads", "num_key_value_heads", 2.into());
    match load_err(&dir) {
        Error::Config { field, .. } => {
            assert_eq!(field, "num_attention_heads / num_key_value_heads")
        }
        other => panic!("expected a config error, got {other}"),
    }
    std::fs::remove_dir_all(dir).ok();
}
