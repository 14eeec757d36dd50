// RoPE: every head of each token's queries and keys turned by its position's angles, in
// place. The host computes cos and sin for each position as chapter 8's table does (the
// angle in f64, rounded once to f32) and writes them into the step's buffer, so the
// rotation is chapter 3's `rotate`, value for value.
// One invocation per pair: (n_heads + n_kv_heads) heads of head_dim / 2 pairs, a row of
// workgroups per token.

// ANCHOR: rope
struct Step {
    pos: u32,
    tokens: u32,
    tables: u32,
    _pad: u32,
    trig: array<f32>, // (tokens, tables, 2, head_dim / 2): each base's cos, then sin
}
@group(0) @binding(0) var<storage, read> step: Step;
@group(0) @binding(1) var<storage, read_write> q: array<f32>; // (tokens, n_heads, head_dim)
@group(0) @binding(2) var<storage, read_write> k: array<f32>; // (tokens, n_kv_heads, head_dim)

struct Params {
    n_heads: u32,
    n_kv_heads: u32,
    head_dim: u32,
    halves: u32, // 1: pair i with i + head_dim / 2 (chapter 8's); 0: pair 2i with 2i + 1
    table: u32,  // which RoPE base's cos and sin: the layer's (Gemma-3: local or global)
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}
@group(0) @binding(3) var<uniform> params: Params;

// The two coordinates pair `i` of a head turns (chapter 3's `Pairing::pair`).
fn pair(i: u32) -> vec2<u32> {
    if params.halves == 1u {
        return vec2<u32>(i, i + params.head_dim / 2u);
    }
    return vec2<u32>(2u * i, 2u * i + 1u);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let half = params.head_dim / 2u;
    let head = id.x / half;
    let i = id.x % half;
    let token = id.y;
    if head >= params.n_heads + params.n_kv_heads || token >= step.tokens {
        return;
    }
    let t = (token * step.tables + params.table) * params.head_dim; // this base's (2, head_dim / 2)
    let c = step.trig[t + i];
    let s = step.trig[t + half + i];
    let p = pair(i);
    if head < params.n_heads {
        let at = (token * params.n_heads + head) * params.head_dim;
        let a = q[at + p.x];
        let b = q[at + p.y];
        q[at + p.x] = a * c - b * s;
        q[at + p.y] = a * s + b * c;
    } else {
        let at = (token * params.n_kv_heads + head - params.n_heads) * params.head_dim;
        let a = k[at + p.x];
        let b = k[at + p.y];
        k[at + p.x] = a * c - b * s;
        k[at + p.y] = a * s + b * c;
    }
}
// ANCHOR_END: rope
