//! The real models on disk and the committed llama.cpp fixtures.
//!
//! - the fetched GGUF files have the pinned sha256;
//! - SmolLM2's Hugging Face directory (written by `scripts/models.sh`) loads: config.json,
//!   tokenizer.json and every tensor of model.safetensors, with the expected shapes;
//! - every file in fixtures/reference/ parses and has the shape fixtures/README.md documents.
//!
//! A missing model fails the test with the message of `ch01_tensors::models::require`,
//! which says how to fetch it.

use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use ch01_tensors::models;
use ch01_tensors::safetensors::{Dtype, SafeTensors};
use serde_json::Value;
use sha2::{Digest, Sha256};

const SMOLLM2_SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";
const GEMMA3_SHA256: &str = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818";
const SMOLLM2_VOCAB: usize = 49152;
const GEMMA3_VOCAB: usize = 262144;

fn require(path: PathBuf) -> PathBuf {
    models::require(&path).unwrap_or_else(|message| panic!("{message}"))
}

fn sha256_hex(path: &Path) -> String {
    let mut file =
        File::open(path).unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()));
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).expect("read model file");
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not valid JSON: {e}", path.display()))
}

#[test]
fn smollm2_gguf_has_the_pinned_sha256() {
    let path = require(models::smollm2_gguf());
    assert_eq!(
        sha256_hex(&path),
        SMOLLM2_SHA256,
        "{} is not the pinned SmolLM2 file; delete it and run `bash scripts/models.sh smollm2`",
        path.display()
    );
}

#[test]
fn gemma3_gguf_has_the_pinned_sha256() {
    let path = require(models::gemma3_gguf());
    assert_eq!(
        sha256_hex(&path),
        GEMMA3_SHA256,
        "{} is not the pinned Gemma-3 file; delete it and run `bash scripts/models.sh gemma3`",
        path.display()
    );
}

#[test]
fn smollm2_config_json_describes_smollm2() {
    let path = require(models::smollm2_hf_dir().join("config.json"));
    let config = read_json(&path);
    let expect = [
        ("model_type", Value::from("llama")),
        ("hidden_size", Value::from(576)),
        ("intermediate_size", Value::from(1536)),
        ("num_hidden_layers", Value::from(30)),
        ("num_attention_heads", Value::from(9)),
        ("num_key_value_heads", Value::from(3)),
        ("head_dim", Value::from(64)),
        ("max_position_embeddings", Value::from(8192)),
        ("vocab_size", Value::from(SMOLLM2_VOCAB)),
        ("tie_word_embeddings", Value::from(true)),
        ("bos_token_id", Value::from(1)),
        ("eos_token_id", Value::from(2)),
        ("hidden_act", Value::from("silu")),
        ("torch_dtype", Value::from("float32")),
    ];
    for (key, value) in expect {
        assert_eq!(config[key], value, "config.json: {key} should be {value}");
    }
    assert_eq!(
        config["architectures"][0], "LlamaForCausalLM",
        "config.json: architectures"
    );
    assert_eq!(
        config["rms_norm_eps"].as_f64(),
        Some(1e-5),
        "config.json: rms_norm_eps"
    );
    assert_eq!(
        config["rope_theta"].as_f64(),
        Some(100000.0),
        "config.json: rope_theta"
    );
}

