// The matrix-vector product `out = W · x` for one token (decode), shared by every weight format.
// `matvec.rs`'s `source` puts four files together: the format's (q4_0.wgsl, …), which brings
// `block_dot` (and `term`, what the CPU rounds and adds); this one; a way to read the blocks,
// `direct.wgsl` (each lane from storage) or `staged.wgsl` (a workgroup's rows through
// workgroup memory), which brings `lane_sums`; and a reduction (reduce_workgroup.wgsl,
// reduce_subgroup.wgsl or reduce_in_order.wgsl), which brings `main` and adds each row's sums.
//
// Layout: one workgroup of 128 invocations is four groups of LANES (32) lanes, and each group
// takes ROWS_EACH rows: lane l takes blocks l, l + LANES, l + 2·LANES, … of each of them and
// keeps an f32 sum for each; then a reduction adds each row's LANES sums. Neighbouring lanes
// take neighbouring blocks, so one pass over a row reads it from start to end, and a lane's
// rows share each activation block it reads. Invocation i is lane i % 32 of group i / 32.

// ANCHOR: bindings
// The weights as the file holds them: raw blocks, one row after another, padded to whole words.
@group(0) @binding(0) var<storage, read> weights: array<u32>;

// The input vector, quantized by the host to the format the weights want (Q8_0, Q8_1 or
// Q8_K), one entry per block of 32: its scale (Q8_K: its super-block's), its sum `s = d·Σq`
// (Q8_1; Q8_0 and Q8_K: Σq, exact in an f32), and the 32 quants as i8, four to a word, element 4i + k in
// byte k of word i.
// (Binding 1: `direct.wgsl` reads it as `acts`, `staged.wgsl` as words.)
struct ActBlock {
    d: f32,
    s: f32,
    qs: array<u32, 8>,
}

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

// The f16 at byte `at` of the blocks, widened to f32 (exactly: every f16 is an f32).
fn half_at(at: u32) -> f32 {
    return unpack2x16float(word_at(at)).x;
}

// ANCHOR: lanes
const LANES: u32 = 32u;
// ROWS_EACH, the rows one lane works on, comes before this file (`matvec.rs`'s `source`).
const GROUPS: u32 = 4u; //           groups of LANES lanes in a workgroup of 128
const ROWS: u32 = GROUPS * ROWS_EACH; // rows a workgroup takes

// The first of the rows invocation `i`'s group works on: rows first .. first + ROWS_EACH
// (past `params.rows` in the last workgroup).
fn first_row(group: vec3<u32>, i: u32) -> u32 {
    return ((group.y * params.groups_x + group.x) * GROUPS + i / LANES) * ROWS_EACH;
}
// ANCHOR_END: lanes

