//! Attention's dot products for the query heads that share a KV head, together, on NEON:
//! each key is loaded once for up to four queries, whose running sums advance side by side.
//! Every output is computed by the same operations in the same order as
//! [`super::neon_one_f32::dot_f32`] gives it one at a time: the same bits.

#![cfg(target_arch = "aarch64")]
#![allow(clippy::missing_safety_doc)]

use std::arch::aarch64::*;

use super::neon_one_f32::{dot_f32_rows, load8, mul_add8, reduce8};

/// `out[g · n + j] = dot_f32(query g, row j)` for the queries side by side in `qs` (`d`
/// floats each) and the `n` rows of `rows`: each row's eight-float steps are loaded once for
/// up to four queries, whose running sums advance side by side (chapter 6's default makes a
/// `dot_f32_rows` per query, reading every row once per query).
#[target_feature(enable = "neon")]
pub fn dot_f32_rows_many(qs: &[f32], d: usize, rows: &[f32], out: &mut [f32]) {
    let Some((n, g)) = super::products::rows_many_shape(qs, d, rows, out) else {
        return;
    };
    let steps = d.is_multiple_of(8); // whole eight-float steps, no tail
    match g {
        1 if steps => rows_side_by_side::<1>(qs, d, rows, out),
        2 if steps => rows_side_by_side::<2>(qs, d, rows, out),
        3 if steps => rows_side_by_side::<3>(qs, d, rows, out),
        4 if steps => rows_side_by_side::<4>(qs, d, rows, out),
        _ => {
            for (q, o) in qs.chunks_exact(d).zip(out.chunks_exact_mut(n)) {
                dot_f32_rows(q, rows, o);
            }
        }
    }
}

/// [`dot_f32_rows_many`] for `G` queries and `d` a multiple of 8: the sums of
/// [`super::neon_one_f32::dot_f32`] for each query and row.
#[inline]
#[target_feature(enable = "neon")]
fn rows_side_by_side<const G: usize>(qs: &[f32], d: usize, rows: &[f32], out: &mut [f32]) {
    let n = rows.len() / d;
    for (j, row) in rows.chunks_exact(d).enumerate() {
        let mut acc = [[vdupq_n_f32(0.0); 2]; G];
        for c in (0..d).step_by(8) {
            // SAFETY: 8 f32 at c + 8 ≤ d of the row and of each query.
            let k = unsafe { load8(row.as_ptr().add(c)) };
            for (g, a) in acc.iter_mut().enumerate() {
                let q = unsafe { load8(qs.as_ptr().add(g * d + c)) };
                *a = mul_add8(*a, q, k);
            }
        }
        for (g, a) in acc.into_iter().enumerate() {
            out[g * n + j] = reduce8(a, &[], &[]);
        }
    }
}