#[test]
fn smollm2_tokenizer_json_has_vocab_merges_and_specials() {
    let path = require(models::smollm2_hf_dir().join("tokenizer.json"));
    let tok = read_json(&path);
    let model = &tok["model"];
    assert_eq!(model["type"], "BPE", "tokenizer.json: model.type");
    assert_eq!(
        model["byte_fallback"], false,
        "SmolLM2 has no byte fallback"
    );
    let vocab = model["vocab"]
        .as_object()
        .expect("model.vocab is an object");
    assert_eq!(
        vocab.len(),
        SMOLLM2_VOCAB,
        "tokenizer.json: vocabulary size"
    );
    let mut ids: Vec<u64> = vocab
        .values()
        .map(|v| v.as_u64().expect("vocab ids are integers"))
        .collect();
    ids.sort_unstable();
    assert!(
        ids.iter().enumerate().all(|(i, &id)| id == i as u64),
        "vocabulary ids are not exactly 0..{SMOLLM2_VOCAB}"
    );

    let merges = model["merges"]
        .as_array()
        .expect("model.merges is an array");
    assert_eq!(merges.len(), 48900, "tokenizer.json: number of merges");
    for (rank, merge) in merges.iter().enumerate() {
        let merge = merge.as_str().expect("merges are \"left right\" strings");
        let (left, right) = merge
            .split_once(' ')
            .unwrap_or_else(|| panic!("merge {rank} {merge:?} has no space"));
        let joined = format!("{left}{right}");
        assert!(
            vocab.contains_key(left) && vocab.contains_key(right) && vocab.contains_key(&joined),
            "merge {rank} {merge:?}: its parts or its result are not in the vocabulary"
        );
    }

    let added: HashMap<&str, (u64, bool)> = tok["added_tokens"]
        .as_array()
        .expect("added_tokens is an array")
        .iter()
        .map(|t| {
            (
                t["content"].as_str().unwrap(),
                (t["id"].as_u64().unwrap(), t["special"].as_bool().unwrap()),
            )
        })
        .collect();
    for (content, id) in [
        ("<|endoftext|>", 0),
        ("<|im_start|>", 1),
        ("<|im_end|>", 2),
        ("<empty_output>", 16),
    ] {
        assert_eq!(
            added.get(content),
            Some(&(id, true)),
            "{content} should be special token {id}"
        );
    }
    assert_eq!(added.len(), 17, "SmolLM2 has 17 special tokens");

    let pre = &tok["pre_tokenizer"]["pretokenizers"];
    assert_eq!(
        pre[0]["type"], "Digits",
        "the pre-tokenizer splits digits first"
    );
    assert_eq!(
        pre[0]["individual_digits"], true,
        "each digit is its own piece"
    );
    assert_eq!(
        pre[1]["type"], "ByteLevel",
        "then the GPT-2 byte-level split"
    );
}

/// Every tensor of the Hugging Face checkpoint, with its PyTorch (out, in) shape.
fn expected_tensors() -> Vec<(String, Vec<usize>)> {
    let (hidden, inter, kv) = (576, 1536, 3 * 64);
    let mut all = vec![(
        "model.embed_tokens.weight".to_string(),
        vec![SMOLLM2_VOCAB, hidden],
    )];
    for layer in 0..30 {
        let p = format!("model.layers.{layer}");
        all.push((format!("{p}.input_layernorm.weight"), vec![hidden]));
        all.push((format!("{p}.self_attn.q_proj.weight"), vec![hidden, hidden]));
        all.push((format!("{p}.self_attn.k_proj.weight"), vec![kv, hidden]));
        all.push((format!("{p}.self_attn.v_proj.weight"), vec![kv, hidden]));
        all.push((format!("{p}.self_attn.o_proj.weight"), vec![hidden, hidden]));
        all.push((format!("{p}.post_attention_layernorm.weight"), vec![hidden]));
        all.push((format!("{p}.mlp.gate_proj.weight"), vec![inter, hidden]));
        all.push((format!("{p}.mlp.up_proj.weight"), vec![inter, hidden]));
        all.push((format!("{p}.mlp.down_proj.weight"), vec![hidden, inter]));
    }
    all.push(("model.norm.weight".to_string(), vec![hidden]));
    all
}

