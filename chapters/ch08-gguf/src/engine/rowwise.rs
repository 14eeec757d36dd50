//! The work of a step done row by row (the norms) or value by value (Gemma's GELU), for the
//! many rows of a prefill or a batch: on the threads, and the GELU eight values at a time.
//! Each row is still computed on its own, and each value by the same rounding, so the
//! numbers are the ones of one row (or one value) at a time.

use ch01_tensors::ops;
use rayon::prelude::*;

use super::family::gelu_f16;
#[cfg(target_arch = "x86_64")]
use super::family::gelu_table;

/// Rows from which a row-wise step is split across the threads: below it (a decode step, a
/// few sequences) the fork and join would cost more than the rows.
pub(super) const PAR_ROWS: usize = 32;

/// Chapter 4's `rmsnorm_rows`, the rows split across the threads when there are many (a
/// prefill of many sequences), so that no thread waits while one normalizes them all.
pub fn rmsnorm_rows(x: &[f32], weight: &[f32], eps: f32) -> Vec<f32> {
    let mut out = Vec::new();
    rmsnorm_rows_into(&mut out, x, weight, eps);
    out
}

/// [`rmsnorm_rows`] into `out`, which is resized to `x`'s length: a buffer kept from one
/// layer to the next.
pub fn rmsnorm_rows_into(out: &mut Vec<f32>, x: &[f32], weight: &[f32], eps: f32) {
    let dim = weight.len();
    let out = sized(out, x.len()); // (rows, dim)
    if x.len() < PAR_ROWS * dim {
        for (o, row) in out.chunks_exact_mut(dim).zip(x.chunks_exact(dim)) {
            ops::rmsnorm(o, row, weight, eps);
        }
        return;
    }
    out.par_chunks_mut(dim)
        .zip(x.par_chunks(dim))
        .with_min_len(8)
        .for_each(|(o, row)| ops::rmsnorm(o, row, weight, eps));
}

/// `x += y`, value by value, the rows (`dim` values each) split across the threads when there
/// are many: a prefill's residual adds, which one thread would make the others wait for.
pub fn add_rows(x: &mut [f32], y: &[f32], dim: usize) {
    assert_eq!(x.len(), y.len(), "add_rows: x and y differ in length");
    if x.len() < PAR_ROWS * dim {
        ops::add_inplace(x, y);
        return;
    }
    x.par_chunks_mut(dim)
        .zip(y.par_chunks(dim))
        .with_min_len(8)
        .for_each(|(x, y)| ops::add_inplace(x, y));
}

/// `buf` as `len` floats, its allocation kept: what it held is left for the caller to
/// overwrite, and only floats past its old length are zeroed.
pub fn sized(buf: &mut Vec<f32>, len: usize) -> &mut [f32] {
    buf.resize(len, 0.0);
    &mut buf[..]
}

/// [`gelu_f16`] of every value of `g`, in place: with F16C, eight at a time
/// (`gelu_eights`), and what that leaves one by one.
pub fn gelu_f16_inplace(g: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    let g = gelu_eights(g);
    g.iter_mut().for_each(|v| *v = gelu_f16(*v));
}

/// Where the AVX2 level is supported, the whole eights of `g`: each rounded to f16 by one
/// `vcvtps2ph` (to nearest, ties to even: `f32_to_f16`'s rounding) and looked up in the table,
/// or, holding a value beyond ±10 (or a NaN), one value at a time. Returns what is not yet
/// done: the last one to seven values, or all of `g` without F16C.
#[cfg(target_arch = "x86_64")]
fn gelu_eights(g: &mut [f32]) -> &mut [f32] {
    if !ch07_simd_parallel::Isa::Avx2.supported() {
        return g;
    }
    let (eights, tail) = g.split_at_mut(g.len() / 8 * 8);
    let table = gelu_table();
    for v in eights.chunks_exact_mut(8) {
        let v: &mut [f32; 8] = v.try_into().expect("eight values");
        // SAFETY: the AVX2 level is supported (above), so the CPU has AVX and F16C.
        match unsafe { f16_bits_inside_ten(v) } {
            Some(bits) => v
                .iter_mut()
                .zip(bits)
                .for_each(|(v, b)| *v = table[usize::from(b)]),
            None => v.iter_mut().for_each(|v| *v = gelu_f16(*v)),
        }
    }
    tail
}

/// The eight values rounded to f16 bits, if every one is strictly inside (−10, 10).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx,f16c")]
fn f16_bits_inside_ten(v: &[f32; 8]) -> Option<[u16; 8]> {
    use std::arch::x86_64::*;
    // SAFETY: eight f32 in, eight u16 out.
    let x = unsafe { _mm256_loadu_ps(v.as_ptr()) };
    let abs = _mm256_andnot_ps(_mm256_set1_ps(-0.0), x);
    // ordered compare: false for a NaN
    let inside = _mm256_cmp_ps::<_CMP_LT_OQ>(abs, _mm256_set1_ps(10.0));
    if _mm256_movemask_ps(inside) != 0xff {
        return None;
    }
    let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x);
    let mut out = [0u16; 8];
    // SAFETY: eight u16 into eight u16.
    unsafe { _mm_storeu_si128(out.as_mut_ptr().cast(), h) };
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gelu_of_a_slice_is_the_gelu_of_each_value() {
        // every 97th f32 bit pattern from 0 to +inf and its negative (a NaN, infinities,
        // subnormals, ±10 and its neighbours among them), in groups of eight
        let mut values: Vec<f32> = (0..0x7f80_0001u32)
            .step_by(97)
            .map(f32::from_bits)
            .flat_map(|x| [x, -x])
            .collect();
        values.extend([10.0, -10.0, 9.999_999, -9.999_999, f32::NAN, 65_520.0, 1e-8]);
        let mut got = values.clone();
        gelu_f16_inplace(&mut got);
        for (x, g) in values.iter().zip(&got) {
            let want = gelu_f16(*x);
            assert!(
                g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()),
                "gelu_f16_inplace({x:e}) = {g:e}, value by value {want:e}"
            );
        }
    }

    #[test]
    fn norms_of_many_rows_are_chapter_4s() {
        let (dim, rows) = (64, 100);
        let x: Vec<f32> = (0..dim * rows)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.1)
            .collect();
        let w: Vec<f32> = (0..dim).map(|i| 1.0 + i as f32 * 0.01).collect();
        let want = ch04_forward::layer::rmsnorm_rows(&x, &w, 1e-6);
        assert_eq!(
            rmsnorm_rows(&x, &w, 1e-6),
            want,
            "the norms on the threads differ"
        );
    }
}
