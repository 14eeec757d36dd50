// Gemma-2's soft-cap on the logits, in place: cap · tanh(x / cap), computed as chapter 8 does
// (times 1/cap, tanh, times cap). The input to tanh is clamped to ±10, where f32's tanh is
// already ±1, so that a tanh computed as sinh/cosh cannot overflow into NaN.

// ANCHOR: softcap
@group(0) @binding(0) var<storage, read_write> x: array<f32>; // (n): the logits

struct Params {
    n: u32,
    cap: f32,
    inv_cap: f32, // 1/cap, rounded on the host as the CPU rounds it
    _pad0: u32,
}
@group(0) @binding(1) var<uniform> params: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i < params.n {
        x[i] = tanh(clamp(x[i] * params.inv_cap, -10.0, 10.0)) * params.cap;
    }
}
// ANCHOR_END: softcap
