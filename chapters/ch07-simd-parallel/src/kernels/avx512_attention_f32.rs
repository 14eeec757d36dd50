//! Attention's two inner products in 512-bit registers, for the heads that share a KV head:
//! [`super::avx2_many_f32::dot_f32_rows_many`] with two keys side by side in one register
//! (the first key's eight lanes in lanes 0..8, the second's in 8..16), and
//! [`super::avx2_one_f32::axpy_rows`] sixteen floats of the output at a time, for one output
//! or for the heads together.
//!
//! Each lane still does what the 256-bit kernel's lane does, in the same order: a key's
//! score is one running sum of eight lanes (multiply, then add), summed by the same halving
//! tree; an output element is `y + w·x`, key after key. So every score and every output is
//! the 256-bit kernel's, bit for bit, with half the multiply and add instructions. In a
//! prefill, where every query of a long prompt meets every key before it, these two loops
//! took as long as the matrix products on a small model (SmolLM2's shape, one thread).

// As in `avx2_one_q4_q8.rs`: each function's only requirement is the CPU features it names.
#![allow(clippy::missing_safety_doc)]

use std::arch::x86_64::*;

/// Two keys' eight floats at `c` (`a` and `b`) in one register, `a`'s in lanes 0..8.
///
/// # Safety
/// `a` and `b` must each be readable for 8 floats.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn two_keys(a: *const f32, b: *const f32) -> __m512 {
    // SAFETY: the caller's promise.
    unsafe {
        let lo = _mm512_castps256_ps512(_mm256_loadu_ps(a));
        _mm512_castpd_ps(_mm512_insertf64x4::<1>(
            _mm512_castps_pd(lo),
            _mm256_castps_pd(_mm256_loadu_ps(b)),
        ))
    }
}

/// The same eight floats at `q` in both halves of a register.
///
/// # Safety
/// `q` must be readable for 8 floats.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn both_halves(q: *const f32) -> __m512 {
    // SAFETY: the caller's promise.
    unsafe { _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_loadu_ps(q)))) }
}

/// [`super::avx2_one_f32::reduce8`] of both halves at once: `(sum of lanes 0..8, sum of
/// lanes 8..16)`, each added in the 256-bit kernel's order: lane `i` and `i + 4`, then
/// those four halved the same way, then the last two.
#[inline]
#[target_feature(enable = "avx512f,avx2")]
fn reduce_two(acc: __m512) -> (f32, f32) {
    // 128-bit quarters [a0..4, a4..8, b0..4, b4..8]: (a0..4, b0..4) + (a4..8, b4..8)
    let x = _mm512_shuffle_f32x4::<0b10_00_10_00>(acc, acc);
    let y = _mm512_shuffle_f32x4::<0b11_01_11_01>(acc, acc);
    let h = _mm512_castps512_ps256(_mm512_add_ps(x, y)); // a's four in 0..4, b's in 4..8
    let h = _mm256_add_ps(h, _mm256_permute_ps::<0b11_10_11_10>(h)); // (·0+·2, ·1+·3)
    let h = _mm256_add_ps(h, _mm256_permute_ps::<0b01>(h)); // lane 0 and lane 4: the sums
    let b = _mm256_extractf128_ps::<1>(h);
    (_mm_cvtss_f32(_mm256_castps256_ps128(h)), _mm_cvtss_f32(b))
}

