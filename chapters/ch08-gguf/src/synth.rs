//! Small model files of each architecture people bring, with random weights: llama.cpp's
//! tensor names and metadata keys, a real vocabulary, and weights from a seed.
//!
//! Which tensors each architecture has, their shapes and the keys its loader reads are
//! llama.cpp's (`src/models/{llama,qwen2,qwen3,phi3,gemma2}.cpp`, `load_arch_hparams` and
//! `load_arch_tensors`; the names in `gguf-py/gguf/constants.py`); the keys a real file has
//! beyond those are what llama.cpp's converter writes for the model each case is named
//! after (`conversion/*.py`). The vocabulary, every `tokenizer.*` key, is copied from one of
//! llama.cpp's vocabulary files (Gemma's from the Gemma-3 file the book already uses).
//! Such a file's text is noise, but two engines that read it the same way give the same
//! logits: that is what `tests/families.rs` checks against llama.cpp's.

pub mod hostile;
mod random;

use std::path::PathBuf;

use ch01_tensors::models;
use ch06_quantization::{Format, QMatrix, ScaleRule};

use crate::error::{Error, Result};
use crate::gguf::{Array, DEFAULT_ALIGNMENT, Gguf, Value};
use crate::gguf_write::Writer;
use crate::types::GgmlType;
pub use random::Stream;

// ANCHOR: cases
/// The architectures, each as the model it imitates stores it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// `llama` as Llama 3.2 files are: RoPE frequencies scaled by `rope_freqs.weight`,
    /// a tied head, the llama-bpe vocabulary.
    Llama3,
    /// `llama` as Mistral's files are: SentencePiece (llama-spm), a separate output.
    Mistral,
    /// `qwen2` (Qwen 2.5): biases on Q, K and V, a tied head.
    Qwen2,
    /// `qwen3`: an RMSNorm on each head of Q and K, heads wider than dim / heads.
    Qwen3,
    /// `phi3` (Phi-3.5-mini): Q, K and V in one `attn_qkv`, gate and up in one `ffn_up`,
    /// LongRoPE factors.
    Phi3,
    /// `gemma2`: norms after attention and the FFN too, soft-capped attention scores and
    /// logits, sliding-window attention on every other layer.
    Gemma2,
}
// ANCHOR_END: cases

impl Arch {
    pub const ALL: [Arch; 6] = [
        Arch::Llama3,
        Arch::Mistral,
        Arch::Qwen2,
        Arch::Qwen3,
        Arch::Phi3,
        Arch::Gemma2,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama3 => "llama3",
            Arch::Mistral => "mistral",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
            Arch::Phi3 => "phi3",
            Arch::Gemma2 => "gemma2",
        }
    }

    pub fn parse(s: &str) -> Option<Arch> {
        Arch::ALL.into_iter().find(|a| a.name() == s)
    }

    /// `general.architecture`.
    pub fn gguf_name(self) -> &'static str {
        match self {
            Arch::Llama3 | Arch::Mistral => "llama",
            other => other.name(),
        }
    }

    /// The vocabulary the model imitated has (one of [`VOCABS`]). Qwen3's files say
    /// `tokenizer.ggml.pre = "qwen2"`: Qwen 2.5's vocabulary.
    pub fn vocab(self) -> &'static str {
        match self {
            Arch::Llama3 => "llama-bpe",
            Arch::Mistral => "llama-spm",
            Arch::Qwen2 | Arch::Qwen3 => "qwen2",
            Arch::Phi3 => "phi-3",
            Arch::Gemma2 => "gemma3",
        }
    }

    /// Heads twice as wide as dim / heads (as Qwen3's and Gemma-2's are): Q's rows are not
    /// the model's width.
    fn wide_heads(self) -> bool {
        matches!(self, Arch::Qwen3 | Arch::Gemma2)
    }

    /// Whether the file has `output.weight` (the others reuse the embedding).
    fn untied(self) -> bool {
        matches!(self, Arch::Mistral | Arch::Phi3)
    }
}

