// The precision of RMSNorm's sums (`rmsnorm.wgsl`) where the device has f64 arithmetic:
// chapter 1's, so the norm is the CPU's to the bit.
alias Sum = f64;
fn widen(v: f32) -> Sum {
    return f64(v);
}
fn narrow(s: Sum) -> f32 {
    return f32(s);
}
fn inverse_root(m: Sum) -> Sum {
    return f64(1.0) / sqrt(m); // WGSL's inverseSqrt takes no f64
}
