//! Attention's two inner products for the query heads that share a KV head, together: each
//! key is loaded once for all of them and their dot products run side by side (one running
//! sum each, where one head alone waits on its own chain of additions), and the weighted sum
//! of values keeps a slice of every head's output in registers across all the keys. Every
//! output is computed by the same operations in the same order as [`super::avx2_one_f32::dot_f32`]
//! and [`super::avx2_one_f32::axpy`] give it one at a time: the same bits.

// As in `avx2_one_q4_q8.rs`: each function's only requirement is the CPU features it names.
#![allow(clippy::missing_safety_doc)]

use std::arch::x86_64::*;

use super::avx2_one_f32::{axpy, dot_f32, reduce8};
use super::x86_helpers::prefetch_lines;

/// `out[g · n + j] = dot_f32(qs[g], rows[j])` for every query and each of the `n` rows (`out`:
/// one row of `n` scores per query), four queries at a time. A list's rows may lie anywhere,
/// so the prefetcher cannot guess the next one: while a row is read, the row after next is
/// asked for whole, so that keys not in the caches arrive before their turn.
#[target_feature(enable = "avx2,fma")]
pub fn dot_f32_many(qs: &[&[f32]], rows: &[&[f32]], out: &mut [f32]) {
    let n = rows.len();
    assert_eq!(qs.len() * n, out.len(), "one output per query and row");
    for (j, b) in rows.iter().enumerate() {
        if let Some(after) = rows.get(j + 2) {
            prefetch_lines(after.as_ptr().cast(), 4 * after.len());
        }
        let (b8, b_tail) = b.as_chunks::<8>();
        let mut g = 0;
        while g + 4 <= qs.len() {
            let q: [&[f32]; 4] = std::array::from_fn(|r| qs[g + r]);
            assert!(
                q.iter().all(|q| q.len() == b.len()),
                "dot of slices with different lengths"
            );
            let mut acc = [_mm256_setzero_ps(); 4];
            for (c, y) in b8.iter().enumerate() {
                // SAFETY: 8 f32 of b, and 8 f32 at 8c < len of each query.
                let yv = unsafe { _mm256_loadu_ps(y.as_ptr()) };
                for (a, q) in acc.iter_mut().zip(q) {
                    let xv = unsafe { _mm256_loadu_ps(q.as_ptr().add(8 * c)) };
                    *a = _mm256_add_ps(*a, _mm256_mul_ps(xv, yv));
                }
            }
            for (r, (a, q)) in acc.into_iter().zip(q).enumerate() {
                out[(g + r) * n + j] = reduce8(a, &q[8 * b8.len()..], b_tail);
            }
            g += 4;
        }
        for g in g..qs.len() {
            out[g * n + j] = dot_f32(qs[g], b);
        }
    }
}

// ANCHOR: dot_f32_rows_many
/// `out[g · n + j] = dot_f32(query g, row j)` for the queries side by side in `qs` (`d`
/// floats each) and the `n` rows of `rows`: each row's eight-float steps are loaded once for
/// up to four queries, whose running sums advance side by side. With one query per call, a
/// row's sum is a chain of dependent additions that the next row cannot start on until its
/// loads have come; three chains at once keep the adders busy, and the row comes from memory
/// once, not once per head.
#[target_feature(enable = "avx2,fma")]
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
                super::avx2_one_f32::dot_f32_rows(q, rows, o);
            }
        }
    }
}

/// [`dot_f32_rows_many`] for `G` queries and `d` a multiple of 8: [`dot_f32`]'s sum of each
/// query and row (one running sum of eight lanes, multiply then add, then [`reduce8`]).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn rows_side_by_side<const G: usize>(qs: &[f32], d: usize, rows: &[f32], out: &mut [f32]) {
    let n = rows.len() / d;
    for (j, row) in rows.chunks_exact(d).enumerate() {
        let mut acc = [_mm256_setzero_ps(); G];
        for c in (0..d).step_by(8) {
            // SAFETY: 8 f32 at c + 8 ≤ d of the row and of each query.
            let k = unsafe { _mm256_loadu_ps(row.as_ptr().add(c)) };
            for (g, a) in acc.iter_mut().enumerate() {
                let q = unsafe { _mm256_loadu_ps(qs.as_ptr().add(g * d + c)) };
                *a = _mm256_add_ps(*a, _mm256_mul_ps(q, k));
            }
        }
        for (g, a) in acc.into_iter().enumerate() {
            out[g * n + j] = reduce8(a, &[], &[]);
        }
    }
}
// ANCHOR_END: dot_f32_rows_many