/// [`reduce_two`] of eight registers at once: the sixteen keys' sums, key `2i` from lanes
/// 0..8 of `accs[i]` and key `2i + 1` from lanes 8..16, in key order. Each add instruction
/// takes one step of the same tree for many keys (the keys' partial sums shuffled side by
/// side between the steps), so every sum is added as [`reduce_two`] adds it, with a
/// quarter of the instructions.
#[inline]
#[target_feature(enable = "avx512f")]
fn reduce_sixteen(accs: &[__m512; 8]) -> __m512 {
    // step 1, four keys a register: quarter m of s[j] holds key 4j + m's lanes i + (i + 4)
    let s: [__m512; 4] = std::array::from_fn(|j| {
        let (x, y) = (accs[2 * j], accs[2 * j + 1]); // keys 4j, 4j + 1 and 4j + 2, 4j + 3
        let lo = _mm512_shuffle_f32x4::<0b10_00_10_00>(x, y); // each key's lanes 0..4
        let hi = _mm512_shuffle_f32x4::<0b11_01_11_01>(x, y); // and 4..8
        _mm512_add_ps(lo, hi)
    });
    // step 2, (·0 + ·2, ·1 + ·3): quarter m of r[t] holds keys 8t + m and 8t + 4 + m
    let r: [__m512; 2] = std::array::from_fn(|t| {
        let (x, y) = (s[2 * t], s[2 * t + 1]);
        let even = _mm512_shuffle_ps::<0b01_00_01_00>(x, y);
        let odd = _mm512_shuffle_ps::<0b11_10_11_10>(x, y);
        _mm512_add_ps(even, odd)
    });
    // step 3, the last two: lane 4m + e holds key 4e + m's sum
    let first = _mm512_shuffle_ps::<0b10_00_10_00>(r[0], r[1]);
    let second = _mm512_shuffle_ps::<0b11_01_11_01>(r[0], r[1]);
    let sums = _mm512_add_ps(first, second);
    // into key order: key k from lane 4 (k mod 4) + k / 4
    let order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    _mm512_permutexvar_ps(order, sums)
}

/// `out[g · n + j] = dot_f32(qs[g], rows[j])` for every query and each of the `n` rows
/// (`out`: one row of `n` scores per query): one to four queries with `d` a multiple of 8
/// two rows at a time, anything else by the 256-bit kernel.
#[target_feature(enable = "avx512f,avx2,fma")]
pub fn dot_f32_rows_many(qs: &[f32], d: usize, rows: &[f32], out: &mut [f32]) {
    let Some((_, g)) = super::products::rows_many_shape(qs, d, rows, out) else {
        return;
    };
    match g {
        1 if d.is_multiple_of(8) => two_rows_at_a_time::<1>(qs, d, rows, out),
        2 if d.is_multiple_of(8) => two_rows_at_a_time::<2>(qs, d, rows, out),
        3 if d.is_multiple_of(8) => two_rows_at_a_time::<3>(qs, d, rows, out),
        4 if d.is_multiple_of(8) => two_rows_at_a_time::<4>(qs, d, rows, out),
        _ => super::avx2_many_f32::dot_f32_rows_many(qs, d, rows, out),
    }
}

