//! Chapter 6's bytes against the outside world:
//!
//! - the `gguf` Python package's quantizers (llama.cpp's rules in numpy) on random and
//!   adversarial blocks (`fixtures/quant/quantizers.json`);
//! - the blocks shipped in SmolLM2's Q4_1 GGUF (`fixtures/quant/smollm2-shipped-blocks.json`):
//!   this workspace's f32 weights were dequantized from them, so quantizing them back with
//!   llama.cpp's rule must give the same bytes, tensor by tensor.
//!
//! Both fixtures are written by `scripts/make_quant_fixtures.py`.

use ch01_tensors::models;
use ch01_tensors::safetensors::SafeTensors;
use ch06_quantization::{Format, QMatrix, ScaleRule};
use serde_json::Value;
use sha2::{Digest, Sha256};

fn fixture(name: &str) -> Value {
    let path = models::workspace_root().join("fixtures/quant").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; regenerate it with scripts/make_quant_fixtures.py",
            path.display()
        )
    });
    serde_json::from_str(&text).unwrap()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn quantizers_match_the_gguf_package_byte_for_byte() {
    let fx = fixture("quantizers.json");
    let cases = fx["cases"].as_array().expect("cases");
    assert!(cases.len() >= 30, "the fixture has {} cases", cases.len());
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let values: Vec<f32> = case["bits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| f32::from_bits(b.as_u64().unwrap() as u32))
            .collect();
        let numbers: Vec<f32> = case["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap() as f32)
            .collect();
        assert!(
            values == numbers || values.iter().any(|v| v.is_nan()),
            "{name}: the values and their bit patterns disagree"
        );
        for (key, format) in [
            ("q8_0", Format::Q8_0),
            ("q4_0", Format::Q4_0),
            ("q4_1", Format::Q4_1),
        ] {
            let m = QMatrix::quantize(&values, 1, values.len(), format, ScaleRule::Absmax).unwrap();
            let ours = hex(m.row_bytes(0));
            let theirs = case[key].as_str().unwrap();
            if ours != theirs {
                let size = format.row_bytes(32) * 2;
                let at = ours
                    .bytes()
                    .zip(theirs.bytes())
                    .position(|(a, b)| a != b)
                    .unwrap_or(0)
                    / 2;
                panic!(
                    "case {name:?}, {key}: byte {at} (block {}) differs from the gguf package's:\n  ours:   {}\n  theirs: {}",
                    at / (size / 2),
                    &ours[at / (size / 2) * size..][..size],
                    &theirs[at / (size / 2) * size..][..size]
                );
            }
        }
    }
}

#[test]
fn smollm2_quantizes_back_to_its_shipped_blocks() {
    let fx = fixture("smollm2-shipped-blocks.json");
    let file = models::require(&models::smollm2_hf_dir().join("model.safetensors"))
        .unwrap_or_else(|e| panic!("{e}"));
    let st = SafeTensors::open(&file).unwrap_or_else(|e| panic!("{e}"));
    let (mut q4_1, mut q8_0) = (0, 0);
    for t in fx["tensors"].as_array().unwrap() {
        let name = t["hf_name"].as_str().unwrap();
        let format = Format::parse(t["type"].as_str().unwrap()).unwrap();
        let shape: Vec<usize> = t["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as usize)
            .collect();
        let tensor = st
            .tensor(name)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .contiguous();
        let values = tensor.as_slice().unwrap();
        let m = QMatrix::quantize(values, shape[0], shape[1], format, ScaleRule::Absmax).unwrap();
        let bytes: Vec<u8> = (0..shape[0])
            .flat_map(|r| m.row_bytes(r).to_vec())
            .collect();
        assert_eq!(
            bytes.len() as u64,
            t["bytes"].as_u64().unwrap(),
            "{name}: size"
        );
        let digest = hex(&Sha256::digest(&bytes));
        assert!(
            digest == t["sha256_hf_order"].as_str().unwrap(),
            "{name} ({}): quantizing the f32 weights does not give the shipped blocks; first bytes ours {} vs shipped {}",
            t["gguf_name"],
            hex(&bytes[..64]),
            t["first_bytes_hex"]
        );
        match format {
            Format::Q4_1 => q4_1 += 1,
            _ => q8_0 += 1,
        }
    }
    eprintln!("{q4_1} Q4_1 tensors and {q8_0} Q8_0 tensors reproduced bit for bit");
    assert_eq!(
        (q4_1, q8_0),
        (210, 1),
        "SmolLM2 has 210 Q4_1 matrices and a Q8_0 embedding"
    );
}