/// The vocabularies a file can take: llama.cpp's `ggml-vocab-NAME.gguf`, or `gemma3`, the
/// Gemma-3 file's (Gemma-2's own family of SentencePiece vocabularies).
pub const VOCABS: [&str; 5] = ["llama-bpe", "llama-spm", "qwen2", "phi-3", "gemma3"];

/// The file vocabulary `name` (one of [`VOCABS`]) is copied from.
pub fn vocab_file(name: &str) -> PathBuf {
    match name {
        "gemma3" => models::gemma3_gguf(),
        other => models::llamacpp_vocab(other),
    }
}

/// How the matrices are stored (norms, biases and RoPE factors are always F32, as
/// llama.cpp's quantizer leaves them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weights {
    F32,
    Q8_0,
    /// Q4_0 matrices, the embedding Q8_0 (for the benchmark shapes).
    Q4_0,
}

impl Weights {
    pub fn parse(s: &str) -> Option<Weights> {
        match s {
            "f32" => Some(Weights::F32),
            "q8_0" => Some(Weights::Q8_0),
            "q4_0" => Some(Weights::Q4_0),
            _ => None,
        }
    }

    /// `general.file_type` (llama.cpp's `LLAMA_FTYPE_*`).
    fn file_type(self) -> u32 {
        match self {
            Weights::F32 => 0,
            Weights::Q8_0 => 7,
            Weights::Q4_0 => 2,
        }
    }
}

/// A model's size. Head width is dim / heads (twice that for `Arch::wide_heads`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub name: &'static str,
    pub dim: usize,
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub ffn: usize,
    /// Gemma-2's sliding window: short in the small shapes, so that prompts cross it.
    pub window: u32,
}

// ANCHOR: shapes
pub const SHAPES: [Shape; 3] = [
    // the tests' files: two layers, grouped-query attention, every row whole Q8_0 blocks
    Shape {
        name: "small",
        dim: 64,
        layers: 2,
        heads: 4,
        kv_heads: 2,
        ffn: 128,
        window: 16,
    },
    // the other shape the bar checks: three layers, four query heads per KV head
    Shape {
        name: "wide",
        dim: 128,
        layers: 3,
        heads: 8,
        kv_heads: 2,
        ffn: 352,
        window: 24,
    },
    // Qwen2.5-0.5B's size, for `ch08-gguf bench` (a Llama file of it is the same size)
    Shape {
        name: "0.5b",
        dim: 896,
        layers: 24,
        heads: 14,
        kv_heads: 2,
        ffn: 4864,
        window: 4096,
    },
];
// ANCHOR_END: shapes

impl Shape {
    pub fn parse(s: &str) -> Option<Shape> {
        SHAPES.into_iter().find(|x| x.name == s)
    }
}

/// Everything a synthetic file is made from: the same spec, the same bytes.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    pub arch: Arch,
    pub weights: Weights,
    pub shape: Shape,
    pub seed: u64,
    /// Another vocabulary than the architecture's own (one of [`VOCABS`]): a Llama-shaped
    /// file the size of a Qwen one, for the benchmark.
    pub vocab: Option<&'static str>,
}

impl Spec {
    fn head_dim(&self) -> usize {
        let hd = self.shape.dim / self.shape.heads;
        if self.arch.wide_heads() { 2 * hd } else { hd }
    }

    pub fn vocab(&self) -> &'static str {
        self.vocab.unwrap_or(self.arch.vocab())
    }

    /// The `synth` arguments that make this file.
    pub fn args(&self) -> String {
        let w = match self.weights {
            Weights::F32 => "f32",
            Weights::Q8_0 => "q8_0",
            Weights::Q4_0 => "q4_0",
        };
        let vocab = self
            .vocab
            .map(|v| format!(" --vocab {v}"))
            .unwrap_or_default();
        format!(
            "--arch {} --seed {} --weights {w} --shape {}{vocab}",
            self.arch.name(),
            self.seed,
            self.shape.name
        )
    }
}

