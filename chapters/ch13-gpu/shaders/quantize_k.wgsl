// The input vector quantized on the GPU to Q8_K, the K-quants' activations, by the rule of
// chapter 7's quantize_q8_k (llama.cpp's): per super-block of 256, the value of largest
// magnitude (the first, on a tie) maps to −127, so iscale = −127 / max, q = round(iscale·x)
// (ties to even) capped at 127, and d = 1 / iscale. Written as the eight blocks of 32 that
// `matvec.wgsl` reads (`acts.rs`): d in each, s = the block's Σq.
// One workgroup per super-block: invocation j takes value j.

@group(0) @binding(0) var<storage, read> x: array<f32>;

struct ActBlock {
    d: f32,
    s: f32,
    qs: array<u32, 8>,
}
@group(0) @binding(1) var<storage, read_write> acts: array<ActBlock>;

struct Params {
    blocks: u32,   // super-blocks of 256 in x
    _unused: u32,
    groups_x: u32, // workgroups along x in the dispatch
    _pad: u32,
}
@group(0) @binding(2) var<uniform> params: Params;

var<workgroup> amax: array<f32, 256>;
var<workgroup> at: array<u32, 256>;
var<workgroup> quants: array<i32, 256>;

// ANCHOR: quantize_k
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_id) me: vec3<u32>) {
    let sb = group.y * params.groups_x + group.x;
    let j = me.x;
    let in_range = sb < params.blocks;
    var v = 0.0;
    if in_range {
        v = x[sb * 256u + j];
    }
    // Where |x| is largest, the first such place on a tie: a tree over (|x|, index).
    amax[j] = abs(v);
    at[j] = j;
    workgroupBarrier();
    for (var width = 128u; width > 0u; width /= 2u) {
        if j < width {
            let o = j + width;
            if amax[o] > amax[j] || (amax[o] == amax[j] && at[o] < at[j]) {
                amax[j] = amax[o];
                at[j] = at[o];
            }
        }
        workgroupBarrier();
    }
    var q = 0;
    var d = 0.0;
    if amax[0] != 0.0 {
        let iscale = -127.0 / x[sb * 256u + at[0]];
        q = min(i32(round(iscale * v)), 127); // WGSL's round() is ties to even
        d = 1.0 / iscale;
    }
    quants[j] = q;
    workgroupBarrier();
    // Invocations 0..64 pack four quants each; 0..8 add their block's 32 for its s.
    if in_range && j < 64u {
        var word = 0u;
        for (var k = 0u; k < 4u; k++) {
            word |= (u32(quants[4u * j + k]) & 0xffu) << (8u * k);
        }
        acts[sb * 8u + j / 8u].qs[j % 8u] = word;
    }
    if in_range && j < 8u {
        var sum = 0;
        for (var k = 0u; k < 32u; k++) {
            sum += quants[32u * j + k];
        }
        acts[sb * 8u + j].d = d;
        acts[sb * 8u + j].s = f32(sum);
    }
}
// ANCHOR_END: quantize_k
