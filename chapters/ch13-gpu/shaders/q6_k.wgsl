// ANCHOR: q6_k
// Q6_K: super-blocks of 256 weights in 210 bytes: 128 bytes of low nibbles (`ql`), 64 of
// two-bit highs (`qh`), 16 signed 8-bit scales (one per 16 weights), then `d` (f16).
// weight = d·scale_g·(q − 32), q in 0..64. Block b of a row (32 weights) is sub-block
// s = b % 8 of its super-block, in half h = s / 4 (128 weights each); its nibbles are the
// low (s % 4 = 0, 1) or high (2, 3) halves of 32 bytes of the half's 64 in `ql`, and its high
// bits are bits 2·(s % 4) of the half's 32 bytes of `qh`. Its two scales are bytes 2s, 2s + 1.
const BLOCK_BYTES: u32 = 210u;

// Sub-block s of the super-block at byte `at`, against activation block b: Σ scale·(q − 32)·p
// over its two groups of 16, an integer.
fn sub_block(at: u32, s: u32, b: u32) -> i32 {
    let h = s / 4u;
    let ql = at + 64u * h + 32u * (s % 2u);
    let qh = at + 128u + 32u * h;
    let low_shift = 4u * ((s % 4u) / 2u);
    let high_shift = 2u * (s % 4u);
    var qp = array<i32, 2>(0, 0); // Σ q·p over elements 0..16 and 16..32
    for (var i = 0u; i < 8u; i++) {
        // elements 4i..4i+4 of the block, one a byte: four nibbles from `ql`, and four pairs
        // of high bits from `qh` moved to bits 4 and 5, so each byte is q, 0 to 63
        let low = (word_at(ql + 4u * i) >> low_shift) & 0x0f0f0f0fu;
        let high = (word_at(qh + 4u * i) >> high_shift) & 0x03030303u;
        qp[i / 4u] += dot4I8Packed(low | (high << 4u), acts[b].qs[i]);
    }
    // Σ (q − 32)·p = Σ q·p − 32·Σ p in each group: the first group's Σ p from its four
    // words, the second's the block's `s` (its Σ p) less the first's
    var p0 = 0;
    for (var i = 0u; i < 4u; i++) {
        p0 += dot4I8Packed(acts[b].qs[i], 0x01010101u);
    }
    let p1 = i32(acts[b].s) - p0;
    let scales = i32(word_at(at + 192u + 2u * s)); // bytes 2s and 2s + 1, as i8
    return extractBits(scales, 0u, 8u) * (qp[0] - 32 * p0)
        + extractBits(scales, 8u, 8u) * (qp[1] - 32 * p1);
}

fn block_dot(row: u32, b: u32) -> f32 {
    let at = (row * row_blocks() + b) / 8u * BLOCK_BYTES; // its super-block
    return (half_at(at + 208u) * acts[b].d) * f32(sub_block(at, b % 8u, b));
}
// ANCHOR_END: q6_k

// The in-order reduction's term: a whole super-block, as chapter 7's `dot_q6_k_q8_k` rounds
// it: its sub-blocks' integer sums added, then one product.
const TERM_BLOCKS: u32 = 8u;
fn term(row: u32, t: u32) -> f32 {
    let at = (row * row_blocks() / 8u + t) * BLOCK_BYTES;
    var total = 0;
    for (var s = 0u; s < 8u; s++) {
        total += sub_block(at, s, 8u * t + s);
    }
    return half_at(at + 208u) * acts[8u * t].d * f32(total);
}