#[test]
fn smollm2_safetensors_has_every_tensor_with_its_shape() {
    let path = require(models::smollm2_hf_dir().join("model.safetensors"));
    let st =
        SafeTensors::open(&path).unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()));
    let expected = expected_tensors();
    let want: BTreeSet<&str> = expected.iter().map(|(n, _)| n.as_str()).collect();
    let have: BTreeSet<&str> = st.names().into_iter().collect();
    assert_eq!(
        have.symmetric_difference(&want).collect::<Vec<_>>(),
        Vec::<&&str>::new(),
        "tensor names differ from the Hugging Face Llama layout (no lm_head: it is tied to the embedding)"
    );
    for (name, shape) in &expected {
        let info = st.info(name).unwrap();
        assert_eq!(info.dtype, Dtype::F32, "{name} should be stored as F32");
        assert_eq!(&info.shape, shape, "{name} has the wrong shape");
    }

    // The weights are dequantized Q4_1: within each block of 32 values of a row there are
    // at most 16 distinct values (d·q + m, q = 0..15). A transposed or scrambled tensor
    // would break that.
    for name in [
        "model.layers.0.self_attn.k_proj.weight",
        "model.layers.29.mlp.down_proj.weight",
    ] {
        let tensor = st
            .tensor(name)
            .unwrap_or_else(|e| panic!("cannot load {name}: {e}"));
        let values = tensor.to_vec();
        assert!(
            values.iter().all(|v| v.is_finite()),
            "{name} holds a NaN or infinity"
        );
        for (b, block) in values.chunks(32).enumerate() {
            let distinct: BTreeSet<u32> = block.iter().map(|v| v.to_bits()).collect();
            assert!(
                distinct.len() <= 16,
                "{name}: block {b} has {} distinct values, Q4_1 has 16 levels",
                distinct.len()
            );
        }
    }
    let norm = st
        .tensor("model.norm.weight")
        .expect("load model.norm.weight")
        .to_vec();
    assert!(
        norm.iter().all(|v| v.is_finite() && *v != 0.0),
        "model.norm.weight should be finite and non-zero"
    );
}

// ---- the committed fixtures -------------------------------------------------------------

fn fixture(name: &str) -> Value {
    read_json(
        &models::workspace_root()
            .join("fixtures/reference")
            .join(name),
    )
}

fn ids_of(value: &Value, what: &str, vocab: usize) -> Vec<usize> {
    let ids: Vec<usize> = value
        .as_array()
        .unwrap_or_else(|| panic!("{what} is not an array"))
        .iter()
        .map(|v| {
            v.as_u64()
                .unwrap_or_else(|| panic!("{what} holds a non-integer")) as usize
        })
        .collect();
    assert!(
        ids.iter().all(|&id| id < vocab),
        "{what} holds an id outside the vocabulary of {vocab}"
    );
    ids
}

fn check_header(f: &Value, file: &str, sha: &str) {
    assert_eq!(
        f["model_sha256"], sha,
        "{file}: model_sha256 is not the pinned model"
    );
    assert!(
        f["llama_cpp_python"].is_string(),
        "{file}: llama_cpp_python version missing"
    );
}

