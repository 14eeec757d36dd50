//! Chapter 10: many requests at once — a batched engine with continuous batching, paged and
//! shared KV.
//!
//! - [`pool`]: one pool of KV blocks for all sequences: a free list and reference counts;
//! - [`prefix`]: full blocks named by their tokens and the block before, for sharing;
//! - [`seq`]: the blocks' keys and values, and a sequence's view as a chapter 5 `KvStore`;
//!   [`gather`]: f16 blocks read as f32 for one row;
//! - [`scheduler`]: a pure function from plain state to the next step's plan;
//! - [`batch`]: the batched forward step, rows of many sequences at once; [`attend`]: chapter
//!   8's fast attention path a block at a time;
//! - [`engine`]: submit, step, cancel; tokens streamed through channels; [`paging`]: how a
//!   plan becomes blocks; [`config`]: its settings;
//! - [`steer`]: the hook a grammar uses to narrow a sequence's next token;
//! - [`bench`](mod@bench), [`trace`]: the closed-loop benchmark and the scheduler's timeline.

pub mod attend;
pub mod batch;
pub mod bench;
pub mod config;
pub mod curve;
pub mod engine;
pub mod error;
pub mod gather;
pub mod paging;
pub mod perplexity;
pub mod pool;
pub mod prefix;
pub mod request;
pub mod scheduler;
pub mod seq;
pub mod steer;
pub mod trace;

/// The chapter's exercises: stubs for you to fill in (see the book's "Exercises" page).
#[cfg_attr(feature = "solutions", path = "../solutions/exercises.rs")]
pub mod exercises;

pub use config::Config;
pub use engine::BatchEngine;
pub use error::Error;
pub use request::{Event, FinishReason, Finished, Request};
