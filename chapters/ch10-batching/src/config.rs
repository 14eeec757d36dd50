//! The engine's settings, checked before anything is allocated.

use ch08_gguf::engine::Engine;

use crate::error::Error;
use crate::seq::{KvBlocks, KvPrecision};

/// The engine's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Positions per KV block.
    pub block_size: usize,
    /// Blocks in the pool.
    pub n_blocks: usize,
    /// Rows (tokens) in one step at most.
    pub max_batch_tokens: usize,
    /// Sequences running at once at most.
    pub max_seqs: usize,
    /// Share the KV blocks of common prompt prefixes.
    pub prefix_sharing: bool,
    /// How keys and values are stored.
    pub kv_precision: KvPrecision,
}

/// The largest step this engine agrees to run (rows of activations are sized by it).
pub const MAX_BATCH_TOKENS: usize = 8192;

impl Config {
    /// A pool of `kv_mb` megabytes (10⁶ bytes) of f32 K/V, for the model's layout.
    pub fn with_kv_mb(
        engine: &Engine,
        kv_mb: usize,
        max_batch_tokens: usize,
    ) -> Result<Config, Error> {
        Config::with_kv(engine, kv_mb, KvPrecision::F32, max_batch_tokens)
    }

    /// A pool of `kv_mb` megabytes of K/V in `precision`.
    pub fn with_kv(
        engine: &Engine,
        kv_mb: usize,
        precision: KvPrecision,
        max_batch_tokens: usize,
    ) -> Result<Config, Error> {
        let block_size = 16;
        let per_block = KvBlocks::bytes_per_block(engine.layout(), block_size, precision);
        let n_blocks = kv_mb.saturating_mul(1_000_000) / per_block;
        if n_blocks == 0 {
            return Err(Error::Config(format!(
                "a KV pool of {kv_mb} MB is too small for one block: a block of {block_size} positions is {per_block} bytes for this model"
            )));
        }
        Ok(Config {
            block_size,
            n_blocks,
            max_batch_tokens,
            max_seqs: max_batch_tokens.min(64),
            prefix_sharing: true,
            kv_precision: precision,
        })
    }

    pub fn check(&self) -> Result<(), Error> {
        let bad = |m: String| Err(Error::Config(m));
        if !(1..=MAX_BATCH_TOKENS).contains(&self.max_batch_tokens) {
            return bad(format!(
                "the token budget of a step must be 1 to {MAX_BATCH_TOKENS}, not {}",
                self.max_batch_tokens
            ));
        }
        if self.max_seqs == 0 || self.max_seqs > self.max_batch_tokens {
            return bad(format!(
                "max_seqs must be 1 to the step's budget ({}), not {}",
                self.max_batch_tokens, self.max_seqs
            ));
        }
        if !(1..=1024).contains(&self.block_size) || self.n_blocks == 0 {
            return bad(format!(
                "a pool needs blocks of 1 to 1024 positions and at least one block, not {} of {}",
                self.n_blocks, self.block_size
            ));
        }
        Ok(())
    }
}
