// ANCHOR: q4_0
// Q4_0: 18 bytes a block, `d` (f16) then 16 bytes; byte j holds element j in its low nibble
// and element j + 16 in its high one, each stored as q + 8.
const BLOCK_BYTES: u32 = 18u;

// Block `b` of `row`, unpacked (halves.wgsl's `Unpacked`): the nibbles masked out of each
// word as four bytes, 0 to 15, the stored q + 8.
fn unpack(row: u32, b: u32) -> Unpacked {
    let at = (row * row_blocks() + b) * BLOCK_BYTES;
    // The block's five words, each read once: it begins at a word's first byte, or at its
    // third (`odd`: d is then the first word's high half, the quants the next four words).
    let start = at & ~3u;
    let odd = at != start;
    var w: array<u32, 5>;
    for (var k = 0u; k < 5u; k++) {
        w[k] = word(start + 4u * k);
    }
    var u = Unpacked(first_half(w[0], odd), 0.0, array<u32, 8>());
    for (var i = 0u; i < 4u; i++) {
        let q = after_half(w[i], w[i + 1u], odd); // bytes 4i..4i+4: elements 4i.., 16 + 4i..
        u.q[i] = q & 0x0f0f0f0fu;
        u.q[i + 4u] = (q >> 4u) & 0x0f0f0f0fu;
    }
    return u;
}

// Σ w·a over the block: 32 integer products, four at a time, then one float multiply.
// `dot4I8Packed` multiplies four bytes by four and adds the products (one instruction where
// the GPU has it); Σ (u − 8)·a = Σ u·a − 8·Σ a is the same integer.
fn unpacked_dot(u: Unpacked, a: ActBlock) -> f32 {
    var sumi = 0;
    for (var i = 0u; i < 8u; i++) {
        sumi += dot4I8Packed(u.q[i], a.qs[i]);
    }
    return f32(sumi - 8 * i32(a.s)) * (u.d * a.d);
}

fn block_dot(row: u32, b: u32) -> f32 {
    return unpacked_dot(unpack(row, b), acts[b]);
}
// ANCHOR_END: q4_0

// The in-order reduction's term: one block, as the CPU adds them.
const TERM_BLOCKS: u32 = 1u;
fn term(row: u32, t: u32) -> f32 {
    return block_dot(row, t);
}