/// [`dot_f32_rows_many`] for `G` queries and `d` a multiple of 8, two rows at a time; an
/// odd last row by the 256-bit kernel.
#[inline]
#[target_feature(enable = "avx512f,avx2,fma")]
fn two_rows_at_a_time<const G: usize>(qs: &[f32], d: usize, rows: &[f32], out: &mut [f32]) {
    let n = rows.len() / d;
    assert!(
        d.is_multiple_of(8) && qs.len() == G * d && rows.len() == n * d && out.len() == G * n,
        "dot_f32_rows_many: qs is (G, d), rows (n, d), out (G, n), d whole steps of eight"
    );
    // one pair of keys: each query's running sums, key `a` in lanes 0..8, `b` in 8..16
    let pair = |two: &[f32]| -> [__m512; G] {
        let (a, b) = two.split_at(d);
        let mut acc = [_mm512_setzero_ps(); G];
        for c in (0..d).step_by(8) {
            // SAFETY: 8 f32 at c + 8 ≤ d of each row and of each query.
            let k = unsafe { two_keys(a.as_ptr().add(c), b.as_ptr().add(c)) };
            for (g, acc) in acc.iter_mut().enumerate() {
                let q = unsafe { both_halves(qs.as_ptr().add(g * d + c)) };
                *acc = _mm512_add_ps(*acc, _mm512_mul_ps(q, k));
            }
        }
        acc
    };
    // sixteen keys at a time, their sums reduced together; the pairs left one at a time
    let sixteens = rows.chunks_exact(16 * d);
    let rest = sixteens.remainder();
    for (t, sixteen) in sixteens.enumerate() {
        let mut accs = [[_mm512_setzero_ps(); 8]; G];
        for (i, two) in sixteen.chunks_exact(2 * d).enumerate() {
            for (g, acc) in pair(two).into_iter().enumerate() {
                accs[g][i] = acc;
            }
        }
        for (g, accs) in accs.iter().enumerate() {
            let at = &mut out[g * n + 16 * t..g * n + 16 * t + 16];
            // SAFETY: 16 f32 in `at`.
            unsafe { _mm512_storeu_ps(at.as_mut_ptr(), reduce_sixteen(accs)) };
        }
    }
    let done = n - rest.len() / d;
    let pairs = rest.chunks_exact(2 * d);
    let last = pairs.remainder();
    for (p, two) in pairs.enumerate() {
        for (g, acc) in pair(two).into_iter().enumerate() {
            let (x, y) = reduce_two(acc);
            out[g * n + done + 2 * p] = x;
            out[g * n + done + 2 * p + 1] = y;
        }
    }
    if !last.is_empty() {
        for (g, q) in qs.chunks_exact(d).enumerate() {
            out[g * n + n - 1] = super::avx2_one_f32::dot_f32(q, last);
        }
    }
}

/// `ys[g] += w[g · n + j] · rows[j]` for `G` outputs of `16 · L` floats and the `n` rows of
/// as many in order: every output in registers across all the rows, each row read once for
/// all of them. Each element sees `y + w·x`, row after row, as the 256-bit `axpy_rows` of
/// one output computes it.
#[inline]
#[target_feature(enable = "avx512f")]
fn rows_in_registers<const G: usize, const L: usize>(ys: &mut [f32], w: &[f32], rows: &[f32]) {
    let d = 16 * L;
    let n = rows.len() / d;
    assert!(
        ys.len() == G * d && w.len() == G * n && rows.len() == n * d,
        "axpy_rows_many: ys is (G, d), w (G, n), rows (n, d)"
    );
    // output g, floats 16i..16i + 16
    // SAFETY (loads and stores): 16 f32 at 16i < d of output g.
    let mut acc: [[__m512; L]; G] = std::array::from_fn(|g| {
        std::array::from_fn(|i| unsafe { _mm512_loadu_ps(ys.as_ptr().add(g * d + 16 * i)) })
    });
    for (j, row) in rows.chunks_exact(d).enumerate() {
        // SAFETY: 16 f32 at 16i < d of a row of d.
        let v: [__m512; L] =
            std::array::from_fn(|i| unsafe { _mm512_loadu_ps(row.as_ptr().add(16 * i)) });
        for (g, acc) in acc.iter_mut().enumerate() {
            let s = _mm512_set1_ps(w[g * n + j]);
            for (a, v) in acc.iter_mut().zip(v) {
                *a = _mm512_add_ps(*a, _mm512_mul_ps(s, v));
            }
        }
    }
    for (g, acc) in acc.iter().enumerate() {
        for (i, a) in acc.iter().enumerate() {
            unsafe { _mm512_storeu_ps(ys.as_mut_ptr().add(g * d + 16 * i), *a) };
        }
    }
}

