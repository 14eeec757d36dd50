// The least a dispatch can do: one workgroup, each of its 64 invocations adding 1 to its own
// word. Each dispatch reads what the one before wrote, so the driver must finish one before
// the next starts, as in a decode step; `kernels` times thousands in one submission.
@group(0) @binding(0) var<storage, read_write> counts: array<u32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) i: u32) {
    counts[i] += 1u;
}
