// Adding each row's block terms in the CPU's order: block 0's, then block 1's, … one after
// another into one f32, as chapter 6's `dot_q4_1_q8_1` and its SIMD twins in chapter 7 do.
// The same terms added in the same order give the same bits, where the tree of the other
// two reductions gives a sum a few units in the last place away.
//
// The terms are still computed in parallel: the row's 32 lanes take 32 blocks at a time,
// each lane one block's term (the CPU's per-block arithmetic, `block_dot`) into workgroup
// memory, and lane 0 adds those 32 terms in order to the row's running sum; then the next
// 32 blocks. Only the additions are serial: 32 of them a round, against the 32 blocks of
// integer products the lanes did for them.

// ANCHOR: reduce
var<workgroup> terms: array<f32, 128>; // LANES * ROWS: one round's block terms

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) slot: u32) {
    let row = row_of(group, slot);
    let lane = slot % LANES;
    let first = slot - lane; // this row's first slot in `terms`
    var sum = 0.0;
    for (var start = 0u; start < params.blocks; start += LANES) {
        let b = start + lane;
        var term = 0.0;
        if row < params.rows && b < params.blocks {
            term = block_dot(row, b);
        }
        terms[slot] = term;
        workgroupBarrier();
        if lane == 0u {
            let n = min(LANES, params.blocks - start);
            for (var i = 0u; i < n; i++) {
                sum += terms[first + i];
            }
        }
        workgroupBarrier(); // every term added before the next round overwrites it
    }
    if lane == 0u && row < params.rows {
        out[row] = sum;
    }
}
// ANCHOR_END: reduce
