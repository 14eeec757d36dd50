// Adding each row's terms in the CPU's order: term 0, then term 1, … one after another into
// one f32, as chapter 6's `dot_q4_1_q8_1` and its SIMD twins in chapter 7 do. The same
// terms added in the same order give the same bits, where the tree of the other two
// reductions gives a sum a few units in the last place away. A term is what the CPU rounds
// and adds: a block of 32 (`block_dot`), or for the K-quants a super-block of 256, whose
// sub-blocks' integers the CPU adds before it rounds (the format file's `term`, with
// TERM_BLOCKS its blocks of 32).
//
// The terms are still computed in parallel: the row's 32 lanes share them (lane l takes
// terms l, l + 32, …), each stored in workgroup memory; after one barrier lane 0 adds the
// row's terms in order. Only those additions are serial, one a term. Workgroup memory
// holds MOST_TERMS a row: `Product` refuses longer rows in this order.

// ANCHOR: reduce
const MOST_TERMS: u32 = 1024u; // 32 768 columns (K-quants: 262 144)
var<workgroup> terms: array<f32, 4096>; // ROWS * MOST_TERMS: 16 KiB, WebGPU's least limit
// (ROWS_EACH is 1 here: a lane group takes one row)

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) slot: u32) {
    let row = first_row(group, slot);
    let lane = slot % LANES;
    let mine = slot / LANES * MOST_TERMS; // this row's terms
    let n = min(params.blocks / TERM_BLOCKS, MOST_TERMS);
    if row < params.rows {
        for (var t = lane; t < n; t += LANES) {
            terms[mine + t] = term(row, t);
        }
    }
    workgroupBarrier();
    if lane == 0u && row < params.rows {
        var sum = 0.0;
        for (var t = 0u; t < n; t++) {
            sum += terms[mine + t];
        }
        store(row, sum);
    }
}
// ANCHOR_END: reduce
