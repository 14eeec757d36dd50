// Reading the blocks straight from storage: each lane loads its own blocks' words and
// activation blocks. The simplest way, and the one the in-order reduction uses; on a GPU that
// reads memory a whole line at a time for a group of lanes, `staged.wgsl`'s way is faster.

// The input vector, quantized to the format the weights want: one ActBlock a block of 32.
@group(0) @binding(1) var<storage, read> acts: array<ActBlock>;

// ANCHOR: bytes
// A row's blocks are `params.blocks` apart.
fn row_blocks() -> u32 {
    return params.blocks;
}

// The 4 bytes that start at byte `at` of the weights, wherever they start (a block of 18 or
// 34 bytes begins on every other half-word, not on a word): `halves.wgsl`'s `weight_word`.
fn word_at(at: u32) -> u32 {
    return weight_word(at);
}

// The whole word that holds byte `at`: where a block's bytes are read once, word by word.
fn word(at: u32) -> u32 {
    return weights[at / 4u];
}
// ANCHOR_END: bytes

// ANCHOR: lane_sum
// One lane's share of its rows: blocks lane, lane + LANES, lane + 2·LANES, … of each. The
// rows of one lane read the same activation blocks, loaded once for all of them. A row past
// the last is the last row again, its sums never stored, so that every lane reads alike.
fn lane_sums(group: vec3<u32>, i: u32) -> array<f32, ROWS_EACH> {
    let first = first_row(group, i);
    let lane = i % LANES;
    var sums: array<f32, ROWS_EACH>;
    var rows: array<u32, ROWS_EACH>;
    for (var k = 0u; k < ROWS_EACH; k++) {
        rows[k] = min(first + k, params.rows - 1u);
    }
    for (var b = lane; b < params.blocks; b += LANES) {
        for (var k = 0u; k < ROWS_EACH; k++) {
            sums[k] += block_dot(rows[k], b);
        }
    }
    return sums;
}
// ANCHOR_END: lane_sum
