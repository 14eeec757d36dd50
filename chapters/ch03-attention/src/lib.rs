//! Chapter 3: attention, the heart of the transformer, built from chapter 1's tensors.
//!
//! - [`config`]: the book's one validated `config.json` parser (chapter 4 re-exports it).
//! - [`rope`]: rotary position embeddings, both pairings, any base θ.
//! - [`mask`]: causal and sliding-window masks, as predicates and as additive matrices.
//! - [`sdpa`]: one head of scaled dot-product attention, written like the formula.
//! - [`mod@attention`]: multi-head / grouped-query attention over the forward pass's layout.
//! - [`online`]: the same attention in one pass over the keys (online softmax).
//! - [`probe`]: runs SmolLM2 up to one layer's Q and K, to look at real attention.
//! - [`summary`], [`heatmap`]: what the binary prints and draws.

pub mod attention;
pub mod config;
pub mod error;
pub mod heatmap;
pub mod mask;
pub mod online;
pub mod probe;
pub mod rope;
pub mod sdpa;
pub mod summary;

/// The chapter's exercises: stubs for you to fill in (see the book's "Exercises" page).
#[cfg_attr(feature = "solutions", path = "../solutions/exercises.rs")]
pub mod exercises;

pub use attention::{Heads, attention, attention_weights};
pub use error::Error;
pub use mask::Mask;
pub use online::attention_online;
pub use rope::{Pairing, RopeTable};
