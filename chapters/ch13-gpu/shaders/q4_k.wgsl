// ANCHOR: q4_k
// Q4_K: super-blocks of 256 weights in 144 bytes: `d` and `dmin` (f16), 12 bytes holding
// eight 6-bit (scale, min) pairs, then 128 bytes of nibbles. Block b of a row (32 weights)
// is sub-block s = b % 8 of its super-block: weight = d·scale_s·q − dmin·min_s, q in 0..16.
// Sub-blocks 2c and 2c + 1 share bytes 32c..32c + 32: 2c their low nibbles, 2c + 1 the high.
// The activations are Q8_K given as blocks of 32 (`acts.rs`): `d` the super-block's scale,
// `s` the sum of the block's quants, so block b is (d·d_a)·scale·Σ q·p − (dmin·d_a)·min·Σ p.
const BLOCK_BYTES: u32 = 144u;

fn byte_at(at: u32) -> u32 {
    return word_at(at) & 0xffu;
}

fn block_dot(row: u32, b: u32) -> f32 {
    let at = (row * params.blocks + b) / 8u * BLOCK_BYTES; // its super-block
    let s = b % 8u;
    let d = half_at(at);
    let dmin = half_at(at + 2u);
    // (scale, min) of sub-block s, as chapter 7's scale_min_k4 unpacks them from bytes 4..16:
    // sub-blocks 0–3 in the low 6 bits of bytes 4+s and 8+s, 4–7 in the nibbles of byte 8+s
    // with their top two bits in the spare top bits of bytes s and 4+s.
    var scale = byte_at(at + 4u + s) & 63u;
    var m = byte_at(at + 8u + s) & 63u;
    if s >= 4u {
        scale = (byte_at(at + 8u + s) & 15u) | ((byte_at(at + s) >> 6u) << 4u);
        m = (byte_at(at + 8u + s) >> 4u) | ((byte_at(at + 4u + s) >> 6u) << 4u);
    }
    let quants = at + 16u + 32u * (s / 2u); // the 32 bytes of sub-blocks 2c, 2c + 1
    let shift = 4u * (s % 2u); //              low nibbles or high
    var sumi = 0;
    for (var i = 0u; i < 8u; i++) {
        let w = word_at(quants + 4u * i); // elements 4i..4i+4 of the block
        let a = acts[b].qs[i];
        for (var k = 0u; k < 4u; k++) {
            sumi += i32(extractBits(w, 8u * k + shift, 4u)) * i8_at(a, k);
        }
    }
    let da = acts[b].d;
    return (d * da) * f32(i32(scale) * sumi) - (dmin * da) * (f32(m) * acts[b].s);
}
// ANCHOR_END: q4_k
