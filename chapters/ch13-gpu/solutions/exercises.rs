//! Reference solutions for chapter 13's exercises (`cargo xtask solution ch13 N`).

/// Exercise 1: a grid of workgroups.
pub fn grid(total: u32, max_per_dim: u32) -> (u32, u32) {
    let x = total.clamp(1, max_per_dim.max(1));
    (x, total.div_ceil(x).max(1))
}

/// Exercise 2: a Q4_0 weight, read as a shader reads it.
pub fn q4_0_weight(words: &[u32], block: usize, i: usize) -> i32 {
    let at = block + 2 + i % 16;
    let byte = (words[at / 4] >> (8 * (at % 4))) & 0xff;
    let nibble = if i < 16 { byte & 0xf } else { byte >> 4 };
    nibble as i32 - 8
}

/// Exercise 3: the workgroup's sum, in WGSL.
pub fn workgroup_sum_wgsl() -> &'static str {
    r#"
fn workgroup_sum(lane: u32, v: f32) -> f32 {
    partial[lane] = v;
    workgroupBarrier();
    for (var width = 128u; width > 0u; width /= 2u) {
        if lane < width {
            partial[lane] += partial[lane + width];
        }
        workgroupBarrier();
    }
    return partial[0];
}
"#
}

/// Exercise 4: how far two orders of a sum may land apart.
pub fn order_bound(n: usize, sum_abs: f64) -> f64 {
    let u = 2f64.powi(-24);
    let k = n.saturating_sub(1) as f64;
    2.0 * (k * u / (1.0 - k * u)) * sum_abs
}
