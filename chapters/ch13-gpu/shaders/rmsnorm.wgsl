// RMSNorm of each row of x: out = x / sqrt(mean(x²) + eps) · weight, as chapter 1's
// ops::rmsnorm. One workgroup per row; its 256 invocations stride over the row, then a tree
// in workgroup memory adds their sums of squares.

@group(0) @binding(0) var<storage, read> x: array<f32>;      // (rows, n)
@group(0) @binding(1) var<storage, read> weight: array<f32>; // (n): the file's F32 norm
@group(0) @binding(2) var<storage, read_write> out: array<f32>; // (rows, n)

struct Params {
    n: u32,
    rows: u32,
    eps: f32,
    _pad: u32,
}
@group(0) @binding(3) var<uniform> params: Params;

const LANES: u32 = 256u;
var<workgroup> partial: array<f32, 256>;

// ANCHOR: rmsnorm
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_id) me: vec3<u32>) {
    let row = group.x;
    let lane = me.x;
    let start = row * params.n;
    var sum = 0.0;
    if row < params.rows {
        for (var i = lane; i < params.n; i += LANES) {
            let v = x[start + i];
            sum += v * v;
        }
    }
    partial[lane] = sum;
    workgroupBarrier();
    for (var width = LANES / 2u; width > 0u; width /= 2u) {
        if lane < width {
            partial[lane] += partial[lane + width];
        }
        workgroupBarrier();
    }
    let scale = inverseSqrt(partial[0] / f32(params.n) + params.eps);
    if row < params.rows {
        for (var i = lane; i < params.n; i += LANES) {
            out[start + i] = (x[start + i] * scale) * weight[i];
        }
    }
}
// ANCHOR_END: rmsnorm
