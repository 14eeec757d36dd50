// Reading the blocks through workgroup memory. A GPU loads memory for a subgroup at once, a
// line of 128 bytes (NVIDIA's) at a time: 32 lanes each loading a word of its own 18-byte
// block touch five lines for each word they load, and each lane's 40-byte activation block
// ten. So the workgroup loads its rows' next STEP blocks together first, neighbouring
// invocations loading neighbouring words (every line once), and the activations' STEP blocks
// beside them; then each lane computes its blocks from workgroup memory, as `direct.wgsl`'s
// would from storage: the same blocks, the same order, the same bits. `matvec.rs` puts
// STEP_BYTES before this file: the bytes of STEP blocks of a row in the format, whole words
// for every format here.

// ANCHOR: tile
// The input vector's ActBlocks (matvec.wgsl) read as words, ACT_WORDS a block.
@group(0) @binding(1) var<storage, read> input: array<u32>;
const ACT_WORDS: u32 = 10u;

const STEP: u32 = LANES; //              blocks of each row a step takes: one a lane
const STEP_WORDS: u32 = STEP_BYTES / 4u;
var<workgroup> tile: array<u32, ROWS * STEP_WORDS + 1u>; // +1: `word_at` reads a word on
var<workgroup> acts: array<ActBlock, STEP>;

// What `block_dot` reads: rows of the tile, STEP blocks each, and the step's activations.
fn row_blocks() -> u32 {
    return STEP;
}

fn word(at: u32) -> u32 {
    return tile[at / 4u];
}

fn word_at(at: u32) -> u32 {
    let i = at / 4u;
    let shift = (at % 4u) * 8u;
    if shift == 0u {
        return tile[i];
    }
    return (tile[i] >> shift) | (tile[i + 1u] << (32u - shift));
}
// ANCHOR_END: tile

// ANCHOR: fill
// Step `s`: blocks s·STEP .. s·STEP + STEP of the workgroup's rows (from `row0`) into the
// tile, each invocation a word at a time (`weight_word`: a row starts mid-word where its
// bytes are not whole words, Q4_0's and Q5_0's with an odd number of blocks), and the same
// blocks of the input into `acts`.
// Zeros past the last row or a row's last block, which no lane uses.
fn fill(s: u32, row0: u32, i: u32) {
    let first = s * STEP;
    let n = min(STEP, params.blocks - first); // blocks this step
    // bytes of `k` blocks, exact where k is whole super-blocks for the K-quants
    let row_bytes = params.blocks * STEP_BYTES / STEP;
    let valid = n * STEP_BYTES / STEP; //        bytes of a row this step
    for (var w = i; w < ROWS * STEP_WORDS; w += 128u) {
        let r = w / STEP_WORDS;
        let o = (w % STEP_WORDS) * 4u;
        var x = 0u;
        if row0 + r < params.rows && o < valid {
            x = weight_word((row0 + r) * row_bytes + s * STEP_BYTES + o);
        }
        tile[w] = x;
    }
    for (var w = i; w < STEP * ACT_WORDS; w += 128u) {
        let b = w / ACT_WORDS;
        let k = w % ACT_WORDS;
        var x = 0u;
        if b < n {
            x = input[(first + b) * ACT_WORDS + k];
        }
        if k == 0u {
            acts[b].d = bitcast<f32>(x);
        } else if k == 1u {
            acts[b].s = bitcast<f32>(x);
        } else {
            acts[b].qs[k - 2u] = x;
        }
    }
}
// ANCHOR_END: fill

// ANCHOR: lane_sum
// One lane's share of its rows, step by step: after the tile is filled, block `lane` of each
// of its rows in the tile, which is block s·STEP + lane of the row.
fn lane_sums(group: vec3<u32>, i: u32) -> array<f32, ROWS_EACH> {
    let row0 = (group.y * params.groups_x + group.x) * ROWS; // the workgroup's first row
    let lane = i % LANES;
    let mine = i / LANES * ROWS_EACH; // the group's first row in the tile
    var sums: array<f32, ROWS_EACH>;
    for (var s = 0u; s * STEP < params.blocks; s++) {
        fill(s, row0, i);
        workgroupBarrier();
        if s * STEP + lane < params.blocks {
            for (var k = 0u; k < ROWS_EACH; k++) {
                sums[k] += block_dot(mine + k, lane);
            }
        }
        workgroupBarrier(); // before the next step overwrites the tile
    }
    return sums;
}
// ANCHOR_END: lane_sum
