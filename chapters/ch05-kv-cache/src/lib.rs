//! Chapter 5: the KV cache, from O(n²) to O(n).
//!
//! Chapter 4 recomputes every token's keys and values at every step. They never change —
//! a token's K and V depend only on the tokens before it — so this chapter keeps them:
//!
//! - [`store`]: [`KvLayout`] (what a token costs) and [`KvStore`], the trait every cache implements;
//! - [`contiguous`]: [`KvCache`], one pre-allocated block per sequence;
//! - [`paged`]: blocks, block tables and a free list, as vLLM's PagedAttention;
//! - [`ring`]: ring buffers for sliding-window layers;
//! - [`attend`]: one token's attention over any of them;
//! - [`memory`]: what each scheme costs, worked out;
//! - [`forward`]: chapter 4's forward pass reading and writing a cache: prefill and decode;
//! - [`session`]: a conversation that keeps its cache across turns;
//! - [`generate`], [`bench`](mod@bench), [`plot`]: what the binary runs, measures and draws.

pub mod attend;
pub mod bench;
pub mod contiguous;
pub mod error;
pub mod forward;
pub mod generate;
pub mod memory;
pub mod paged;
pub mod plot;
pub mod ring;
pub mod session;
pub mod store;

/// The chapter's exercises: stubs for you to fill in (see the book's "Exercises" page).
#[cfg_attr(feature = "solutions", path = "../solutions/exercises.rs")]
pub mod exercises;

pub use contiguous::KvCache;
pub use error::Error;
pub use forward::Engine;
pub use paged::{PagedCache, PagedSeq};
pub use ring::RingCache;
pub use session::Session;
pub use store::{KvLayout, KvStore};
