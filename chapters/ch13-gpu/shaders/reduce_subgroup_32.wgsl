// Adding each row's 32 lane sums where the adapter's subgroups are exactly the product's
// groups of lanes: 32 invocations, a workgroup's 32 consecutive ones (NVIDIA's warps). Then a
// subgroup holds one group's lanes and nothing else, and a row's total is one `subgroupAdd`,
// with no workgroup memory and no barrier. Vulkan does not promise how invocations form
// subgroups, so `matvec.rs` uses this only where a product through it gave the general
// reduction's bits (reduce_subgroup.wgsl: the other groups' totals there are zeros).

// ANCHOR: reduce
@compute @workgroup_size(128)
fn main(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(local_invocation_index) i: u32,
    @builtin(subgroup_invocation_id) in_subgroup: u32,
) {
    let first = first_row(group, i);
    let sums = lane_sums(group, i);
    for (var k = 0u; k < ROWS_EACH; k++) {
        let total = subgroupAdd(sums[k]);
        if in_subgroup == 0u && first + k < params.rows {
            store(first + k, total);
        }
    }
}
// ANCHOR_END: reduce
