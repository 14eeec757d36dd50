//! What the engine runs: a model of any family (its layers' weights and RoPE tables), the
//! engine that holds it with its kernels, and a greedy run's result. The forward pass over
//! them is in `engine.rs` and `engine/layer.rs`.

use ch04_forward::Config;
use ch06_quantization::Kernels;
use ch07_simd_parallel::kernels::ManyTokens;

use super::family::Family;
use super::rope::LazyRope;
use crate::matrix::Matrix;

/// One decoder layer. The optional norms are present exactly when the family uses them.
pub struct Layer {
    pub attn_norm: Vec<f32>,
    pub wq: Matrix,
    pub wk: Matrix,
    pub wv: Matrix,
    pub wo: Matrix,
    /// Biases added to Q, K and V (Qwen2's), `(q_dim)`, `(kv_dim)`, `(kv_dim)`.
    pub bq: Option<Vec<f32>>,
    pub bk: Option<Vec<f32>>,
    pub bv: Option<Vec<f32>>,
    pub q_norm: Option<Vec<f32>>,
    pub k_norm: Option<Vec<f32>>,
    pub post_attn_norm: Option<Vec<f32>>,
    pub ffn_norm: Vec<f32>,
    pub w_gate: Matrix,
    pub w_up: Matrix,
    pub w_down: Matrix,
    pub post_ffn_norm: Option<Vec<f32>>,
    /// Positions a query sees, counting itself (`None`: all before it).
    pub window: Option<usize>,
    /// Which of the model's RoPE tables this layer rotates with.
    pub rope: usize,
}

/// A model of any family.
pub struct Model {
    pub config: Config,
    pub family: Family,
    pub embed: Matrix,
    pub layers: Vec<Layer>,
    pub final_norm: Vec<f32>,
    /// `None` when tied to `embed`.
    pub lm_head: Option<Matrix>,
    /// One RoPE per base, each filled as positions are reached (see `engine/rope.rs`).
    pub ropes: Vec<LazyRope>,
}

impl Model {
    pub fn lm_head(&self) -> &Matrix {
        self.lm_head.as_ref().unwrap_or(&self.embed)
    }

    /// The longest sequence the model runs: the positions its RoPE can rotate (the file's
    /// context length, at most `config::MAX_CONTEXT`).
    pub fn max_positions(&self) -> usize {
        self.ropes.iter().map(|r| r.max_pos).min().unwrap_or(0)
    }

    /// Every matrix, the embedding first.
    pub fn matrices(&self) -> impl Iterator<Item = &Matrix> {
        std::iter::once(&self.embed)
            .chain(
                self.layers
                    .iter()
                    .flat_map(|l| [&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down]),
            )
            .chain(self.lm_head.as_ref())
    }

    /// Bytes of weights one decode step reads (every layer matrix, the LM head, one
    /// embedding row; norms are too small to count).
    pub fn bytes_read_per_token(&self) -> usize {
        let layers: usize = self
            .layers
            .iter()
            .flat_map(|l| [&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down])
            .map(Matrix::bytes)
            .sum();
        layers + self.lm_head().bytes() + self.embed.bytes() / self.embed.rows()
    }
}

/// A model, its kernels, and the chunk size of a prefill.
pub struct Engine<'m> {
    pub model: &'m Model,
    pub kernels: &'m dyn Kernels,
    pub kkernels: &'m dyn ManyTokens,
    pub chunk: usize,
    /// How many threads its decode steps take (`engine/tune.rs`).
    pub(super) tuner: super::tune::DecodeTuner,
}

/// A greedy run: the generated ids and the two phases' times.
pub struct Run {
    pub ids: Vec<u32>,
    pub prefill_seconds: f64,
    pub decode_seconds: f64,
}

impl Run {
    pub fn decode_tok_s(&self) -> f64 {
        self.ids.len().saturating_sub(1) as f64 / self.decode_seconds.max(1e-9)
    }
}
