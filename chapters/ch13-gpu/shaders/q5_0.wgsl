// ANCHOR: q5_0
// Q5_0: 22 bytes a block, `d` (f16), then `qh` (4 bytes: bit j is element j's fifth bit),
// then 16 bytes of nibbles laid out as Q4_0's. Element j is d · (nibble | bit << 4) − 16.
const BLOCK_BYTES: u32 = 22u;

fn block_dot(row: u32, b: u32) -> f32 {
    let at = (row * params.blocks + b) * BLOCK_BYTES;
    let d = half_at(at);
    let qh = word_at(at + 2u);
    var sumi = 0;
    for (var i = 0u; i < 4u; i++) {
        let w = word_at(at + 6u + 4u * i);
        let lo = acts[b].qs[i];
        let hi = acts[b].qs[i + 4u];
        for (var k = 0u; k < 4u; k++) {
            let j = 4u * i + k; // elements j and j + 16
            let q_lo = i32(extractBits(w, 8u * k, 4u) | (extractBits(qh, j, 1u) << 4u)) - 16;
            let q_hi = i32(extractBits(w, 8u * k + 4u, 4u) | (extractBits(qh, j + 16u, 1u) << 4u)) - 16;
            sumi += q_lo * i8_at(lo, k) + q_hi * i8_at(hi, k);
        }
    }
    return f32(sumi) * (d * acts[b].d);
}
// ANCHOR_END: q5_0

// The in-order reduction's term: one block, as the CPU adds them.
const TERM_BLOCKS: u32 = 1u;
fn term(row: u32, t: u32) -> f32 {
    return block_dot(row, t);
}
