//! SmolLM2 with quantized weights.
//!
//! [`QModel`] is chapter 4's [`Model`] with every matrix a [`QMatrix`]: the seven
//! projections of each layer in the chosen format, and the embedding table, which is also
//! the LM head (SmolLM2 ties them), in Q8_0. The norms' gains stay f32: there are 61 × 576
//! of them, nothing to save.
//!
//! Why the embedding gets 8 bits even in a 4-bit model: as the LM head it produces the
//! logits directly, with no later layer to average its error away, and it is the one matrix
//! whose error shows up unfiltered in every choice of the next token. It is what
//! SmolLM2's shipped Q4_1 file does too (its `token_embd.weight` is Q8_0), so the
//! chapter's Q4_1 model is the shipped one, block for block.

use ch03_attention::RopeTable;
use ch04_forward::{Config, Model};
use rayon::prelude::*;

use crate::Error;
use crate::matrix::{Format, QMatrix};
use crate::search::ScaleRule;

// ANCHOR: qlayer
/// One decoder layer's weights (SmolLM2-135M's shapes: dim 576, q_dim 576, kv_dim 192, ffn 1536).
pub struct QLayer {
    pub input_norm: Vec<f32>, // (dim)
    pub wq: QMatrix,          // (q_dim, dim)
    pub wk: QMatrix,          // (kv_dim, dim)
    pub wv: QMatrix,          // (kv_dim, dim)
    pub wo: QMatrix,          // (dim, q_dim)
    pub post_norm: Vec<f32>,  // (dim)
    pub w_gate: QMatrix,      // (ffn, dim)
    pub w_up: QMatrix,        // (ffn, dim)
    pub w_down: QMatrix,      // (dim, ffn)
}

/// The model, with weights in `format`.
pub struct QModel {
    pub config: Config,
    /// The format of the layers' matrices.
    pub format: Format,
    pub embed: QMatrix, // (vocab, dim): Q8_0, or f32 in an f32 model
    pub layers: Vec<QLayer>,
    pub final_norm: Vec<f32>,     // (dim)
    pub lm_head: Option<QMatrix>, // (vocab, dim), or None when tied to `embed`
    pub rope: RopeTable,
}
// ANCHOR_END: qlayer

impl QModel {
    // ANCHOR: quantize_model
    /// Quantizes chapter 4's f32 model: every layer matrix to `format` (with `rule`), the
    /// embedding (and an untied LM head) to Q8_0. `Format::F32` keeps chapter 4's weights
    /// as they are, without a copy.
    pub fn quantize(model: &Model, format: Format, rule: ScaleRule) -> Result<QModel, Error> {
        let cfg = &model.config;
        let convert = |p: &ch04_forward::weights::Param, f: Format| -> Result<QMatrix, Error> {
            let err =
                |e: String| Error::Config(format!("quantizing a {:?} matrix: {e}", p.shape()));
            match (f, p.shape()) {
                (Format::F32, _) => QMatrix::from_f32(p.tensor().clone()).map_err(err),
                (_, &[rows, cols]) => QMatrix::quantize(p, rows, cols, f, rule).map_err(err),
                (_, shape) => Err(err(format!("expected two dimensions, found {shape:?}"))),
            }
        };
        let big = if format == Format::F32 {
            Format::F32
        } else {
            Format::Q8_0
        };
        let layers = model
            .weights
            .layers
            .par_iter()
            .map(|w| {
                Ok(QLayer {
                    input_norm: w.input_norm.to_vec(),
                    wq: convert(&w.wq, format)?,
                    wk: convert(&w.wk, format)?,
                    wv: convert(&w.wv, format)?,
                    wo: convert(&w.wo, format)?,
                    post_norm: w.post_norm.to_vec(),
                    w_gate: convert(&w.w_gate, format)?,
                    w_up: convert(&w.w_up, format)?,
                    w_down: convert(&w.w_down, format)?,
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(QModel {
            config: cfg.clone(),
            format,
            embed: convert(&model.weights.embed, big)?,
            layers,
            final_norm: model.weights.final_norm.to_vec(),
            lm_head: model
                .weights
                .lm_head
                .as_ref()
                .map(|p| convert(p, big))
                .transpose()?,
            rope: model.rope.clone(),
        })
    }
    // ANCHOR_END: quantize_model

    /// The LM head: its own matrix, or the embedding table when tied.
    pub fn lm_head(&self) -> &QMatrix {
        self.lm_head.as_ref().unwrap_or(&self.embed)
    }

    /// Every matrix of the model, the embedding first, the LM head (if untied) last.
    pub fn matrices(&self) -> impl Iterator<Item = &QMatrix> {
        let layers = self
            .layers
            .iter()
            .flat_map(|l| [&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down]);
        std::iter::once(&self.embed)
            .chain(layers)
            .chain(self.lm_head.as_ref())
    }

    /// Bytes of weights in memory: every matrix, and the f32 norm gains.
    pub fn weight_bytes(&self) -> usize {
        let norms = (2 * self.layers.len() + 1) * self.config.hidden_size * 4;
        self.matrices().map(QMatrix::bytes).sum::<usize>() + norms
    }

    // ANCHOR: bytes_per_token
    /// Bytes of weights one decode step reads: every layer matrix and norm once, the LM head
    /// once, and a single row of the embedding table.
    pub fn bytes_read_per_token(&self) -> usize {
        let layer_bytes: usize = self
            .layers
            .iter()
            .map(|l| {
                [&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down]
                    .iter()
                    .map(|m| m.bytes())
                    .sum::<usize>()
                    + 2 * self.config.hidden_size * 4
            })
            .sum();
        let embed_row = self.embed.bytes() / self.embed.rows();
        layer_bytes + self.lm_head().bytes() + embed_row + self.config.hidden_size * 4
    }
    // ANCHOR_END: bytes_per_token

    // ANCHOR: embed
    /// The embedding rows of `ids`, dequantized: `(seq, dim)`.
    pub fn embed(&self, ids: &[u32]) -> Result<Vec<f32>, Error> {
        let dim = self.config.hidden_size;
        let mut x = vec![0.0f32; ids.len() * dim]; // (seq, dim)
        for (&id, row) in ids.iter().zip(x.chunks_exact_mut(dim)) {
            if id as usize >= self.embed.rows() {
                return Err(Error::BadToken {
                    id,
                    vocab: self.embed.rows(),
                });
            }
            self.embed.dequantize_row(id as usize, row);
        }
        Ok(x)
    }
    // ANCHOR_END: embed
}
