//! `config.json` parsing: SmolLM2's real values, the defaults, and errors that name the field.

use ch04_forward::{Config, Error};
use serde_json::Value;

const SMOLLM2: &str = r#"{
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30,
    "num_attention_heads": 9, "num_key_value_heads": 3, "head_dim": 64,
    "rms_norm_eps": 1e-05, "rope_theta": 100000.0, "rope_scaling": null,
    "max_position_embeddings": 8192, "vocab_size": 49152, "tie_word_embeddings": true,
    "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2, "hidden_act": "silu"
}"#;

/// SMOLLM2 with one field replaced (or removed, when `value` is None).
fn with(key: &str, value: Option<Value>) -> String {
    let mut v: Value = serde_json::from_str(SMOLLM2).unwrap();
    let obj = v.as_object_mut().unwrap();
    match value {
        Some(x) => obj.insert(key.to_string(), x),
        None => obj.remove(key),
    };
    v.to_string()
}

fn field_of(text: &str) -> String {
    match Config::from_json(text).map_err(Error::from) {
        Err(Error::Config { field, .. }) => field,
        other => panic!("expected a config error, got {other:?}"),
    }
}

#[test]
fn reads_smollm2() {
    let c = Config::from_json(SMOLLM2).unwrap();
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
    assert_eq!(
        (c.intermediate_size, c.vocab_size, c.max_position_embeddings),
        (1536, 49152, 8192)
    );
    assert_eq!((c.rms_norm_eps, c.rope_theta), (1e-5, 100_000.0));
    assert!(c.tie_word_embeddings);
    assert_eq!(
        (c.bos_token_id, c.eos_token_ids.as_slice()),
        (Some(1), &[2][..])
    );
    assert_eq!((c.q_dim(), c.kv_dim()), (576, 192));
}

#[test]
fn defaults_for_optional_fields() {
    let mut v: Value = serde_json::from_str(SMOLLM2).unwrap();
    let obj = v.as_object_mut().unwrap();
    for key in [
        "head_dim",
        "num_key_value_heads",
        "rope_theta",
        "tie_word_embeddings",
        "eos_token_id",
    ] {
        obj.remove(key);
    }
    let c = Config::from_json(&v.to_string()).unwrap();
    assert_eq!(
        c.head_dim, 64,
        "head_dim defaults to hidden_size / num_attention_heads"
    );
    assert_eq!(
        c.n_kv_heads, 9,
        "no num_key_value_heads means plain multi-head attention"
    );
    assert_eq!(c.rope_theta, 10_000.0);
    assert!(!c.tie_word_embeddings);
    assert!(c.eos_token_ids.is_empty());
    let list = with("eos_token_id", Some(serde_json::json!([2, 0])));
    assert_eq!(Config::from_json(&list).unwrap().eos_token_ids, vec![2, 0]);
}

#[test]
fn errors_name_the_field() {
    assert_eq!(field_of(&with("hidden_size", None)), "hidden_size");
    assert_eq!(
        field_of(&with("num_hidden_layers", Some("30".into()))),
        "num_hidden_layers"
    );
    assert_eq!(
        field_of(&with("intermediate_size", Some(0.into()))),
        "intermediate_size"
    );
    assert_eq!(
        field_of(&with("rms_norm_eps", Some("small".into()))),
        "rms_norm_eps"
    );
    assert_eq!(
        field_of(&with("tie_word_embeddings", Some(1.into()))),
        "tie_word_embeddings"
    );
    assert_eq!(
        field_of(&with("eos_token_id", Some(60_000.into()))),
        "eos_token_id"
    );
    assert_eq!(
        field_of(&with("model_type", Some("bert".into()))),
        "model_type"
    );
    // Sizes that would make later arithmetic wrap, or an allocation absurd, are refused where
    // they enter: 2^32 − 1 layers once made chapter 4 try to allocate 2.4 TB.
    for (key, n) in [
        ("num_hidden_layers", 4294967295u64),
        ("num_attention_heads", 1 << 20),
        ("vocab_size", 1 << 40),
    ] {
        assert_eq!(field_of(&with(key, Some(n.into()))), key, "{key} = {n}");
    }
    // Llama's relatives are refused too: Qwen2 adds q/k/v biases, Mistral a sliding window,
    // and neither is implemented here.
    for kind in ["qwen2", "mistral"] {
        assert_eq!(
            field_of(&with("model_type", Some(kind.into()))),
            "model_type",
            "{kind}"
        );
    }
    assert_eq!(field_of(&with("head_dim", Some(63.into()))), "head_dim");
    assert_eq!(
        field_of(&with("num_key_value_heads", Some(2.into()))),
        "num_attention_heads / num_key_value_heads"
    );
    let mut v: Value = serde_json::from_str(&with("head_dim", None)).unwrap();
    v["hidden_size"] = 580.into();
    assert_eq!(
        field_of(&v.to_string()),
        "hidden_size / num_attention_heads"
    );
    // A billion positions would ask for a 256 GB RoPE table before a token is read.
    assert_eq!(
        field_of(&with("max_position_embeddings", Some(1_000_000_000.into()))),
        "max_position_embeddings"
    );
    assert_eq!(field_of("[1, 2]"), "(file)");
    assert_eq!(field_of("{ not json"), "(file)");
}

#[test]
fn message_says_what_is_wrong() {
    let err = Config::from_json(&with("num_key_value_heads", Some(2.into())))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("9 query heads") && err.contains("2 KV heads"),
        "{err}"
    );
    let err = Config::from_json(&with("vocab_size", None))
        .unwrap_err()
        .to_string();
    assert_eq!(err, "config.json: vocab_size: missing (a required integer)");
}
