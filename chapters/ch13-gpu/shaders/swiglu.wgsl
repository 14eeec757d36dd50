// The feed-forward gate of the Llama families, computed as the quantizer of the down
// product's input reads it (`quantize.wgsl`): gate = SiLU(gate) · up, value by value,
// written back in place. SiLU is chapter 1's x / (1 + e^(−x)), the product taken after it,
// as the CPU engine does (`exp_cpu` from exp_f32.wgsl or exp_f64.wgsl).

// ANCHOR: swiglu
@group(0) @binding(0) var<storage, read_write> gate: array<f32>; // (ffn)
@group(0) @binding(3) var<storage, read> up: array<f32>; //         (ffn)

fn value(i: u32) -> f32 {
    let g = gate[i];
    let v = (g / (1.0 + exp_cpu(-g))) * up[i];
    gate[i] = v;
    return v;
}
// ANCHOR_END: swiglu
