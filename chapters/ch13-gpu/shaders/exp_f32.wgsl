// e^x with the shader's own exp(), for devices without f64 arithmetic (exp_f64.wgsl says
// why the other version exists).
fn exp_cpu(x: f32) -> f32 {
    return exp(x);
}
