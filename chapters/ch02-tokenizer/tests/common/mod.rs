//! Shared by the tests that need SmolLM2's tokenizer.json.
#![allow(dead_code)]

use ch02_tokenizer::{Model, Tokenizer, smollm2_tokenizer_path};

/// SmolLM2's tokenizer, or a panic that says how to fetch it (tests never skip).
pub fn smollm2() -> Tokenizer {
    let path = ch01_tensors::models::require(&smollm2_tokenizer_path())
        .unwrap_or_else(|msg| panic!("{msg}"));
    Tokenizer::from_file(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// What decode(encode(text)) must give: `text` without the bytes that have no token
/// (llama.cpp drops them; for SmolLM2 these are the control characters U+0004, U+0006,
/// U+0013, U+0014, U+0016, U+001D and the lead bytes F1, F2 of planes 4 to 11, whose
/// remaining bytes then decode to U+FFFD).
pub fn encodable(tok: &Tokenizer, text: &str) -> String {
    let Model::ByteLevelBpe { byte_tokens, .. } = tok.model() else {
        return text.to_string();
    };
    let kept: Vec<u8> = text
        .bytes()
        .filter(|&b| byte_tokens[b as usize].is_some())
        .collect();
    String::from_utf8_lossy(&kept).into_owned()
}
