//! The random numbers a synthetic file's weights are made of: the same on every machine.
//!
//! SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
//! 2014) gives each tensor its own stream, seeded from the file's seed and the tensor's
//! name, so a tensor's values do not depend on the order tensors are written in. A value is
//! the top 24 bits of a draw as an exact f32 in [0, 1), moved to [-1, 1) and scaled: only
//! exact or correctly rounded f32 operations, so no platform's libm is involved.

/// One SplitMix64 stream.
pub struct Stream(u64);

impl Stream {
    /// The stream for tensor `name` of the file made with `seed`.
    pub fn for_tensor(seed: u64, name: &str) -> Stream {
        // FNV-1a over the name, mixed with the seed.
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for b in name.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        let mut s = Stream(seed ^ h);
        s.next_u64(); // one step so that nearby seeds start far apart
        s
    }

    pub fn next_u64(&mut self) -> u64 {
        ch01_tensors::random::splitmix64(&mut self.0)
    }

    /// Uniform in [-1, 1): multiples of 2^-23.
    pub fn symmetric(&mut self) -> f32 {
        let u = (self.next_u64() >> 40) as f32 * (1.0 / (1u32 << 24) as f32); // exact
        2.0 * u - 1.0
    }

    /// `n` values uniform in [-a, a) with a = `std`·√3: standard deviation `std`.
    pub fn uniform(&mut self, n: usize, std: f32) -> Vec<f32> {
        let a = std * 3.0f32.sqrt();
        (0..n).map(|_| a * self.symmetric()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_is_fixed_by_seed_and_name() {
        let a = Stream::for_tensor(1, "blk.0.attn_q.weight").uniform(1000, 0.5);
        let b = Stream::for_tensor(1, "blk.0.attn_q.weight").uniform(1000, 0.5);
        let c = Stream::for_tensor(2, "blk.0.attn_q.weight").uniform(1000, 0.5);
        let d = Stream::for_tensor(1, "blk.0.attn_k.weight").uniform(1000, 0.5);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(a, d);
        let mean = a.iter().sum::<f32>() / 1000.0;
        let var = a.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / 1000.0;
        assert!(
            mean.abs() < 0.05 && (var.sqrt() - 0.5).abs() < 0.05,
            "{mean} {var}"
        );
        // Pinned: a change here changes every synthetic file (and their fixtures' sha256).
        assert_eq!(Stream::for_tensor(0, "").next_u64(), 0x100c_daac_c0bc_9316);
    }
}
