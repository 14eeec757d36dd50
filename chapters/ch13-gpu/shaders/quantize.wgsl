// The input of a product quantized on the GPU (`quantize_chunk.wgsl`), so a decode step
// never brings its activations back to the host between products. One workgroup per 256
// values: invocation j takes value j. A file before this one brings `value(i)`, the i-th
// input value: the buffer's own (`value_plain.wgsl`), or a feed-forward gate's SiLU(g) · u
// or GELU(g) · u, computed here and written back (`value_swiglu.wgsl`, `value_gelu.wgsl`),
// so the gate costs no dispatch of its own.

// ANCHOR: bindings
@group(0) @binding(1) var<storage, read_write> acts: array<ActBlock>;

struct Params {
    blocks: u32,   // blocks of 32 to write
    format: u32,   // Q8_0, Q8_1 or Q8_K (quantize_chunk.wgsl)
    groups_x: u32, // workgroups along x in the dispatch
    _pad: u32,
}
@group(0) @binding(2) var<uniform> params: Params;
// ANCHOR_END: bindings

const CHUNK: u32 = 256u;

// ANCHOR: quantize
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_id) me: vec3<u32>) {
    let chunk = group.y * params.groups_x + group.x;
    let j = me.x;
    let first = chunk * 8u; // the chunk's first block
    let i = first * 32u + j;
    var v = 0.0;
    if i < params.blocks * 32u {
        v = value(i);
    }
    quantize_chunk(j, v, first, min(params.blocks - min(first, params.blocks), 8u), params.format);
}
// ANCHOR_END: quantize
