// ANCHOR: q4_0
// Q4_0: 18 bytes a block, `d` (f16) then 16 bytes; byte j holds element j in its low nibble
// and element j + 16 in its high one, each stored as q + 8.
const BLOCK_BYTES: u32 = 18u;

// Σ w·a over block `b` of `row`: 32 integer products, four at a time, then one float
// multiply. The nibbles are masked out of a word as four bytes, 0 to 15, the stored q + 8,
// and `dot4I8Packed` multiplies four bytes by four and adds the products (one instruction
// where the GPU has it); Σ (u − 8)·a = Σ u·a − 8·Σ a is the same integer.
fn block_dot(row: u32, b: u32) -> f32 {
    let at = (row * row_blocks() + b) * BLOCK_BYTES;
    // The block's five words, each read once: it begins at a word's first byte, or at its
    // third (`odd`: d is then the first word's high half, the quants the next four words).
    let start = at & ~3u;
    let odd = at != start;
    var w: array<u32, 5>;
    for (var k = 0u; k < 5u; k++) {
        w[k] = word(start + 4u * k);
    }
    let d = first_half(w[0], odd);
    var sumi = 0;
    for (var i = 0u; i < 4u; i++) {
        let q = after_half(w[i], w[i + 1u], odd); // bytes 4i..4i+4: elements 4i.., 16 + 4i..
        sumi += dot4I8Packed(q & 0x0f0f0f0fu, acts[b].qs[i]);
        sumi += dot4I8Packed((q >> 4u) & 0x0f0f0f0fu, acts[b].qs[i + 4u]);
    }
    return f32(sumi - 8 * act_sum(b)) * (d * acts[b].d);
}
// ANCHOR_END: q4_0

// The in-order reduction's term: one block, as the CPU adds them.
const TERM_BLOCKS: u32 = 1u;
fn term(row: u32, t: u32) -> f32 {
    return block_dot(row, t);
}
