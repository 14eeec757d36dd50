//! Reference solutions for chapter 7's exercises.
#![allow(unused_variables)]
// The AVX2 functions have one safety condition: call them only when the CPU has AVX2 (the
// tests check `is_x86_feature_detected!` first).
#![allow(clippy::missing_safety_doc)]

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Exercise 1: chapter 6's eight-lane f32 sum in two four-lane halves.
pub fn dot_f32_two_halves(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "dot of slices with different lengths");
    let (a8, a_tail) = a.as_chunks::<8>();
    let (b8, b_tail) = b.as_chunks::<8>();
    let (mut lo, mut hi) = ([0.0f32; 4], [0.0f32; 4]);
    for (x, y) in a8.iter().zip(b8) {
        for l in 0..4 {
            lo[l] += x[l] * y[l];
            hi[l] += x[l + 4] * y[l + 4];
        }
    }
    let s: [f32; 4] = std::array::from_fn(|l| lo[l] + hi[l]);
    let sum = (s[0] + s[2]) + (s[1] + s[3]);
    a_tail
        .iter()
        .zip(b_tail)
        .fold(sum, |acc, (x, y)| acc + x * y)
}

/// The sum of the eight i32 lanes (exercise 2's last step).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn hsum_i32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
    _mm_cvtsi128_si32(s)
}

/// Exercise 2: the Q8_0 block dot in AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub fn dot_q8_0_block(w: &[i8; 32], a: &[i8; 32]) -> i32 {
    // SAFETY: both arrays are 32 readable bytes; loadu has no alignment requirement.
    let (wv, av) = unsafe {
        (
            _mm256_loadu_si256(w.as_ptr().cast()),
            _mm256_loadu_si256(a.as_ptr().cast()),
        )
    };
    let pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(wv, wv), _mm256_sign_epi8(av, wv));
    hsum_i32(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)))
}

/// Exercise 3: splitting rows across threads.
pub fn matvec_rows_parallel(out: &mut [f32], w: &[f32], x: &[f32], threads: usize) {
    let (rows, cols) = (out.len(), x.len());
    let band = rows.div_ceil(threads.max(1)).max(1);
    std::thread::scope(|s| {
        for (b, out_band) in out.chunks_mut(band).enumerate() {
            s.spawn(move || {
                for (i, o) in out_band.iter_mut().enumerate() {
                    let r = b * band + i;
                    *o = ch01_tensors::ops::dot(&w[r * cols..(r + 1) * cols], x);
                }
            });
        }
    });
}

/// Exercise 4: eight tokens' block, a token per lane.
pub fn interleave_eight(tokens: [&[i8; 32]; 8]) -> [[[i8; 4]; 8]; 8] {
    std::array::from_fn(|k| std::array::from_fn(|t| std::array::from_fn(|i| tokens[t][4 * k + i])))
}

/// Exercise 5: the eight-row float step.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
pub fn eight_rows_step(acc: __m256, sumi: __m256i, d: &[u16; 8], d_a: u16) -> __m256 {
    // SAFETY: `d` is 16 readable bytes; loadu has no alignment requirement.
    let dw = _mm256_cvtph_ps(unsafe { _mm_loadu_si128(d.as_ptr().cast()) });
    let da = _mm256_cvtph_ps(_mm_set1_epi16(d_a as i16));
    let term = _mm256_mul_ps(_mm256_cvtepi32_ps(sumi), _mm256_mul_ps(dw, da));
    _mm256_add_ps(acc, term)
}

/// Exercise 6: a packed group's block.
pub fn pack_q4_0_block(rows: [&[u8; 18]; 8]) -> [u8; 144] {
    let mut out = [0u8; 144];
    for (r, b) in rows.iter().enumerate() {
        out[2 * r..2 * r + 2].copy_from_slice(&b[..2]);
        for c in 0..4 {
            let at = 16 + 32 * c + 4 * r;
            out[at..at + 4].copy_from_slice(&b[2 + 4 * c..2 + 4 * c + 4]);
        }
    }
    out
}

/// Exercise 7: where the arena puts each copy.
pub fn arena_offsets(lens: &[usize], cap: usize) -> Vec<Option<usize>> {
    let mut next = 0usize;
    lens.iter()
        .map(|&len| {
            let end = next.checked_add(len).filter(|&e| e <= cap)?;
            let start = next;
            next = end.next_multiple_of(64).min(cap);
            Some(start)
        })
        .collect()
}
