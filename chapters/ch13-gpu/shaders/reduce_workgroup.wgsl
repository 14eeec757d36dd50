// Adding each row's 32 lane sums through workgroup memory: works on every adapter.

// ANCHOR: reduce
var<workgroup> partial: array<f32, 128>; // LANES * ROWS

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) slot: u32) {
    let row = row_of(group, slot);
    let lane = slot % LANES;
    partial[slot] = lane_sum(row, lane);
    workgroupBarrier();
    // Halve the number of sums each step: 32 → 16 → … → 1.
    for (var width = LANES / 2u; width > 0u; width /= 2u) {
        if lane < width {
            partial[slot] += partial[slot + width];
        }
        workgroupBarrier();
    }
    if lane == 0u && row < params.rows {
        store(row, partial[slot]);
    }
}
// ANCHOR_END: reduce
