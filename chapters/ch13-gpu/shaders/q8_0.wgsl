// ANCHOR: q8_0
// Q8_0: 34 bytes a block, `d` (f16) then 32 quants as i8, in order: word i of the quants
// lines up with word i of the activations, four products a `dot4I8Packed`.
const BLOCK_BYTES: u32 = 34u;

fn unpack(row: u32, b: u32) -> Unpacked {
    let at = (row * row_blocks() + b) * BLOCK_BYTES;
    let start = at & ~3u; // the block's nine words, each read once (q4_0.wgsl says how)
    let odd = at != start;
    var w: array<u32, 9>;
    for (var k = 0u; k < 9u; k++) {
        w[k] = word(start + 4u * k);
    }
    var u = Unpacked(first_half(w[0], odd), 0.0, array<u32, 8>());
    for (var i = 0u; i < 8u; i++) {
        u.q[i] = after_half(w[i], w[i + 1u], odd);
    }
    return u;
}

fn unpacked_dot(u: Unpacked, a: ActBlock) -> f32 {
    var sumi = 0;
    for (var i = 0u; i < 8u; i++) {
        sumi += dot4I8Packed(u.q[i], a.qs[i]);
    }
    return f32(sumi) * (u.d * a.d);
}

fn block_dot(row: u32, b: u32) -> f32 {
    return unpacked_dot(unpack(row, b), acts[b]);
}
// ANCHOR_END: q8_0

// The in-order reduction's term: one block, as the CPU adds them.
const TERM_BLOCKS: u32 = 1u;
fn term(row: u32, t: u32) -> f32 {
    return block_dot(row, t);
}
