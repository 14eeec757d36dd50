// Greedy decoding on the GPU: the index of the largest logit, the first of equal ones (as
// chapter 9's `first_max`), so a token costs a read-back of 4 bytes, not of the logits.
// One workgroup: each invocation keeps the best of every 256th logit, then a tree in
// workgroup memory keeps the best of the best.

// ANCHOR: argmax
@group(0) @binding(0) var<storage, read> logits: array<f32>; // (vocab)
@group(0) @binding(1) var<storage, read_write> best: array<u32>; // (1): the token

struct Params {
    n: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}
@group(0) @binding(2) var<uniform> params: Params;

const LANES: u32 = 256u;
var<workgroup> values: array<f32, 256>;
var<workgroup> where_: array<u32, 256>;

// Whether (v, i) beats (w, j): larger, or as large and earlier.
fn beats(v: f32, i: u32, w: f32, j: u32) -> bool {
    return v > w || (v == w && i < j);
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) me: vec3<u32>) {
    let lane = me.x;
    var v = -3.4028235e38; // the lowest f32: any logit beats it
    var at = 0xffffffffu;
    for (var i = lane; i < params.n; i += LANES) {
        if beats(logits[i], i, v, at) {
            v = logits[i];
            at = i;
        }
    }
    values[lane] = v;
    where_[lane] = at;
    workgroupBarrier();
    for (var width = LANES / 2u; width > 0u; width /= 2u) {
        if lane < width && beats(values[lane + width], where_[lane + width], values[lane], where_[lane]) {
            values[lane] = values[lane + width];
            where_[lane] = where_[lane + width];
        }
        workgroupBarrier();
    }
    if lane == 0u {
        best[0] = where_[0];
    }
}
// ANCHOR_END: argmax