/// The file for `spec`, its vocabulary read from [`vocab_file`].
pub fn build(spec: &Spec) -> Result<Writer> {
    let path = vocab_file(spec.vocab());
    if let Err(message) = models::require(&path) {
        let source = std::io::Error::new(std::io::ErrorKind::NotFound, message);
        return Err(Error::Io { path, source });
    }
    let mut bytes = std::fs::read(&path).map_err(|source| Error::Io {
        path: path.clone(),
        source,
    })?;
    // llama.cpp's vocabulary-only files have no tensors and end with the header, before
    // the padding that would start a data section: padded here, so the parser accepts them.
    bytes.resize(
        (bytes.len() as u64).next_multiple_of(DEFAULT_ALIGNMENT) as usize,
        0,
    );
    let vocab = Gguf::parse(&bytes)?;
    let mut b = Builder {
        w: Writer::new(),
        spec: *spec,
    };
    let n_vocab = metadata(&mut b, &vocab)?;
    tensors(&mut b, n_vocab)?;
    Ok(b.w)
}

struct Builder {
    w: Writer,
    spec: Spec,
}

impl Builder {
    /// `key` under the architecture's prefix.
    fn arch_key(&mut self, key: &str, v: Value) {
        let k = format!("{}.{key}", self.spec.arch.gguf_name());
        self.w.set(&k, v);
    }

    /// A `(rows, cols)` weight matrix (ggml dims `[cols, rows]`), values of standard deviation
    /// `gain / √cols`, in the spec's format (`embedding`: Q8_0 where matrices are Q4_0).
    fn matrix(
        &mut self,
        name: &str,
        rows: usize,
        cols: usize,
        gain: f32,
        embedding: bool,
    ) -> Result<()> {
        let values = Stream::for_tensor(self.spec.seed, name)
            .uniform(rows * cols, gain / (cols as f32).sqrt());
        let format = match self.spec.weights {
            Weights::F32 => Format::F32,
            Weights::Q8_0 => Format::Q8_0,
            Weights::Q4_0 if embedding => Format::Q8_0,
            Weights::Q4_0 => Format::Q4_0,
        };
        let dims = [cols as u64, rows as u64];
        if format == Format::F32 {
            return self
                .w
                .tensor(name, &dims, GgmlType::F32, f32_bytes(&values));
        }
        let q = QMatrix::quantize(&values, rows, cols, format, ScaleRule::Absmax).map_err(
            |message| Error::Tensor {
                name: name.into(),
                message,
            },
        )?;
        let ty = if format == Format::Q8_0 {
            GgmlType::Q8_0
        } else {
            GgmlType::Q4_0
        };
        self.w
            .tensor(name, &dims, ty, q.rows_bytes(0, rows).to_vec())
    }

    /// A vector of F32 values.
    fn vector(&mut self, name: &str, values: &[f32]) -> Result<()> {
        self.w.tensor(
            name,
            &[values.len() as u64],
            GgmlType::F32,
            f32_bytes(values),
        )
    }

    /// A norm's weights: 1 ± 0.2.
    fn norm(&mut self, name: &str, len: usize) -> Result<()> {
        self.scaled_norm(name, len, 1.0)
    }

