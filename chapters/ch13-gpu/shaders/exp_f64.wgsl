// e^x for f32 x with the bits the CPU's `f32::exp` gives: chapter 7's `avx2_exp.rs` (glibc's
// expf, from Arm's optimized-routines) step for step in f64, rounded once to f32. The
// shaders' own exp() is allowed a few units in the last place, and a unit in the last place
// of a SiLU or an attention weight can move a quantized activation across a rounding
// boundary later in the step. For devices with f64 arithmetic; exp_f32.wgsl is the plain
// version. On Debian 12's lavapipe it equals the CPU's on 262 144 random inputs in [-90, 10];
// a driver may flush the subnormal ones (below about −87.3) to 0, as Mesa 26's does.
//
//   z = x · 32/ln2,  k = round(z),  r = z − k,
//   e^x = 2^(k div 32) · 2^((k mod 32)/32) · (1 + c2·r + c1·r² + c0·r³)

// ANCHOR: exp
// 2^(i/32), the nearest f64 (chapter 7's TABLE with i · 2^47 added back).
var<private> POW2: array<f64, 32> = array<f64, 32>(
    f64(0x1.0000000000000p+0), f64(0x1.059b0d3158574p+0),
    f64(0x1.0b5586cf9890fp+0), f64(0x1.11301d0125b51p+0),
    f64(0x1.172b83c7d517bp+0), f64(0x1.1d4873168b9aap+0),
    f64(0x1.2387a6e756238p+0), f64(0x1.29e9df51fdee1p+0),
    f64(0x1.306fe0a31b715p+0), f64(0x1.371a7373aa9cbp+0),
    f64(0x1.3dea64c123422p+0), f64(0x1.44e086061892dp+0),
    f64(0x1.4bfdad5362a27p+0), f64(0x1.5342b569d4f82p+0),
    f64(0x1.5ab07dd485429p+0), f64(0x1.6247eb03a5585p+0),
    f64(0x1.6a09e667f3bcdp+0), f64(0x1.71f75e8ec5f74p+0),
    f64(0x1.7a11473eb0187p+0), f64(0x1.82589994cce13p+0),
    f64(0x1.8ace5422aa0dbp+0), f64(0x1.93737b0cdc5e5p+0),
    f64(0x1.9c49182a3f090p+0), f64(0x1.a5503b23e255dp+0),
    f64(0x1.ae89f995ad3adp+0), f64(0x1.b7f76f2fb5e47p+0),
    f64(0x1.c199bdd85529cp+0), f64(0x1.cb720dcef9069p+0),
    f64(0x1.d5818dcfba487p+0), f64(0x1.dfc97337b9b5fp+0),
    f64(0x1.ea4afa2a490dap+0), f64(0x1.f50765b6e4540p+0),
);

fn exp_cpu(x: f32) -> f32 {
    if x > 88.72283935546875 {
        return bitcast<f32>(0x7f800000u); // overflows to +inf, as expf does
    }
    if x < -103.97207641601562 {
        return 0.0; // underflows to 0
    }
    // k = round(x · 32/ln2) and r = x · 32/ln2 − k with one rounding, as the library's
    // fused multiply-adds give them, without trusting the driver to fuse: 32/ln2 in two
    // parts of 26 and 27 bits, each product with x (24 bits) exact in f64
    let n_hi = f64(0x1.7154760000000p+5);
    let n_lo = f64(0x1.4ae0bf8000000p-21);
    let xd = f64(x);
    let k = round(n_hi * xd + n_lo * xd);
    let r = (n_hi * xd - k) + n_lo * xd; // the first difference is exact
    let ki = i32(k);
    let s = ldexp(POW2[ki & 31], ki >> 5u);
    let cubic = fma(f64(0x1.c6af84b912394p-20), r, f64(0x1.ebfce50fac4f3p-13));
    let linear = fma(r, f64(0x1.62e42ff0c52d6p-6), f64(1.0));
    return f32(fma(cubic, r * r, linear) * s);
}
// ANCHOR_END: exp
