// The precision of RMSNorm's sums (`rmsnorm.wgsl`) on a device without f64 arithmetic:
// f32, a unit in the last place from the CPU's now and then.
alias Sum = f32;
fn widen(v: f32) -> Sum {
    return v;
}
fn narrow(s: Sum) -> f32 {
    return s;
}
fn inverse_root(m: Sum) -> Sum {
    return inverseSqrt(m);
}
