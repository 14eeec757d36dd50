//! Text in and out: chapter 2's tokenizer, plus the one fact it leaves to the model
//! directory, whether a BOS token goes in front of a prompt.

use std::path::Path;

use ch02_tokenizer::{StreamDecoder, Tokenizer};

use crate::Error;

/// The tokenizer of a model directory and its BOS rule.
pub struct Text {
    pub tokenizer: Tokenizer,
    /// The id to put in front of every prompt, if the model wants one. SmolLM2's
    /// `tokenizer_config.json` says `"add_bos_token": false`, as llama.cpp also reads it.
    pub bos: Option<u32>,
}

impl Text {
    /// Loads `tokenizer.json`, and `add_bos_token` from `tokenizer_config.json` (absent: no BOS).
    pub fn load(dir: &Path, bos_token_id: Option<u32>) -> Result<Text, Error> {
        let tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
        let config_path = dir.join("tokenizer_config.json");
        let add_bos = match std::fs::read_to_string(&config_path) {
            Err(_) => false,
            Ok(text) => {
                let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
                    Error::Tokenizer(format!("{} is not valid JSON: {e}", config_path.display()))
                })?;
                v.get("add_bos_token")
                    .and_then(serde_json::Value::as_bool)
                    .unwrap_or(false)
            }
        };
        Ok(Text {
            tokenizer,
            bos: bos_token_id.filter(|_| add_bos),
        })
    }

    /// The ids of a prompt: BOS if the model wants it, then the text, with control
    /// tokens such as `<|im_start|>` recognised (as llama.cpp does for prompts).
    pub fn encode(&self, prompt: &str) -> Vec<u32> {
        let mut ids: Vec<u32> = self.bos.into_iter().collect();
        ids.extend(self.tokenizer.encode(prompt, true));
        ids
    }

    /// A decoder that turns ids into text one at a time, holding back the bytes of a
    /// character split across tokens.
    pub fn stream(&self) -> StreamDecoder<'_> {
        StreamDecoder::new(&self.tokenizer)
    }

    /// The text of `ids`.
    pub fn decode(&self, ids: &[u32]) -> Result<String, Error> {
        self.tokenizer
            .decode(ids)
            .map_err(|e| Error::Tokenizer(e.to_string()))
    }
}
