// The residual connection: x += y, value by value; or a bias, y's m values added to each row
// of m in x (a prefill's tokens).

// ANCHOR: add
@group(0) @binding(0) var<storage, read_write> x: array<f32>; // (n): the residual stream
@group(0) @binding(1) var<storage, read> y: array<f32>; //       (m): a block's output, a bias

struct Params {
    n: u32,
    m: u32, // n, or a row's length for a bias
    _pad0: u32,
    _pad1: u32,
}
@group(0) @binding(2) var<uniform> params: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i < params.n {
        x[i] = x[i] + y[i % params.m];
    }
}
// ANCHOR_END: add
