// ANCHOR: q4_k
// Q4_K: super-blocks of 256 weights in 144 bytes: `d` and `dmin` (f16), 12 bytes holding
// eight 6-bit (scale, min) pairs, then 128 bytes of nibbles. Block b of a row (32 weights)
// is sub-block s = b % 8 of its super-block: weight = d·scale_s·q − dmin·min_s, q in 0..16.
// Sub-blocks 2c and 2c + 1 share bytes 32c..32c + 32: 2c their low nibbles, 2c + 1 the high.
// The activations are Q8_K given as blocks of 32 (`acts.rs`): `d` the super-block's scale,
// `s` the sum of the block's quants, so block b is (d·d_a)·scale·Σ q·p − (dmin·d_a)·min·Σ p.
const BLOCK_BYTES: u32 = 144u;

// Byte `at`, out of the whole word that holds it (one load, wherever it lies).
fn byte_at(at: u32) -> u32 {
    return (word(at) >> (at % 4u * 8u)) & 0xffu;
}

// Sub-block s of the super-block at byte `at`, against activation block b: its scale times
// Σ q·p, and its minimum times Σ p, both integers.
fn sub_block(at: u32, s: u32, b: u32) -> vec2<i32> {
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
    var sumi = 0; // Σ q·p, four products a `dot4I8Packed` as in Q4_0, with no 8 to take off
    for (var i = 0u; i < 8u; i++) {
        let w = (word(quants + 4u * i) >> shift) & 0x0f0f0f0fu; // elements 4i..4i+4, 0..15
        sumi += dot4I8Packed(w, acts[b].qs[i]);
    }
    // the block's Σ p is an integer, held exactly in its f32 `s`
    return vec2<i32>(i32(scale) * sumi, i32(m) * i32(acts[b].s));
}

fn block_dot(row: u32, b: u32) -> f32 {
    let at = (row * row_blocks() + b) / 8u * BLOCK_BYTES; // its super-block
    let parts = sub_block(at, b % 8u, b);
    let da = acts[b].d;
    let d = unpack2x16float(word(at)); // d, then dmin: the super-block's first word
    return (d.x * da) * f32(parts.x) - (d.y * da) * f32(parts.y);
}
// ANCHOR_END: q4_k

// The in-order reduction's term: a whole super-block, as chapter 7's `dot_q4_k_q8_k` rounds
// it: its sub-blocks' integers added first (Σ scale·Σq·p and Σ min·Σp), then rounded.
const TERM_BLOCKS: u32 = 8u;
fn term(row: u32, t: u32) -> f32 {
    let at = (row * row_blocks() / 8u + t) * BLOCK_BYTES;
    var sums = vec2<i32>(0, 0);
    for (var s = 0u; s < 8u; s++) {
        sums += sub_block(at, s, 8u * t + s);
    }
    let da = acts[8u * t].d; // the super-block's scale, in each of its blocks
    let d = unpack2x16float(word(at)); // d, then dmin
    return d.x * da * f32(sums.x) - d.y * da * f32(sums.y);
}