fn fixture_models() -> [(&'static str, &'static str, usize, &'static str); 3] {
    [
        ("smollm2", "q4_1", SMOLLM2_VOCAB, SMOLLM2_SHA256),
        ("smollm2", "f32", SMOLLM2_VOCAB, SMOLLM2_SHA256),
        ("gemma3", "q4_k_m", GEMMA3_VOCAB, GEMMA3_SHA256),
    ]
}

#[test]
fn tokenizer_fixtures_have_the_documented_shape() {
    for (model, vocab, sha, add_bos) in [
        ("smollm2", SMOLLM2_VOCAB, SMOLLM2_SHA256, false),
        ("gemma3", GEMMA3_VOCAB, GEMMA3_SHA256, true),
    ] {
        let file = format!("tokenizer-{model}.json");
        let f = fixture(&file);
        check_header(&f, &file, sha);
        assert_eq!(f["add_bos"], add_bos, "{file}: add_bos");
        let cases = f["cases"].as_array().expect("cases is an array");
        assert!(cases.len() >= 200, "{file}: only {} cases", cases.len());
        for (i, case) in cases.iter().enumerate() {
            let text = case["text"]
                .as_str()
                .unwrap_or_else(|| panic!("{file}: case {i} has no text"));
            let ids = ids_of(&case["ids"], &format!("{file} case {i} ids"), vocab);
            ids_of(
                &case["ids_special"],
                &format!("{file} case {i} ids_special"),
                vocab,
            );
            if text.is_empty() {
                assert!(
                    ids.is_empty(),
                    "{file}: case {i}: the empty string has no tokens"
                );
            }
        }
    }
}

#[test]
fn logits_fixtures_have_the_documented_shape() {
    for (model, variant, vocab, sha) in fixture_models() {
        let file = format!("logits-{model}-{variant}.json");
        let f = fixture(&file);
        check_header(&f, &file, sha);
        assert_eq!(f["variant"], variant, "{file}: variant");
        assert_eq!(f["top_k"], 20, "{file}: top_k");
        let prompts = f["prompts"].as_array().expect("prompts is an array");
        assert!(prompts.len() >= 4, "{file}: expected at least 4 prompts");
        for p in prompts {
            let ids = ids_of(&p["ids"], &format!("{file} ids"), vocab);
            let positions = p["positions"].as_array().expect("positions is an array");
            assert_eq!(
                positions.len(),
                ids.len(),
                "{file}: one entry per fed token (logits_all)"
            );
            for (pos, entry) in positions.iter().enumerate() {
                let top = entry["top"].as_array().expect("top is an array");
                assert_eq!(
                    top.len(),
                    20,
                    "{file}: position {pos} has {} top entries",
                    top.len()
                );
                let pairs: Vec<(u64, f64)> = top
                    .iter()
                    .map(|e| (e[0].as_u64().unwrap(), e[1].as_f64().unwrap()))
                    .collect();
                assert!(
                    pairs.iter().all(|&(id, _)| (id as usize) < vocab),
                    "{file}: top id outside the vocabulary"
                );
                assert!(
                    pairs.windows(2).all(|w| w[0].1 >= w[1].1),
                    "{file}: position {pos}: top is not sorted descending"
                );
                assert_eq!(
                    entry["argmax"].as_u64(),
                    Some(pairs[0].0),
                    "{file}: position {pos}: argmax is not top[0]"
                );
            }
        }
    }
}

#[test]
fn greedy_and_perplexity_fixtures_have_the_documented_shape() {
    let ppl = fixture("perplexity.json");
    for (model, variant, vocab, sha) in fixture_models() {
        let file = format!("greedy-{model}-{variant}.json");
        let f = fixture(&file);
        check_header(&f, &file, sha);
        for p in f["prompts"].as_array().expect("prompts is an array") {
            ids_of(&p["prompt_ids"], &format!("{file} prompt_ids"), vocab);
            let ids = ids_of(&p["ids"], &format!("{file} ids"), vocab);
            assert_eq!(ids.len(), 64, "{file}: 64 generated ids per prompt");
            assert!(p["text"].is_string(), "{file}: text missing");
        }
        let entry = &ppl["models"][format!("{model}-{variant}")];
        let value = entry["perplexity"]
            .as_f64()
            .unwrap_or_else(|| panic!("perplexity.json: no {model}-{variant}"));
        assert!(
            value.is_finite() && value > 1.0 && value < 100.0,
            "perplexity of {model}-{variant} is {value}"
        );
        assert_eq!(
            entry["model_sha256"], sha,
            "perplexity.json: {model}-{variant} model_sha256"
        );
    }
}

#[test]
fn f32_oracle_agrees_with_float64_forward_pass() {
    let f = fixture("oracle-check.json");
    let oracle: Vec<f64> = f["float64_vs_f32_oracle"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let q4_1: Vec<f64> = f["float64_vs_q4_1"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(
        oracle.len(),
        f["prompts"].as_array().unwrap().len(),
        "one difference per prompt"
    );
    for (d_oracle, d_q4) in oracle.iter().zip(&q4_1) {
        assert!(
            *d_oracle < 1e-4,
            "llama.cpp's f32 run is {d_oracle} away from float64: not an oracle for f32 code"
        );
        assert!(
            d_q4 > d_oracle,
            "the Q4_1 run should be further from float64 than the f32 run"
        );
    }
}