/// `rows_in_registers` for the shapes whose outputs fit in sixteen registers: one output of
/// 16 to 128 floats (a multiple of 16), or heads of 64 floats (SmolLM2's), two to four of
/// them, or of 128, two; `None` (nothing done) for any other.
#[target_feature(enable = "avx512f")]
pub fn axpy_rows_many(ys: &mut [f32], d: usize, w: &[f32], rows: &[f32]) -> Option<()> {
    if d == 0 || !rows.len().is_multiple_of(d) {
        return None;
    }
    match (ys.len() / d, d) {
        (1, 16) => rows_in_registers::<1, 1>(ys, w, rows),
        (1, 32) => rows_in_registers::<1, 2>(ys, w, rows),
        (1, 48) => rows_in_registers::<1, 3>(ys, w, rows),
        (1, 64) => rows_in_registers::<1, 4>(ys, w, rows),
        (1, 80) => rows_in_registers::<1, 5>(ys, w, rows),
        (1, 96) => rows_in_registers::<1, 6>(ys, w, rows),
        (1, 112) => rows_in_registers::<1, 7>(ys, w, rows),
        (2, 64) => rows_in_registers::<2, 4>(ys, w, rows),
        (3, 64) => rows_in_registers::<3, 4>(ys, w, rows),
        (4, 64) => rows_in_registers::<4, 4>(ys, w, rows),
        (1, 128) => rows_in_registers::<1, 8>(ys, w, rows),
        (2, 128) => rows_in_registers::<2, 8>(ys, w, rows),
        _ => return None,
    }
    Some(())
}

// ANCHOR: many_512
/// [`super::avx2_many_f32::dot_f32_many`] with two keys side by side in one register: the
/// keys of a list (a paged cache's need not lie in order), one to four queries of `d` a
/// multiple of 8, a pair of keys at a time, the pair after next asked for while this one is
/// read; an odd last key, and any other shape, by the 256-bit kernel. Each key's sum is the
/// 256-bit kernel's, lane for lane, reduced by `reduce_two` in its order.
#[target_feature(enable = "avx512f,avx2,fma")]
pub fn dot_f32_many(qs: &[&[f32]], rows: &[&[f32]], out: &mut [f32]) {
    let n = rows.len();
    assert_eq!(qs.len() * n, out.len(), "one output per query and row");
    let d = qs.first().map_or(0, |q| q.len());
    let whole = d > 0
        && d.is_multiple_of(8)
        && qs.iter().all(|q| q.len() == d)
        && rows.iter().all(|r| r.len() == d);
    match qs.len() {
        1 if whole => pairs_of_keys::<1>(qs, rows, out),
        2 if whole => pairs_of_keys::<2>(qs, rows, out),
        3 if whole => pairs_of_keys::<3>(qs, rows, out),
        4 if whole => pairs_of_keys::<4>(qs, rows, out),
        _ => super::avx2_many_f32::dot_f32_many(qs, rows, out),
    }
}

/// [`dot_f32_many`] for `G` queries, every query and row `d` floats, `d` a multiple of 8.
#[inline]
#[target_feature(enable = "avx512f,avx2,fma")]
fn pairs_of_keys<const G: usize>(qs: &[&[f32]], rows: &[&[f32]], out: &mut [f32]) {
    let (n, d) = (rows.len(), qs[0].len());
    let q: [&[f32]; G] = std::array::from_fn(|g| qs[g]);
    assert!(
        d.is_multiple_of(8) && q.iter().chain(rows).all(|r| r.len() == d),
        "dot_f32_many: every query and row d floats, d whole steps of eight"
    );
    let pairs = rows.chunks_exact(2);
    let last = pairs.remainder();
    for (p, two) in pairs.enumerate() {
        for after in rows.iter().skip(2 * p + 4).take(2) {
            super::x86_helpers::prefetch_lines(after.as_ptr().cast(), 4 * d);
        }
        let mut acc = [_mm512_setzero_ps(); G];
        for c in (0..d).step_by(8) {
            // SAFETY: 8 f32 at c + 8 ≤ d of both keys and of each query (checked).
            let k = unsafe { two_keys(two[0].as_ptr().add(c), two[1].as_ptr().add(c)) };
            for (acc, q) in acc.iter_mut().zip(q) {
                let qv = unsafe { both_halves(q.as_ptr().add(c)) };
                *acc = _mm512_add_ps(*acc, _mm512_mul_ps(qv, k));
            }
        }
        for (g, acc) in acc.into_iter().enumerate() {
            let (x, y) = reduce_two(acc);
            out[g * n + 2 * p] = x;
            out[g * n + 2 * p + 1] = y;
        }
    }
    if let [key] = last {
        for (g, q) in q.iter().enumerate() {
            out[g * n + n - 1] = super::avx2_one_f32::dot_f32(q, key);
        }
    }
}

