// Adding each row's 32 lane sums through workgroup memory: works on every adapter.

// ANCHOR: reduce
var<workgroup> partial: array<f32, 128 * ROWS_EACH>; // each of a lane's rows: 128 sums

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) slot: u32) {
    let first = first_row(group, slot);
    let lane = slot % LANES;
    let sums = lane_sums(group, slot);
    for (var k = 0u; k < ROWS_EACH; k++) {
        partial[k * 128u + slot] = sums[k];
    }
    workgroupBarrier();
    // Halve the number of sums each step: 32 → 16 → … → 1.
    for (var width = LANES / 2u; width > 0u; width /= 2u) {
        if lane < width {
            for (var k = 0u; k < ROWS_EACH; k++) {
                partial[k * 128u + slot] += partial[k * 128u + slot + width];
            }
        }
        workgroupBarrier();
    }
    if lane == 0u {
        for (var k = 0u; k < ROWS_EACH && first + k < params.rows; k++) {
            store(first + k, partial[k * 128u + slot]);
        }
    }
}
// ANCHOR_END: reduce
