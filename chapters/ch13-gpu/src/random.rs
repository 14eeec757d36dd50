//! Random blocks of a format, for the bench and the tests: no model file needed.

use ch06_quantization::Format;

/// A small, seedable generator (xorshift64*): the same seed gives the same blocks on every
/// machine.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in [-1, 1).
    pub fn signed(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    /// A normal f16's bits with magnitude in [2^-10, 2^-6), of either sign if `signed`:
    /// the size of a real model's scales, never a NaN, an infinity or a subnormal.
    pub fn half(&mut self, signed: bool) -> u16 {
        let r = self.next_u64();
        let bits = 0x1400 + (r % 0x1000) as u16; // exponents 5..=8: 2^-10 .. 2^-6
        if signed && r & (1 << 20) != 0 {
            bits | 0x8000
        } else {
            bits
        }
    }
}

/// `rows × cols` weights of `format` as raw blocks: random quant bytes, and scales (and
/// Q4_1's minimums) that are ordinary f16s. What a file could hold, without quantizing
/// anything: fast enough for a 7B-sized matrix.
pub fn blocks(format: Format, rows: usize, cols: usize, rng: &mut Rng) -> Vec<u8> {
    let size = rows * format.row_bytes(cols);
    let mut out = Vec::with_capacity(size);
    while out.len() < size {
        out.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    out.truncate(size);
    // the f16 scales at a block's start: d, and m (Q4_K: dmin) where there is one
    let halves = match format {
        Format::Q4_1 | Format::Q4_K => 2,
        Format::Q8_0 | Format::Q4_0 | Format::Q5_0 => 1,
        Format::F32 | Format::Int8 | Format::Q6_K => 0, // no f16 scale first (Q6_K's is last)
    };
    for block in out.chunks_exact_mut(format.block_bytes()) {
        for h in 0..halves {
            let bits = rng.half(h == 1);
            block[2 * h..2 * h + 2].copy_from_slice(&bits.to_le_bytes());
        }
        if format == Format::Q6_K {
            // its one f16 scale is last
            block[208..210].copy_from_slice(&rng.half(false).to_le_bytes());
        }
    }
    out
}
