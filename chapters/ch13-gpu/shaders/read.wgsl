// The bandwidth probe: reads a buffer once and does nothing else, the ceiling for a shader
// that streams its weights from memory once. Invocation g of the grid's n reads words g,
// g + n, g + 2n, …, so at each step the grid reads one contiguous span, neighbours
// neighbouring words. It reads four of its words before adding any (four loads in flight:
// one an invocation is too few to keep a large GPU's memory busy). Each invocation adds its
// words (wrapping) and the workgroup writes one total, so that no read can be optimised away.

// ANCHOR: read
@group(0) @binding(0) var<storage, read> data: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>; // one word a workgroup

struct Params {
    words: u32,    // words in `data`
    groups_x: u32, // workgroups along x in the dispatch
    groups: u32,   // workgroups in all
    _pad: u32,
}
@group(0) @binding(2) var<uniform> params: Params;

const SIZE: u32 = 256u;
var<workgroup> total: atomic<u32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) i: u32) {
    let wg = group.y * params.groups_x + group.x;
    if i == 0u {
        atomicStore(&total, 0u);
    }
    workgroupBarrier();
    var sums = vec4<u32>();
    if wg < params.groups {
        let n = params.groups * SIZE;
        var w = wg * SIZE + i;
        for (; w + 3u * n < params.words; w += 4u * n) {
            sums += vec4(data[w], data[w + n], data[w + 2u * n], data[w + 3u * n]);
        }
        for (; w < params.words; w += n) {
            sums.x += data[w];
        }
    }
    atomicAdd(&total, sums.x + sums.y + sums.z + sums.w);
    workgroupBarrier();
    if i == 0u && wg < params.groups {
        out[wg] = atomicLoad(&total);
    }
}
// ANCHOR_END: read
