// ANCHOR: q5_0
// Q5_0: 22 bytes a block, `d` (f16), then `qh` (4 bytes: bit j is element j's fifth bit),
// then 16 bytes of nibbles laid out as Q4_0's. Element j is d · (nibble | bit << 4) − 16.
const BLOCK_BYTES: u32 = 22u;

// Four bits of `qh` from bit `j` on, each moved to bit 4 of its own byte.
fn fifth_bits(qh: u32, j: u32) -> u32 {
    let h = extractBits(qh, j, 4u);
    return ((h & 1u) << 4u) | ((h & 2u) << 11u) | ((h & 4u) << 18u) | ((h & 8u) << 25u);
}

fn unpack(row: u32, b: u32) -> Unpacked {
    let at = (row * row_blocks() + b) * BLOCK_BYTES;
    let start = at & ~3u; // the block's six words, each read once (q4_0.wgsl says how)
    let odd = at != start;
    var words: array<u32, 6>;
    for (var k = 0u; k < 6u; k++) {
        words[k] = word(start + 4u * k);
    }
    var u = Unpacked(first_half(words[0], odd), 0.0, array<u32, 8>());
    let qh = after_half(words[0], words[1], odd);
    for (var i = 0u; i < 4u; i++) {
        let w = after_half(words[i + 1u], words[i + 2u], odd); // bytes 6 + 4i..
        u.q[i] = (w & 0x0f0f0f0fu) | fifth_bits(qh, 4u * i); //                 elements 4i..
        u.q[i + 4u] = ((w >> 4u) & 0x0f0f0f0fu) | fifth_bits(qh, 16u + 4u * i); // 16 + 4i..
    }
    return u;
}

// Σ (u − 16)·p = Σ u·p − 16·Σ p, with u the stored 5-bit value
fn unpacked_dot(u: Unpacked, a: ActBlock) -> f32 {
    var sumi = 0;
    for (var i = 0u; i < 8u; i++) {
        sumi += dot4I8Packed(u.q[i], a.qs[i]);
    }
    return f32(sumi - 16 * i32(a.s)) * (u.d * a.d);
}

fn block_dot(row: u32, b: u32) -> f32 {
    return unpacked_dot(unpack(row, b), acts[b]);
}
// ANCHOR_END: q5_0

// The in-order reduction's term: one block, as the CPU adds them.
const TERM_BLOCKS: u32 = 1u;
fn term(row: u32, t: u32) -> f32 {
    return block_dot(row, t);
}
