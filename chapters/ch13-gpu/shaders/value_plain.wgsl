// The quantizer's input as it is in the buffer.
@group(0) @binding(0) var<storage, read> x: array<f32>;

fn value(i: u32) -> f32 {
    return x[i];
}
