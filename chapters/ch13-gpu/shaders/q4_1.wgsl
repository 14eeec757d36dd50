// ANCHOR: q4_1
// Q4_1: 20 bytes a block, `d` and `m` (f16) then 16 bytes of nibbles as in Q4_0, unsigned:
// w = d·q + m. Its activations are Q8_1, whose `s` is d_a·Σp, so the block is
// d·d_a·Σ q·p + m·s.
const BLOCK_BYTES: u32 = 20u;

fn unpack(row: u32, b: u32) -> Unpacked {
    let at = (row * row_blocks() + b) * BLOCK_BYTES; // on a word: five whole words a block
    let dm = unpack2x16float(word(at)); // d, then m
    var u = Unpacked(dm.x, dm.y, array<u32, 8>());
    for (var i = 0u; i < 4u; i++) {
        let w = word(at + 4u + 4u * i);
        u.q[i] = w & 0x0f0f0f0fu; //               elements 4i..4i+4
        u.q[i + 4u] = (w >> 4u) & 0x0f0f0f0fu; // 16 + 4i..
    }
    return u;
}

fn unpacked_dot(u: Unpacked, a: ActBlock) -> f32 {
    var sumi = 0;
    for (var i = 0u; i < 8u; i++) {
        sumi += dot4I8Packed(u.q[i], a.qs[i]);
    }
    return (u.d * a.d) * f32(sumi) + u.m * a.s;
}

fn block_dot(row: u32, b: u32) -> f32 {
    return unpacked_dot(unpack(row, b), acts[b]);
}
// ANCHOR_END: q4_1

// The in-order reduction's term: one block, as the CPU adds them.
const TERM_BLOCKS: u32 = 1u;
fn term(row: u32, t: u32) -> f32 {
    return block_dot(row, t);
}
