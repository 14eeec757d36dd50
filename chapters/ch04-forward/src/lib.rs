//! Chapter 4: the forward pass. Token ids in, next-token logits out, and greedy
//! generation on top.
//!
//! - [`config`]: the model's hyperparameters from `config.json`, validated field by field.
//! - [`weights`]: every tensor from `model.safetensors`, checked against the config.
//! - [`linear`]: `x · wᵀ` for a whole sequence, fast enough to watch text appear.
//! - [`attention`]: the attention sublayer (Q/K/V, RoPE, causal GQA, output projection).
//! - [`ffn`]: the SwiGLU feed-forward sublayer.
//! - [`layer`]: one decoder layer: two sublayers with RMSNorm and residual additions.
//! - [`model`]: embedding → layers → final norm → LM head.
//! - [`generate`]: the greedy loop, without a cache (on purpose: chapter 5 adds one).
//! - [`reference`](mod@reference), [`check`]: the llama.cpp and numpy reference values, and
//!   the per-layer checker that compares against them.

pub mod attention;
pub mod check;
pub mod config;
mod error;
pub mod ffn;
pub mod generate;
pub mod layer;
pub mod linear;
pub mod model;
pub mod prompt;
pub mod reference;
pub mod weights;

/// The chapter's exercises: stubs for you to fill in (see the book's "Exercises" page).
#[cfg_attr(feature = "solutions", path = "../solutions/exercises.rs")]
pub mod exercises;

pub use config::Config;
pub use error::Error;
pub use model::Model;
pub use weights::Weights;
