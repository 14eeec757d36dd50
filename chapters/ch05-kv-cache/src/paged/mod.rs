//! A paged KV cache, the way vLLM's PagedAttention does it.
//!
//! A contiguous cache must reserve a sequence's maximum length up front, because it cannot
//! grow in place. Most of that reservation is never used: a chat reply stops after 200
//! tokens in a cache sized for 8 192. A paged cache cuts memory into fixed-size *blocks*
//! (here 16 positions each) shared by every sequence, hands them out as a sequence grows,
//! and records which physical block holds which run of positions in the sequence's *block
//! table*. Attention then reads position `p` at
//!
//! ```text
//! block  = table[p / block_size]      the physical block (anywhere in the pool)
//! offset = p % block_size             the slot inside it
//! ```
//!
//! The waste per sequence is at most one partly filled block, and a finished sequence
//! returns its blocks to the free list for the next one.
//!
//! - [`alloc`]: the bookkeeping — free list and block tables, no K/V storage.
//! - [`pool`]: the storage — a pool of blocks, and a per-sequence view that is a [`crate::KvStore`].

pub mod alloc;
pub mod pool;

pub use alloc::{BlockAllocator, BlockTable};
pub use pool::{PagedCache, PagedSeq, SeqId};
