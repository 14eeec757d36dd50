// ANCHOR: q4_0
// Q4_0: 18 bytes a block, `d` (f16) then 16 bytes; byte j holds element j in its low nibble
// and element j + 16 in its high one, each stored as q + 8.
const BLOCK_BYTES: u32 = 18u;

// Σ w·a over block `b` of `row`: 32 integer products, then one float multiply.
fn block_dot(row: u32, b: u32) -> f32 {
    let at = (row * params.blocks + b) * BLOCK_BYTES;
    let d = half_at(at);
    var sumi = 0;
    for (var i = 0u; i < 4u; i++) {
        let w = word_at(at + 2u + 4u * i); // bytes 4i..4i+4: elements 4i.. and 16 + 4i..
        let lo = acts[b].qs[i]; //            elements 4i..4i+4 of the activations
        let hi = acts[b].qs[i + 4u]; //       elements 16 + 4i..
        for (var k = 0u; k < 4u; k++) {
            let q_lo = i32(extractBits(w, 8u * k, 4u)) - 8;
            let q_hi = i32(extractBits(w, 8u * k + 4u, 4u)) - 8;
            sumi += q_lo * i8_at(lo, k) + q_hi * i8_at(hi, k);
        }
    }
    return f32(sumi) * (d * acts[b].d);
}
// ANCHOR_END: q4_0

// The in-order reduction's term: one block, as the CPU adds them.
const TERM_BLOCKS: u32 = 1u;
fn term(row: u32, t: u32) -> f32 {
    return block_dot(row, t);
}
