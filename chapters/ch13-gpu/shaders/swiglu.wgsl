// The feed-forward gate: gate = SiLU(gate) · up, value by value, in place. SiLU is chapter
// 1's x / (1 + e^(−x)), the product taken after it, as the CPU engine does.

// ANCHOR: swiglu
@group(0) @binding(0) var<storage, read_write> gate: array<f32>; // (ffn)
@group(0) @binding(1) var<storage, read> up: array<f32>; //         (ffn)

struct Params {
    n: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}
@group(0) @binding(2) var<uniform> params: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i < params.n {
        let g = gate[i];
        gate[i] = (g / (1.0 + exp_cpu(-g))) * up[i];
    }
}
// ANCHOR_END: swiglu
