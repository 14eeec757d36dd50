// RMSNorm with its sum of squares, mean and scale in f64, as chapter 1's ops::rmsnorm
// computes them: out = f32(x · scale) · weight, scale = 1 / sqrt(mean(x²) + eps). For
// devices with f64 arithmetic (wgpu's SHADER_F64); rmsnorm.wgsl is the f32 version.
// One workgroup per row; its 256 invocations stride over the row, a tree adds their sums.

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
var<workgroup> partial: array<f64, 256>;

// ANCHOR: rmsnorm
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_id) me: vec3<u32>) {
    let row = group.x;
    let lane = me.x;
    let start = row * params.n;
    var sum = f64(0.0);
    if row < params.rows {
        for (var i = lane; i < params.n; i += LANES) {
            let v = f64(x[start + i]);
            sum += v * v; // exact: an f32's square fits an f64
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
    let scale = f64(1.0) / sqrt(partial[0] / f64(params.n) + f64(params.eps));
    if row < params.rows {
        for (var i = lane; i < params.n; i += LANES) {
            out[start + i] = f32(f64(x[start + i]) * scale) * weight[i];
        }
    }
}
// ANCHOR_END: rmsnorm
