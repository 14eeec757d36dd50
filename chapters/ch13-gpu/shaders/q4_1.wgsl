// ANCHOR: q4_1
// Q4_1: 20 bytes a block, `d` and `m` (f16) then 16 bytes of nibbles as in Q4_0, unsigned:
// w = d·q + m. Its activations are Q8_1, whose `s` is d_a·Σp, so the block is
// d·d_a·Σ q·p + m·s.
const BLOCK_BYTES: u32 = 20u;

fn block_dot(row: u32, b: u32) -> f32 {
    let at = (row * params.blocks + b) * BLOCK_BYTES;
    let d = half_at(at);
    let m = half_at(at + 2u);
    var sumi = 0;
    for (var i = 0u; i < 4u; i++) {
        let w = word_at(at + 4u + 4u * i);
        let lo = acts[b].qs[i];
        let hi = acts[b].qs[i + 4u];
        for (var k = 0u; k < 4u; k++) {
            let q_lo = i32(extractBits(w, 8u * k, 4u));
            let q_hi = i32(extractBits(w, 8u * k + 4u, 4u));
            sumi += q_lo * i8_at(lo, k) + q_hi * i8_at(hi, k);
        }
    }
    return (d * acts[b].d) * f32(sumi) + m * acts[b].s;
}
// ANCHOR_END: q4_1

// The in-order reduction's term: one block, as the CPU adds them.
const TERM_BLOCKS: u32 = 1u;
fn term(row: u32, t: u32) -> f32 {
    return block_dot(row, t);
}