    /// A norm's weights: `scale`·(1 ± 0.2).
    fn scaled_norm(&mut self, name: &str, len: usize, scale: f32) -> Result<()> {
        let v: Vec<f32> = Stream::for_tensor(self.spec.seed, name)
            .uniform(len, 0.2 / 3.0f32.sqrt())
            .iter()
            .map(|x| scale * (1.0 + x))
            .collect();
        self.vector(name, &v)
    }
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

// ANCHOR: metadata
/// The metadata: general keys, the architecture's hyper-parameters as the converter writes
/// them for the model imitated, and the vocabulary file's `tokenizer.*` keys. Returns the
/// vocabulary's size (the embedding's rows).
fn metadata(b: &mut Builder, vocab: &Gguf) -> Result<usize> {
    let s = b.spec;
    let (shape, hd) = (s.shape, s.head_dim() as u32);
    let u = |n: usize| Value::U32(n as u32);
    b.w.set(
        "general.architecture",
        Value::String(s.arch.gguf_name().into()),
    );
    b.w.set("general.name", Value::String(format!("synth {}", s.args())));
    b.w.set("general.file_type", Value::U32(s.weights.file_type()));
    if s.weights != Weights::F32 {
        b.w.set("general.quantization_version", Value::U32(2));
    }
    let (ctx, base, eps) = match s.arch {
        Arch::Llama3 => (131_072, Some(500_000.0), 1e-5),
        Arch::Mistral => (32_768, Some(1_000_000.0), 1e-5),
        Arch::Qwen2 => (32_768, Some(1_000_000.0), 1e-6),
        Arch::Qwen3 => (40_960, Some(1_000_000.0), 1e-6),
        Arch::Phi3 => (131_072, Some(10_000.0), 1e-5),
        Arch::Gemma2 => (8_192, None, 1e-6), // no key: llama.cpp's default base, 10 000
    };
    b.arch_key("block_count", u(shape.layers));
    b.arch_key("context_length", Value::U32(ctx));
    b.arch_key("embedding_length", u(shape.dim));
    b.arch_key("feed_forward_length", u(shape.ffn));
    b.arch_key("attention.head_count", u(shape.heads));
    b.arch_key("attention.head_count_kv", u(shape.kv_heads));
    if let Some(base) = base {
        b.arch_key("rope.freq_base", Value::F32(base));
    }
    b.arch_key("attention.layer_norm_rms_epsilon", Value::F32(eps));
    if matches!(
        s.arch,
        Arch::Llama3 | Arch::Mistral | Arch::Qwen3 | Arch::Gemma2
    ) {
        // the converter writes these when config.json has head_dim
        b.arch_key("attention.key_length", Value::U32(hd));
        b.arch_key("attention.value_length", Value::U32(hd));
    }
    if matches!(s.arch, Arch::Llama3 | Arch::Mistral | Arch::Phi3) {
        b.arch_key("rope.dimension_count", Value::U32(hd));
    }
    match s.arch {
        Arch::Phi3 => {
            // Phi-3.5-mini: 128k positions from 4k, LongRoPE's attention factor
            // √(1 + ln 32 / ln 4096) = √(1 + 5/12), and a window wider than any context
            // (llama.cpp turns it off)
            b.arch_key("rope.scaling.original_context_length", Value::U32(4096));
            let attn = (1.0f32 + 5.0 / 12.0).sqrt();
            b.arch_key("rope.scaling.attn_factor", Value::F32(attn));
            b.arch_key("attention.sliding_window", Value::U32(262_144));
        }
        Arch::Gemma2 => {
            b.arch_key("attn_logit_softcapping", Value::F32(50.0));
            b.arch_key("final_logit_softcapping", Value::F32(30.0));
            b.arch_key("attention.sliding_window", Value::U32(shape.window));
        }
        _ => {}
    }
    let mut n_vocab = None;
    for (key, value) in &vocab.metadata {
        if key.starts_with("tokenizer.") {
            if key == "tokenizer.ggml.tokens"
                && let Value::Array(Array::String(t)) = value
            {
                n_vocab = Some(t.len());
            }
            b.w.set(key, value.clone());
        }
    }
    let n_vocab = n_vocab.ok_or_else(|| Error::Metadata {
        key: "tokenizer.ggml.tokens".into(),
        message: "the vocabulary file has no token list".into(),
    })?;
    if matches!(s.arch, Arch::Llama3 | Arch::Mistral) {
        b.arch_key("vocab_size", u(n_vocab));
    }
    Ok(n_vocab)
}
// ANCHOR_END: metadata

// ANCHOR: tensors
/// The tensors, in the order llama.cpp's converter writes them.
fn tensors(b: &mut Builder, n_vocab: usize) -> Result<()> {
    let s = b.spec;
    let (dim, ffn, hd) = (s.shape.dim, s.shape.ffn, s.head_dim());
    let (q_dim, kv_dim) = (s.shape.heads * hd, s.shape.kv_heads * hd);
    // Embedding rows of standard deviation 6/√dim: a normalised state (RMS near 1) against
    // such a row gives logits of standard deviation near 6, spread enough that the top two
    // are rarely closer than the engines' differences.
    b.matrix("token_embd.weight", n_vocab, dim, 6.0, true)?;
    match s.arch {
        Arch::Llama3 => b.vector("rope_freqs.weight", &llama3_rope_factors(hd, 500_000.0))?,
        Arch::Phi3 => {
            let n = hd / 2;
            let ramp = |top: f32| -> Vec<f32> {
                (0..n)
                    .map(|i| 1.0 + (top - 1.0) * (i as f32 / (n - 1) as f32).powi(2))
                    .collect()
            };
            b.vector("rope_factors_long.weight", &ramp(40.0))?;
            b.vector("rope_factors_short.weight", &ramp(2.5))?;
        }
        _ => {}
    }
    for l in 0..s.shape.layers {
        let n = |t: &str| format!("blk.{l}.{t}.weight");
        b.norm(&n("attn_norm"), dim)?;
        if s.arch == Arch::Phi3 {
            b.matrix(&n("attn_qkv"), q_dim + 2 * kv_dim, dim, 1.0, false)?;
        } else {
            b.matrix(&n("attn_q"), q_dim, dim, 1.0, false)?;
            b.matrix(&n("attn_k"), kv_dim, dim, 1.0, false)?;
            b.matrix(&n("attn_v"), kv_dim, dim, 1.0, false)?;
        }
        if s.arch == Arch::Qwen2 {
            for (t, len) in [("attn_q", q_dim), ("attn_k", kv_dim), ("attn_v", kv_dim)] {
                let name = format!("blk.{l}.{t}.bias");
                let v = Stream::for_tensor(s.seed, &name).uniform(len, 0.3);
                b.vector(&name, &v)?;
            }
        }
        if s.arch == Arch::Qwen3 {
            b.norm(&n("attn_q_norm"), hd)?;
            b.norm(&n("attn_k_norm"), hd)?;
        }
        b.matrix(&n("attn_output"), dim, q_dim, 1.0, false)?;
        if s.arch == Arch::Gemma2 {
            // Gemma scales the embedding by √width; post-norms of 12 keep each block's output
            // comparable, so the last state is not just the input token's embedding (which
            // the tied head would then predict, whatever the layers did)
            b.scaled_norm(&n("post_attention_norm"), dim, 12.0)?;
        }
        b.norm(&n("ffn_norm"), dim)?;
        if s.arch == Arch::Phi3 {
            b.matrix(&n("ffn_up"), 2 * ffn, dim, 1.0, false)?; // gate rows, then up rows
        } else {
            b.matrix(&n("ffn_gate"), ffn, dim, 1.0, false)?;
            b.matrix(&n("ffn_up"), ffn, dim, 1.0, false)?;
        }
        b.matrix(&n("ffn_down"), dim, ffn, 1.0, false)?;
        if s.arch == Arch::Gemma2 {
            b.scaled_norm(&n("post_ffw_norm"), dim, 12.0)?;
        }
    }
    b.norm("output_norm.weight", dim)?;
    if s.arch.untied() {
        b.matrix("output.weight", n_vocab, dim, 6.0, false)?;
    }
    Ok(())
}
// ANCHOR_END: tensors

/// Llama 3's RoPE frequency factors (`rope_freqs.weight`) as llama.cpp's converter computes
/// them from Llama 3.2's `rope_scaling` (factor 32, low 1, high 4, 8192 original positions):
/// 1 for wavelengths under 8192/4, 32 over 8192, and a smooth step between.
pub fn llama3_rope_factors(head_dim: usize, base: f64) -> Vec<f32> {
    let (factor, low, high, old_ctx) = (32.0f64, 1.0f64, 4.0f64, 8192.0f64);
    (0..head_dim / 2)
        .map(|i| {
            let freq = 1.0 / base.powf((2 * i) as f64 / head_dim as f64);
            let wavelen = 2.0 * std::f64::consts::PI / freq;
            let f = if wavelen < old_ctx / high {
                1.0
            } else if wavelen > old_ctx / low {
                factor
            } else {
                let smooth = (old_ctx / wavelen - low) / (high - low);
                1.0 / ((1.0 - smooth) / factor + smooth)
            };
            f as f32
        })
        .collect()
}
