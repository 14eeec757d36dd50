//! The model's hyper-parameters from GGUF metadata.
//!
//! A GGUF file carries what a Hugging Face folder splits between `config.json` and the
//! tensor shapes, under keys prefixed by the architecture's name. Rather than write a
//! second validator, this module translates the keys into chapter 3's `config.json` fields
//! and hands them to [`Config::from_json`], so a GGUF model passes every check a Hugging
//! Face one does (heads that divide evenly, an even head size, bounded sizes); an error
//! names the GGUF key.

use ch04_forward::Config;
use serde_json::{Map, Value, json};

use crate::error::{Error, Result};
use crate::gguf::Gguf;

// ANCHOR: keys
/// GGUF key (after `{arch}.`) → `config.json` field.
pub const KEYS: &[(&str, &str)] = &[
    ("embedding_length", "hidden_size"),
    ("block_count", "num_hidden_layers"),
    ("attention.head_count", "num_attention_heads"),
    ("attention.head_count_kv", "num_key_value_heads"),
    ("attention.key_length", "head_dim"),
    ("feed_forward_length", "intermediate_size"),
    ("attention.layer_norm_rms_epsilon", "rms_norm_eps"),
    ("rope.freq_base", "rope_theta"),
    ("context_length", "max_position_embeddings"),
    ("vocab_size", "vocab_size"),
];
// ANCHOR_END: keys

/// The architectures this chapter runs (`families.rs` says what each does differently).
pub const ARCHITECTURES: &[&str] = &["llama", "qwen2", "qwen3", "phi3", "gemma2", "gemma3"];

/// The most positions a model is set up for, whatever its file allows (Gemma-3 says
/// 32 768): the context limit, which a run's KV cache and the RoPE blocks it fills stay
/// within.
pub const MAX_CONTEXT: u64 = 8192;

// ANCHOR: config
/// Chapter 4's `Config` for the model in `g`.
pub fn config(g: &Gguf) -> Result<Config> {
    let arch = g.str("general.architecture")?;
    if !ARCHITECTURES.contains(&arch) {
        return Err(Error::Unsupported(format!(
            "architecture {arch:?} (general.architecture); this chapter runs {ARCHITECTURES:?}"
        )));
    }
    let mut obj = Map::new();
    for (key, field) in KEYS {
        let key = format!("{arch}.{key}");
        let value = match g.get(&key) {
            None => continue,
            Some(v) if v.as_i128().is_some() => json!(g.u64(&key)?),
            // JSON has no NaN or infinity (`json!` would make them null, which the
            // validator takes for a missing key and its default): refused here
            Some(_) => match g.opt_f64(&key)? {
                Some(x) if !x.is_finite() => {
                    let message = format!("{x} is not a finite number");
                    return Err(Error::Metadata { key, message });
                }
                x => json!(x),
            },
        };
        obj.insert(field.to_string(), value);
    }
    if let Some(n) = obj.get("max_position_embeddings").and_then(Value::as_u64)
        && n > MAX_CONTEXT
    {
        obj.insert("max_position_embeddings".into(), json!(MAX_CONTEXT));
    }
    // Older files have no vocab_size key: the vocabulary's length says it.
    if !obj.contains_key("vocab_size")
        && let Some(tokens) = g.opt_array("tokenizer.ggml.tokens")?
    {
        obj.insert("vocab_size".into(), json!(tokens.len()));
    }
    // ANCHOR_END: config
    // ANCHOR: config_checks
    // A model that rotates only part of each head, or whose value heads are not as wide as
    // its key heads, is not what chapter 3's attention does.
    let get = |field: &str| obj.get(field).and_then(Value::as_u64);
    let head_dim = get("head_dim").unwrap_or(
        get("hidden_size")
            .unwrap_or(0)
            .checked_div(get("num_attention_heads").unwrap_or(0))
            .unwrap_or(0),
    );
    if let Some(rot) = g.opt_u64(&format!("{arch}.rope.dimension_count"))?
        && rot != head_dim
    {
        return Err(Error::Unsupported(format!(
            "{arch}.rope.dimension_count is {rot} but heads have {head_dim} dimensions (partial RoPE)"
        )));
    }
    if let Some(v) = g.opt_u64(&format!("{arch}.attention.value_length"))?
        && v != head_dim
    {
        return Err(Error::Unsupported(format!(
            "{arch}.attention.value_length is {v} but key heads have {head_dim} dimensions"
        )));
    }
    // (RoPE scaling is read with the family: `families::rope_scaling`.)
    for (field, key) in [
        ("bos_token_id", "tokenizer.ggml.bos_token_id"),
        ("eos_token_id", "tokenizer.ggml.eos_token_id"),
    ] {
        if let Some(id) = g.opt_u64(key)? {
            obj.insert(field.into(), json!(id));
        }
    }
    // Tied when the file has no separate output matrix, as llama.cpp decides.
    obj.insert(
        "tie_word_embeddings".into(),
        json!(g.tensor("output.weight").is_none()),
    );
    Config::from_json(&Value::Object(obj).to_string()).map_err(|e| rename(arch, e))
}
// ANCHOR_END: config_checks

/// An error from chapter 3's validator, with its `config.json` field put back into the
/// GGUF key the reader can look for in `inspect`.
fn rename(arch: &str, e: ch03_attention::config::Error) -> Error {
    match e {
        ch03_attention::config::Error::Config { field, message } => {
            let key = KEYS
                .iter()
                .find(|(_, f)| *f == field)
                .map(|(k, _)| format!("{arch}.{k}"))
                .unwrap_or(match field.as_str() {
                    "bos_token_id" => "tokenizer.ggml.bos_token_id".into(),
                    "eos_token_id" => "tokenizer.ggml.eos_token_id".into(),
                    _ => format!("{arch} hyper-parameters ({field})"),
                });
            Error::Metadata { key, message }
        }
        other => Error::Unsupported(other.to_string()),
    }
}
