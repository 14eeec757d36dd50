//! Chapter 3's probe reads `config.json` through the book's one validated parser: every
//! case the bad-input probe found it accepting silently is now an error naming the field.

use ch03_attention::probe::ModelConfig;

const GOOD: &str = r#"{"model_type": "llama", "hidden_size": 576, "num_hidden_layers": 30,
  "num_attention_heads": 9, "num_key_value_heads": 3, "head_dim": 64, "intermediate_size": 1536,
  "rms_norm_eps": 1e-05, "rope_theta": 100000.0, "vocab_size": 49152, "tie_word_embeddings": true,
  "max_position_embeddings": 8192, "bos_token_id": 1, "eos_token_id": 2}"#;

fn with(key: &str, value: &str) -> String {
    let mut v: serde_json::Value = serde_json::from_str(GOOD).unwrap();
    v[key] = serde_json::from_str(value).unwrap();
    v.to_string()
}

#[test]
fn the_probe_refuses_what_it_used_to_accept() {
    assert!(ModelConfig::from_json(GOOD).is_ok());
    for (key, value) in [
        ("rope_theta", r#""100000""#), // a string used to become 10 000
        ("rms_norm_eps", "-1"),        // used to print NaN statistics
        ("model_type", r#""gemma3""#), // used to be ignored
        ("rope_scaling", r#"{"type": "linear", "factor": 2}"#), // likewise
        ("head_dim", r#""64""#),       // a string used to be ignored
        ("num_attention_heads", "5188146770730811401"), // 9 + 3·2^58: used to overflow
    ] {
        let err = ModelConfig::from_json(&with(key, value)).err();
        let msg = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(
            msg.contains(key),
            "{key} = {value} must be refused with an error naming it, got {msg:?}"
        );
    }
}
