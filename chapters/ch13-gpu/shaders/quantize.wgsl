// The input vector quantized on the GPU to the blocks `matvec.wgsl` reads (its `ActBlock`),
// by the rule chapter 6's quantize_q8_0 / quantize_q8_1 use on the CPU:
//   d = max|x| / 127,  q = round(x / d) (halves away from zero),  d kept as an f16,
//   and for Q8_1 also s = d · Σq, kept as an f16.
// One workgroup per block of 32: invocation j takes value j.

// ANCHOR: bindings
@group(0) @binding(0) var<storage, read> x: array<f32>;

struct ActBlock {
    d: f32,
    s: f32,
    qs: array<u32, 8>,
}
@group(0) @binding(1) var<storage, read_write> acts: array<ActBlock>;

struct Params {
    blocks: u32,   // blocks of 32 in x
    with_sum: u32, // 1: Q8_1 (fill s), 0: Q8_0 (s = 0)
    groups_x: u32, // workgroups along x in the dispatch
    _pad: u32,
}
@group(0) @binding(2) var<uniform> params: Params;
// ANCHOR_END: bindings

var<workgroup> amax: array<f32, 32>;
var<workgroup> quants: array<i32, 32>;

// ANCHOR: round
// Rounds halves away from zero, as Rust's f32::round does (WGSL's round() goes to even).
fn round_away(v: f32) -> f32 {
    let t = trunc(v);
    if abs(v - t) >= 0.5 {
        return t + sign(v);
    }
    return t;
}
// ANCHOR_END: round

// The f32 nearest to `v` that an f16 can hold.
fn to_half(v: f32) -> f32 {
    return unpack2x16float(pack2x16float(vec2<f32>(v, 0.0))).x;
}

// ANCHOR: quantize
@compute @workgroup_size(32)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_id) me: vec3<u32>) {
    let b = group.y * params.groups_x + group.x;
    let j = me.x;
    let in_range = b < params.blocks;
    var v = 0.0;
    if in_range {
        v = x[b * 32u + j];
    }
    // max|x| over the block: a tree, 32 → 16 → … → 1.
    amax[j] = abs(v);
    workgroupBarrier();
    for (var width = 16u; width > 0u; width /= 2u) {
        if j < width {
            amax[j] = max(amax[j], amax[j + width]);
        }
        workgroupBarrier();
    }
    let d = amax[0] / 127.0;
    var id = 0.0;
    if d != 0.0 {
        id = 1.0 / d;
    }
    quants[j] = i32(round_away(v * id));
    workgroupBarrier();
    // Lanes 0..8 pack four quants each; lane 0 adds them all for Q8_1's sum.
    if in_range && j < 8u {
        var word = 0u;
        for (var k = 0u; k < 4u; k++) {
            word |= (u32(quants[4u * j + k]) & 0xffu) << (8u * k);
        }
        acts[b].qs[j] = word;
    }
    if in_range && j == 0u {
        var sum = 0;
        for (var k = 0u; k < 32u; k++) {
            sum += quants[k];
        }
        acts[b].d = to_half(d);
        acts[b].s = select(0.0, to_half(f32(sum) * d), params.with_sum == 1u);
    }
}
// ANCHOR_END: quantize