/// `ys[g] += w[g · n + j] · rows[j]` for the `n` rows in order and every output `g` (`ys`:
/// G outputs of `d`): an [`axpy`] per row and output, j outer. With one to four outputs and
/// `d` a multiple of 16, sixteen floats of every output stay in registers across all the rows.
#[target_feature(enable = "avx2,fma")]
pub fn axpy_many(ys: &mut [f32], w: &[f32], rows: &[&[f32]]) {
    let n = rows.len();
    let Some(d) = rows.first().map(|r| r.len()).filter(|&d| d > 0) else {
        return;
    };
    let g = ys.len() / d;
    assert!(
        ys.len() == g * d && w.len() == g * n && rows.iter().all(|r| r.len() == d),
        "axpy_many: ys is (G, d), w (G, n), every row d"
    );
    match g {
        1 if d % 16 == 0 => in_registers::<1>(ys, w, rows),
        2 if d % 16 == 0 => in_registers::<2>(ys, w, rows),
        3 if d % 16 == 0 => in_registers::<3>(ys, w, rows),
        4 if d % 16 == 0 => in_registers::<4>(ys, w, rows),
        _ => {
            for (j, row) in rows.iter().enumerate() {
                for (g, y) in ys.chunks_exact_mut(d).enumerate() {
                    axpy(y, w[g * n + j], row);
                }
            }
        }
    }
}

// ANCHOR: axpy_tiles
/// Rows of values [`in_registers`] takes at a time: sixteen of Gemma-3's 256-float values
/// are 16 KiB, half of a core's first-level data cache.
const TILE: usize = 16;

/// [`axpy_many`] for `G` outputs, sixteen floats of each at a time, over the rows a tile of
/// [`TILE`] at a time. Each pass over a tile reads sixteen floats of every row, a cache line
/// a row, so the tile is read `d / 16` times: from memory once, then from the first-level
/// cache. Without tiles every pass would run over all the rows, line 0 of each then line 1
/// of each, and each pass would wait on memory again. While a tile runs, the next one is asked for
/// whole, a few rows in each pass. Each output's sums still take the rows in order: the
/// same bits.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn in_registers<const G: usize>(ys: &mut [f32], w: &[f32], rows: &[&[f32]]) {
    let (n, d) = (rows.len(), rows[0].len());
    let per_pass = TILE.div_ceil(d / 16); // rows of the next tile asked for in each pass
    let fetch = |r: &&[f32]| prefetch_lines(r.as_ptr().cast(), 4 * d);
    for start in (0..n).step_by(TILE) {
        let tile = &rows[start..(start + TILE).min(n)];
        for (pass, c) in (0..d).step_by(16).enumerate() {
            let ahead = start + TILE + pass * per_pass;
            rows.get(ahead..(ahead + per_pass).min(n))
                .unwrap_or(&[])
                .iter()
                .for_each(fetch);
            // SAFETY (loads and stores): 16 f32 at c + 16 ≤ d of each output and row.
            let mut acc: [[__m256; 2]; G] = std::array::from_fn(|g| unsafe {
                let y = ys.as_ptr().add(g * d + c);
                [_mm256_loadu_ps(y), _mm256_loadu_ps(y.add(8))]
            });
            for (j, row) in (start..).zip(tile) {
                let v = unsafe {
                    [
                        _mm256_loadu_ps(row.as_ptr().add(c)),
                        _mm256_loadu_ps(row.as_ptr().add(c + 8)),
                    ]
                };
                for (g, a) in acc.iter_mut().enumerate() {
                    let s = _mm256_set1_ps(w[g * n + j]);
                    a[0] = _mm256_add_ps(a[0], _mm256_mul_ps(s, v[0]));
                    a[1] = _mm256_add_ps(a[1], _mm256_mul_ps(s, v[1]));
                }
            }
            for (g, a) in acc.iter().enumerate() {
                unsafe {
                    let y = ys.as_mut_ptr().add(g * d + c);
                    _mm256_storeu_ps(y, a[0]);
                    _mm256_storeu_ps(y.add(8), a[1]);
                }
            }
        }
    }
}
// ANCHOR_END: axpy_tiles
