// The feed-forward gate of the Gemma families, computed as the quantizer of the down
// product's input reads it (`quantize.wgsl`): gate = GELU(gate) · up, value by value,
// written back in place. GELU is chapter 8's `gelu_f16`, llama.cpp's: the input rounded to
// f16 and looked up in a table of the 65 536 f16 values' GELU (chapter 8's table, uploaded
// once as f32); 0 at or below −10, the input itself at or above 10. The table makes the
// tanh the CPU's, bit for bit. The rounding to f16 is done here in integers, to nearest
// with ties to even as the CPU's `f32_to_f16`, because WGSL lets a conversion to f16 round
// either way.

// ANCHOR: gelu
@group(0) @binding(0) var<storage, read_write> gate: array<f32>; // (ffn)
@group(0) @binding(3) var<storage, read> up: array<f32>; //         (ffn)
@group(0) @binding(4) var<storage, read> table: array<f32>; //      (65536): GELU of each f16

// The bits of the f16 nearest `x` (ties to even), for a finite `x` inside (−10, 10).
fn f16_bits(x: f32) -> u32 {
    let bits = bitcast<u32>(x);
    let sign = (bits >> 16u) & 0x8000u;
    let e = i32((bits >> 23u) & 0xffu) - 127 + 15; // f16's biased exponent, if x is normal
    let significand = (bits & 0x7fffffu) | 0x800000u; // 24 bits, the implicit 1 on top
    // How far right to leave 10 fraction bits: 13 for a normal f16, more for a subnormal
    // (exponent pinned at 2^-14); past 24 the value is below half the smallest subnormal.
    var shift = 13u;
    if e <= 0 {
        if 14 - e > 24 {
            return sign; // ±0
        }
        shift = u32(14 - e);
    }
    let kept = significand >> shift;
    let rest = significand & ((1u << shift) - 1u);
    let half = 1u << (shift - 1u);
    var magnitude = kept; // a subnormal: exponent field 0
    if e > 0 {
        magnitude = (u32(e) << 10u) | (kept & 0x3ffu);
    }
    // the rounding's carry added last, so that it may ripple into the exponent
    if rest > half || (rest == half && (kept & 1u) == 1u) {
        magnitude += 1u;
    }
    return sign | magnitude;
}

fn value(i: u32) -> f32 {
    let g = gate[i];
    var a = g; // at or above 10 (and a NaN, which fails both tests) as it is
    if g <= -10.0 {
        a = 0.0;
    } else if g < 10.0 {
        a = table[f16_bits(g)];
    }
    let v = a * up[i];
    gate[i] = v;
    return v;
}
// ANCHOR_END: gelu
