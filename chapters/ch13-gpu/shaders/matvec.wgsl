// The matrix-vector product `out = W · x` for one token (decode), shared by every weight format.
// The format's file (q4_0.wgsl, …) brings `block_dot` (and `term`, what the CPU rounds and
// adds); a reduction file (reduce_workgroup.wgsl, reduce_subgroup.wgsl or reduce_in_order.wgsl)
// brings `main`, which adds each row's sums.
//
// Layout: one workgroup takes ROWS rows; in each row, LANES invocations share the row's blocks
// (lane l takes blocks l, l + LANES, l + 2·LANES, …), each keeps its own f32 sum, and a tree
// in workgroup memory adds the LANES sums. Neighbouring lanes read neighbouring blocks, so
// one pass over a row reads it from start to end.
// The workgroup is @workgroup_size(128), LANES × ROWS: invocation i works on row i / 32 of
// the workgroup's four, as lane i % 32.

// ANCHOR: bindings
// The weights as the file holds them: raw blocks, one row after another, padded to whole words.
@group(0) @binding(0) var<storage, read> weights: array<u32>;

// The input vector, quantized by the host to the format the weights want (Q8_0, Q8_1 or
// Q8_K), one entry per block of 32: its scale (Q8_K: its super-block's), its sum `s = d·Σq`
// (Q8_1; Q8_0 and Q8_K: Σq, exact in an f32), and the 32 quants as i8, four to a word, element 4i + k in
// byte k of word i.
struct ActBlock {
    d: f32,
    s: f32,
    qs: array<u32, 8>,
}
@group(0) @binding(1) var<storage, read> acts: array<ActBlock>;

// One f32 per row. W may be a stack of up to three matrices uploaded one after another
// (Q, K and V; gate and up), which share the input: each matrix's rows go to its own output,
// `out`, `out1`, `out2` (`store`).
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read_write> out1: array<f32>;
@group(0) @binding(5) var<storage, read_write> out2: array<f32>;

struct Params {
    rows: u32,     // rows of W
    blocks: u32,   // blocks in a row: cols / 32
    groups_x: u32, // workgroups along x in the dispatch (a grid can be 2-D when rows are many)
    _pad: u32,
    split1: u32,   // the first row of the stack's second matrix (rows: none)
    split2: u32,   // the first row of its third (rows: none)
    _pad1: u32,
    _pad2: u32,
}
@group(0) @binding(3) var<uniform> params: Params;
// ANCHOR_END: bindings

// Row `row`'s product into its matrix's output.
fn store(row: u32, v: f32) {
    if row < params.split1 {
        out[row] = v;
    } else if row < params.split2 {
        out1[row - params.split1] = v;
    } else {
        out2[row - params.split2] = v;
    }
}

// ANCHOR: bytes
// The 4 bytes that start at byte `at` of the weights, little-endian, wherever they start:
// a block of 18 or 34 bytes begins on every other half-word, not on a word.
fn word_at(at: u32) -> u32 {
    let i = at / 4u;
    let shift = (at % 4u) * 8u;
    if shift == 0u {
        return weights[i];
    }
    return (weights[i] >> shift) | (weights[i + 1u] << (32u - shift));
}

// The whole word that holds byte `at`: where a block's bytes are read once, word by word.
fn word(at: u32) -> u32 {
    return weights[at / 4u];
}

// The f16 at byte `at`, widened to f32 (exactly: every f16 is an f32).
fn half_at(at: u32) -> f32 {
    return unpack2x16float(word_at(at)).x;
}

// Σ of block `b`'s 32 activation quants: the quantizer adds them once, for every row's use.
fn act_sum(b: u32) -> i32 {
    return i32(acts[b].s);
}
// ANCHOR_END: bytes

// ANCHOR: lane_sum
const LANES: u32 = 32u;
const ROWS: u32 = 4u;

// The row invocation `i` of a workgroup works on (past `params.rows` in the last workgroup).
fn row_of(group: vec3<u32>, i: u32) -> u32 {
    return (group.y * params.groups_x + group.x) * ROWS + i / LANES;
}

// One lane's share of its row: blocks lane, lane + LANES, lane + 2·LANES, …
fn lane_sum(row: u32, lane: u32) -> f32 {
    var sum = 0.0;
    if row < params.rows {
        for (var b = lane; b < params.blocks; b += LANES) {
            sum += block_dot(row, b);
        }
    }
    return sum;
}
// ANCHOR_END: lane_sum
