// RMSNorm of each row of x, as chapter 1's ops::rmsnorm computes it: out = (x · scale) ·
// weight, scale = 1 / sqrt(mean(x²) + eps), its sum of squares, mean and scale in `Sum`,
// the precision `rmsnorm.rs` puts before this file: f64 where the device has f64 arithmetic
// (wgpu's SHADER_F64: chapter 1's sums are f64, `sum_f64.wgsl`), else f32 (`sum_f32.wgsl`).
// One workgroup per row; its 256 invocations stride over the row, a tree adds their sums.

@group(0) @binding(0) var<storage, read_write> x: array<f32>; // (rows, n)
@group(0) @binding(1) var<storage, read> weight: array<f32>; // (n): the file's F32 norm
@group(0) @binding(2) var<storage, read_write> out: array<f32>; // (rows, n)

struct Params {
    n: u32,
    rows: u32,
    eps: f32,
    add: u32,   // 1: first x += y (the residual the last block left); 2: x += RMSNorm(y)
    quant: u32, // 0: no more; else out quantized too, as Q8_0, Q8_1 or Q8_K, plus one
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}
@group(0) @binding(3) var<uniform> params: Params;
@group(0) @binding(4) var<storage, read> y: array<f32>; // (rows, n), read when add is 1 or 2
// (n): the block's own norm (Gemma's after attention and after the feed-forward network),
// read when add is 2: y is normed with it first, as a dispatch of this shader would norm it
@group(0) @binding(6) var<storage, read> post: array<f32>;
// (rows · n / 32) blocks, written when quant is not 0 (`quantize_chunk.wgsl`)
@group(0) @binding(5) var<storage, read_write> acts: array<ActBlock>;

const LANES: u32 = 256u;
const CHUNK: u32 = LANES; // values quantized at once (quantize_chunk.wgsl)
var<workgroup> partial: array<Sum, 256>;

// The row's scale, 1 / sqrt(mean(v²) + eps), from each lane's sum of its values' squares:
// a tree in workgroup memory adds them. Called by every invocation (it waits at barriers).
fn row_scale(lane: u32, sum: Sum) -> Sum {
    partial[lane] = sum;
    workgroupBarrier();
    for (var width = LANES / 2u; width > 0u; width /= 2u) {
        if lane < width {
            partial[lane] += partial[lane + width];
        }
        workgroupBarrier();
    }
    let scale = inverse_root(partial[0] / Sum(params.n) + widen(params.eps));
    workgroupBarrier(); // before a second tree writes `partial`
    return scale;
}

// ANCHOR: rmsnorm
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_id) me: vec3<u32>) {
    let row = group.x;
    let lane = me.x;
    let start = row * params.n;
    // Gemma: the block's output normed first, the same arithmetic as a norm of its own
    var y_scale = Sum(0.0);
    if params.add == 2u {
        var y_sum = Sum(0.0);
        for (var i = lane; row < params.rows && i < params.n; i += LANES) {
            let v = y[start + i];
            y_sum += widen(v) * widen(v);
        }
        y_scale = row_scale(lane, y_sum);
    }
    var sum = Sum(0.0);
    if row < params.rows {
        for (var i = lane; i < params.n; i += LANES) {
            var v = x[start + i];
            if params.add == 1u {
                v += y[start + i];
                x[start + i] = v;
            } else if params.add == 2u {
                v += narrow(widen(y[start + i]) * y_scale) * post[i];
                x[start + i] = v;
            }
            sum += widen(v) * widen(v); // in f64 exact: an f32's square fits
        }
    }
    let scale = row_scale(lane, sum);
    // Each invocation's values again, in chunks of 256, the chunk quantized where asked.
    for (var c = 0u; c < params.n; c += LANES) {
        let i = c + lane;
        var v = 0.0;
        if row < params.rows && i < params.n {
            v = narrow(widen(x[start + i]) * scale) * weight[i];
            out[start + i] = v;
        }
        if params.quant != 0u {
            let blocks = min((params.n - c) / 32u, 8u);
            quantize_chunk(lane, v, (start + c) / 32u, blocks, params.quant - 1u);
        }
    }
}
// ANCHOR_END: rmsnorm
