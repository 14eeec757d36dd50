// ANCHOR: q4_1
// Q4_1: 20 bytes a block, `d` and `m` (f16) then 16 bytes of nibbles as in Q4_0, unsigned:
// w = d·q + m. Its activations are Q8_1, whose `s` is d_a·Σp, so the block is
// d·d_a·Σ q·p + m·s.
const BLOCK_BYTES: u32 = 20u;

fn block_dot(row: u32, b: u32) -> f32 {
    let at = (row * row_blocks() + b) * BLOCK_BYTES; // on a word: five whole words a block
    let dm = unpack2x16float(word(at)); // d, then m
    var sumi = 0;
    for (var i = 0u; i < 4u; i++) {
        let w = word(at + 4u + 4u * i);
        sumi += dot4I8Packed(w & 0x0f0f0f0fu, acts[b].qs[i]); // elements 4i..4i+4
        sumi += dot4I8Packed((w >> 4u) & 0x0f0f0f0fu, acts[b].qs[i + 4u]); // 16 + 4i..
    }
    return (dm.x * acts[b].d) * f32(sumi) + dm.y * acts[b].s;
}
// ANCHOR_END: q4_1

// The in-order reduction's term: one block, as the CPU adds them.
const TERM_BLOCKS: u32 = 1u;
fn term(row: u32, t: u32) -> f32 {
    return block_dot(row, t);
}
