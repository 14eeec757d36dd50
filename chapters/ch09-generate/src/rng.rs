//! A small seeded random number generator: the same seed gives the same draws on every
//! machine, which is what `--seed` promises.
//!
//! SplitMix64 (Steele, Lea and Flood, 2014): a 64-bit counter passed through a fixed mixing
//! function. Not for cryptography; more than good enough to pick a token.

#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        ch01_tensors::random::splitmix64(&mut self.0)
    }

    /// Uniform in [0, 1), with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}