/// [`super::avx2_many_f32::axpy_many`]'s tiles of rows in 512-bit registers: thirty-two
/// floats of each of one to four outputs at a time (`d` a multiple of 32), over the rows
/// sixteen at a time, the next tile asked for a few rows a pass; `None` (nothing done) for
/// any other shape. Each output element is still `y + w·x` row after row: the same bits.
#[target_feature(enable = "avx512f")]
pub fn axpy_many(ys: &mut [f32], w: &[f32], rows: &[&[f32]]) -> Option<()> {
    let n = rows.len();
    let d = rows.first().map(|r| r.len()).filter(|&d| d > 0)?;
    let g = ys.len() / d;
    if !(d.is_multiple_of(32) && ys.len() == g * d && w.len() == g * n)
        || rows.iter().any(|r| r.len() != d)
    {
        return None;
    }
    match g {
        1 => tiles_in_registers::<1>(ys, w, rows),
        2 => tiles_in_registers::<2>(ys, w, rows),
        3 => tiles_in_registers::<3>(ys, w, rows),
        4 => tiles_in_registers::<4>(ys, w, rows),
        _ => return None,
    }
    Some(())
}

/// [`axpy_many`] for `G` outputs of `d` floats, `d` a multiple of 32 (checked by the caller).
#[inline]
#[target_feature(enable = "avx512f")]
fn tiles_in_registers<const G: usize>(ys: &mut [f32], w: &[f32], rows: &[&[f32]]) {
    const TILE: usize = 16; // rows: sixteen of Gemma-3's values are 16 KiB
    let (n, d) = (rows.len(), rows[0].len());
    assert!(
        d.is_multiple_of(32) && ys.len() == G * d && w.len() == G * n,
        "axpy_many: ys is (G, d), w (G, n), d a multiple of 32"
    );
    let per_pass = TILE.div_ceil(d / 32); // rows of the next tile asked for in each pass
    for start in (0..n).step_by(TILE) {
        let tile = &rows[start..(start + TILE).min(n)];
        for (pass, c) in (0..d).step_by(32).enumerate() {
            let ahead = start + TILE + pass * per_pass;
            for r in rows.get(ahead..(ahead + per_pass).min(n)).unwrap_or(&[]) {
                super::x86_helpers::prefetch_lines(r.as_ptr().cast(), 4 * d);
            }
            // SAFETY (loads and stores): 32 f32 at c + 32 ≤ d of each output and row.
            let mut acc: [[__m512; 2]; G] = std::array::from_fn(|g| unsafe {
                let y = ys.as_ptr().add(g * d + c);
                [_mm512_loadu_ps(y), _mm512_loadu_ps(y.add(16))]
            });
            for (j, row) in (start..).zip(tile) {
                let v = unsafe {
                    let x = row.as_ptr().add(c);
                    [_mm512_loadu_ps(x), _mm512_loadu_ps(x.add(16))]
                };
                for (g, a) in acc.iter_mut().enumerate() {
                    let s = _mm512_set1_ps(w[g * n + j]);
                    a[0] = _mm512_add_ps(a[0], _mm512_mul_ps(s, v[0]));
                    a[1] = _mm512_add_ps(a[1], _mm512_mul_ps(s, v[1]));
                }
            }
            for (g, a) in acc.iter().enumerate() {
                unsafe {
                    let y = ys.as_mut_ptr().add(g * d + c);
                    _mm512_storeu_ps(y, a[0]);
                    _mm512_storeu_ps(y.add(16), a[1]);
                }
            }
        }
    }
}
// ANCHOR_END: many_512
