// Put before every format's file (`block_source`): a block of 18, 22 or 34 bytes (Q4_0,
// Q5_0, Q8_0) begins at a word's first byte or, `odd`, at its third. Read as whole words
// from the one it begins in, `w0`, `w1`, … (each once: `word`, which the product's own file
// brings), its f16 `d` is the first two bytes, and the 4 bytes that begin two bytes into
// word `lo` (`hi` the next word) are `after_half`'s.
fn first_half(w0: u32, odd: bool) -> f32 {
    return unpack2x16float(select(w0, w0 >> 16u, odd)).x;
}

fn after_half(lo: u32, hi: u32, odd: bool) -> u32 {
    return select((lo >> 16u) | (hi << 16u), hi, odd);
}

// ANCHOR: weight_word
// The 4 bytes that start at byte `at` of the weights' buffer in storage (`weights`, which
// every product's own file binds), little-endian, wherever they start: one word where `at`
// is on a word, else the two it straddles, shifted together.
fn weight_word(at: u32) -> u32 {
    let i = at / 4u;
    let shift = (at % 4u) * 8u;
    if shift == 0u {
        return weights[i];
    }
    return (weights[i] >> shift) | (weights[i + 1u] << (32u - shift));
}
// ANCHOR_END: weight_word

// ANCHOR: unpacked
// A block of 32 (Q4_0, Q4_1, Q5_0, Q8_0) read out of its bytes once (`unpack` in the format's
// file), for as many activation blocks as want it (`unpacked_dot`): its scale, its minimum
// (Q4_1's; 0 for the others), and its 32 stored values as eight words of four bytes, word i
// lined up with word i of an activation block.
struct Unpacked {
    d: f32,
    m: f32,
    q: array<u32, 8>,
}
// ANCHOR_END: unpacked
