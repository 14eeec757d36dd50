// Adding each row's block terms in the CPU's order: block 0's, then block 1's, … one after
// another into one f32, as chapter 6's `dot_q4_1_q8_1` and its SIMD twins in chapter 7 do.
// The same terms added in the same order give the same bits, where the tree of the other
// two reductions gives a sum a few units in the last place away.
//
// The terms are still computed in parallel: the row's 32 lanes share its blocks as in the
// other reductions (lane l takes blocks l, l + 32, …), each block's term (the CPU's
// per-block arithmetic, `block_dot`) stored in workgroup memory; after one barrier lane 0
// adds the row's terms in order. Only those additions are serial, one a block.
// Workgroup memory holds MOST_BLOCKS terms a row: `Product` refuses longer rows in this order.

// ANCHOR: reduce
const MOST_BLOCKS: u32 = 1024u; // 32 768 columns
var<workgroup> terms: array<f32, 4096>; // ROWS * MOST_BLOCKS: 16 KiB, WebGPU's least limit

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) slot: u32) {
    let row = row_of(group, slot);
    let lane = slot % LANES;
    let mine = slot / LANES * MOST_BLOCKS; // this row's terms
    let blocks = min(params.blocks, MOST_BLOCKS);
    if row < params.rows {
        for (var b = lane; b < blocks; b += LANES) {
            terms[mine + b] = block_dot(row, b);
        }
    }
    workgroupBarrier();
    if lane == 0u && row < params.rows {
        var sum = 0.0;
        for (var b = 0u; b < blocks; b++) {
            sum += terms[mine + b];
        }
        out[row] = sum;
    }
}
// ANCHOR_END: reduce
