//! Where the book's real models live on disk, and fetching them on first use.
//!
//! Every chapter reads the same files, prepared once by `scripts/models.sh`
//! (which `cargo xtask fetch-models` also runs):
//!
//! ```text
//! models/                                  ($LLM_BOOK_MODELS overrides this)
//! ├── smollm2-135m-instruct/
//! │   ├── SmolLM2-135M-Instruct.Q4_1.gguf   the default model, as shipped (chapters 8–9)
//! │   └── hf/                               the same weights in Hugging Face layout (chapters 1–5)
//! │       ├── config.json
//! │       ├── tokenizer.json
//! │       ├── tokenizer_config.json         chat template and special tokens
//! │       └── model.safetensors             F32
//! ├── gemma-3-270m/
//! │   └── gemma-3-270m-q4_k_m.gguf          the second model (SentencePiece, Q4_K_M)
//! └── llamacpp-0.3.36/                      llama.cpp's test material, no weights
//!     ├── vocab/ggml-vocab-*.gguf           vocabulary-only files, with .inp/.out test vectors
//!     └── templates/*.jinja                 the chat templates of the model families
//! ```
//!
//! The script writes every file under a temporary name and renames it into place only
//! once its sha256 (or, for converted files, its checks) pass, so a path that exists is
//! complete.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root: two levels above this crate's manifest.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `$LLM_BOOK_MODELS`, or `models/` at the workspace root.
pub fn models_dir() -> PathBuf {
    match std::env::var_os("LLM_BOOK_MODELS") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => workspace_root().join("models"),
    }
}

/// The default model as shipped: SmolLM2-135M-Instruct, Q4_1 GGUF.
pub fn smollm2_gguf() -> PathBuf {
    models_dir().join("smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf")
}

/// SmolLM2 converted to the Hugging Face layout (`config.json`, `tokenizer.json`,
/// `model.safetensors`), read by chapters 1–5.
pub fn smollm2_hf_dir() -> PathBuf {
    models_dir().join("smollm2-135m-instruct/hf")
}

/// The second model: Gemma-3-270M, Q4_K_M GGUF.
pub fn gemma3_gguf() -> PathBuf {
    models_dir().join("gemma-3-270m/gemma-3-270m-q4_k_m.gguf")
}

/// llama.cpp's test material at the fixtures' pinned version (`scripts/models.sh llamacpp`):
/// `vocab/ggml-vocab-NAME.gguf` (with `.inp`/`.out` test vectors) and `templates/*.jinja`.
pub fn llamacpp_dir() -> PathBuf {
    models_dir().join("llamacpp-0.3.36")
}

/// llama.cpp's vocabulary-only file `ggml-vocab-{name}.gguf` (`llama-bpe`, `qwen2`, …).
pub fn llamacpp_vocab(name: &str) -> PathBuf {
    llamacpp_dir().join(format!("vocab/ggml-vocab-{name}.gguf"))
}

/// A path as the binaries print it: relative to the workspace when it is inside it
/// (`models/smollm2-135m-instruct/hf`), absolute otherwise, so every chapter's output names
/// the same file the same way.
pub fn shown(path: &Path) -> String {
    let root = workspace_root().canonicalize().unwrap_or_default();
    let full = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    full.strip_prefix(&root)
        .unwrap_or(&full)
        .display()
        .to_string()
}

/// The command a person runs to fetch and prepare the models.
pub const FETCH_HINT: &str = "cargo xtask fetch-models   (or: bash scripts/models.sh all)";

/// For tests: the path if it exists, otherwise an error that says how to fetch it.
/// Tests that need a model call this and fail with the message; they never skip.
pub fn require(path: &Path) -> Result<PathBuf, String> {
    if path.exists() {
        Ok(path.to_path_buf())
    } else {
        Err(format!(
            "model file missing: {}\nfetch and prepare the models with:\n    {FETCH_HINT}",
            path.display()
        ))
    }
}

/// Runs `scripts/models.sh <which>` with the terminal attached, so its progress bars show.
/// `which` is `smollm2` (the GGUF and the f32 copy chapters 1-5 read), `smollm2-gguf` (the
/// GGUF alone), `gemma3` or `all`.
pub fn fetch(which: &str) -> Result<(), String> {
    let script = workspace_root().join("scripts/models.sh");
    eprintln!("fetching model '{which}' with {} ...", script.display());
    let status = Command::new("bash")
        .arg(&script)
        .arg(which)
        .status()
        .map_err(|e| format!("could not run {}: {e}", script.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "fetching '{which}' failed ({status}); see the messages above, then retry with:\n    {FETCH_HINT}"
        ))
    }
}

/// For binaries: the Hugging Face directory of SmolLM2, fetched and converted on first use.
///
/// Fetching happens only when the folder does not exist at all. A folder that exists but
/// whose `model.safetensors` is missing, a dangling or looping link, or not a regular file is
/// someone's files, and an error names it: the fetch script never replaces what it did not
/// make.
pub fn ensure_smollm2_hf() -> Result<PathBuf, String> {
    let dir = smollm2_hf_dir();
    if std::fs::symlink_metadata(&dir).is_err() {
        fetch("smollm2")?;
    }
    let file = dir.join("model.safetensors");
    match std::fs::metadata(&file) {
        Ok(meta) if meta.is_file() => Ok(dir),
        Ok(_) => Err(format!("{} is not a regular file", file.display())),
        Err(e) => Err(format!(
            "{} cannot be read ({e}); the folder exists, so it is not fetched again over your files. \
             Fix or move {}, then run:\n    {FETCH_HINT}",
            file.display(),
            dir.display()
        )),
    }
}
