//! Deterministic pseudo-random numbers for demos, tests and benchmarks.
//!
//! The book never needs good randomness, only numbers that are the same on every machine
//! and every run, so a test that fails fails again. A 64-bit linear congruential generator
//! (Knuth's MMIX constants) is enough, and needs no dependency.

/// `len` values in [-1, 1), the same for the same `seed` everywhere.
pub fn uniform(len: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            // The top 24 bits, scaled to [0, 2), shifted to [-1, 1): exact in f32.
            (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// SplitMix64 (Steele, Lea and Flood, 2014): advance `state` by a fixed odd step and pass it
/// through a mixing function; every 64-bit output equally likely, the same on every machine.
/// Chapter 8's synthetic weights and chapter 9's sampler draw from it.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::uniform;

    #[test]
    fn is_deterministic_and_in_range() {
        let a = uniform(10_000, 7);
        assert_eq!(a, uniform(10_000, 7), "same seed, same numbers");
        assert_ne!(a, uniform(10_000, 8), "another seed, other numbers");
        assert!(
            a.iter().all(|x| (-1.0..1.0).contains(x)),
            "every value in [-1, 1)"
        );
        let mean = a.iter().sum::<f32>() / a.len() as f32;
        assert!(mean.abs() < 0.05, "mean {mean} should be near 0");
    }
}
