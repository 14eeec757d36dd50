//! The model file a command reads, and the model loaded from it.

use std::path::PathBuf;

use ch01_tensors::models;

use crate::Args;

/// The file to read: `-m`/`--model`, or the default SmolLM2 GGUF (fetched on first use).
pub(crate) fn model_path(a: &Args) -> Result<PathBuf, String> {
    match &a.model {
        Some(p) => Ok(p.clone()),
        None => {
            let p = models::smollm2_gguf();
            if !p.exists() {
                models::fetch("smollm2-gguf")?; // the GGUF alone: hf/ is for chapters 1-5
            }
            models::require(&p)
        }
    }
}

pub(crate) fn open_model(a: &Args) -> Result<ch08_gguf::Loaded, String> {
    ch08_gguf::load(&model_path(a)?).map_err(|e| e.to_string())
}
