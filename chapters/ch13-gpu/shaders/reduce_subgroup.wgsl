// Adding each row's 32 lane sums with subgroup operations (wgpu's SUBGROUP feature; the
// WGSL standard's `enable subgroups;` line is not yet accepted by wgpu 30). A subgroup is a set of invocations that run
// in lockstep: 32 on NVIDIA, 32 or 64 on AMD, 8 to 32 on Intel, 8 on lavapipe.
// Which invocations share a subgroup is the driver's choice, so a subgroup may hold lanes of
// several rows: it adds each row's lanes separately (`subgroupAdd` of the lanes' sums, zero
// for lanes of other rows), and the subgroups' totals meet in workgroup memory.

// ANCHOR: reduce
const MOST_SUBGROUPS: u32 = 32u; // 128 invocations in subgroups of at least 4
var<workgroup> totals: array<f32, 128 * ROWS_EACH>; // MOST_SUBGROUPS × ROWS

@compute @workgroup_size(128)
fn main(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(local_invocation_index) i: u32,
    @builtin(subgroup_id) subgroup: u32,
    @builtin(num_subgroups) subgroups: u32,
    @builtin(subgroup_invocation_id) in_subgroup: u32,
) {
    let first = first_row(group, i);
    let lane = i % LANES;
    let mine = i / LANES; // which of the workgroup's groups
    let sums = lane_sums(group, i);
    for (var g = 0u; g < GROUPS; g++) {
        for (var k = 0u; k < ROWS_EACH; k++) {
            let total = subgroupAdd(select(0.0, sums[k], mine == g));
            if in_subgroup == 0u {
                totals[(subgroup * GROUPS + g) * ROWS_EACH + k] = total;
            }
        }
    }
    workgroupBarrier();
    if lane == 0u {
        for (var k = 0u; k < ROWS_EACH && first + k < params.rows; k++) {
            var row_total = 0.0;
            for (var s = 0u; s < subgroups; s++) {
                row_total += totals[(s * GROUPS + mine) * ROWS_EACH + k];
            }
            store(first + k, row_total);
        }
    }
}
// ANCHOR_END: reduce
