//! The packed eight-row kernels of the K-quants on AVX2 (groups of [`crate::layout::packed`]):
//! Q4_K's and Q6_K's super-blocks, eight rows a lane each, against one to four tokens. The
//! helpers they share with the 32-value formats' are in [`super::avx2_packed_helpers`].

use std::arch::x86_64::*;

use super::avx2_packed_helpers::{blocks, fetch_ahead, lanes};
use crate::layout::kquant::BlockQ8K;
use ch06_quantization::Format;

// ANCHOR: packed8_q4_k
/// Byte `i` of each 32-bit lane in both of the lane's i16 (zero-extended): a shuffle's
/// indices. With `pair`, bytes `i` and `i + 1` in its two i16; with `signed`, in their high
/// bytes, for [`high_bytes_signed`].
fn lane_bytes(i: i8, pair: bool, signed: bool) -> __m256i {
    let at = usize::from(signed); // the byte of each i16 that takes the lane's byte
    let idx: [i8; 32] = std::array::from_fn(|b| {
        let lane = (b % 16 / 4 * 4) as i8;
        match b % 4 {
            x if x == at => lane + i,
            x if x == 2 + at => lane + i + i8::from(pair),
            _ => -128, // a zero byte
        }
    });
    // SAFETY: 32 bytes from a 32-byte array.
    unsafe { _mm256_loadu_si256(idx.as_ptr().cast()) }
}

/// A group of eight Q4_K rows against `N` tokens' Q8_K blocks: `out[t][r]` is chapter 8's
/// Q4_K row product of row `r` and token `t`, bit for bit. A group's block holds the eight
/// `d`, the eight `dmin`, then 35 chunks: the rows' 12 bytes of 6-bit scales and mins as
/// three words per lane, then their 128 bytes of nibbles. The three words become four
/// vectors (scales 0–3, 4–7, mins 0–3, 4–7, a byte each) by [`scales_and_mins`]'s rule on
/// all eight lanes at once; a shuffle puts sub-block `s`'s scale in both i16 of each lane,
/// and `vpmaddwd` multiplies each row's 16-bit sums by its own scale.
///
/// # Safety
/// None beyond the CPU's (AVX2 and F16C): the lengths are checked here.
///
/// [`scales_and_mins`]: super::avx2_grid_k
#[target_feature(enable = "avx2,f16c")]
#[allow(clippy::needless_range_loop)] // `b` indexes every token's blocks
pub(super) unsafe fn packed8_q4_k<const N: usize>(w: &[u8], a: [&[BlockQ8K]; N]) -> [[f32; 8]; N] {
    let (bb, nb) = blocks(w, Format::Q4_K, a.iter().map(|a| a.len()));
    let (low, six, two) = (
        _mm256_set1_epi8(0x0f),
        _mm256_set1_epi8(0x3f),
        _mm256_set1_epi8(3),
    );
    let one: [__m256i; 4] = std::array::from_fn(|i| lane_bytes(i as i8, false, false));
    let pair: [__m256i; 2] = std::array::from_fn(|k| lane_bytes(2 * k as i8, true, false));
    let mut acc = [_mm256_setzero_ps(); N];
    for b in 0..nb {
        // SAFETY: block b lies inside `w` (length checked); a prefetch never faults; each
        // token's quants are 256 bytes and its sums 16 i16.
        unsafe {
            let base = w.as_ptr().add(b * bb);
            fetch_ahead(base, bb);
            // ANCHOR: packed_q4_k_scales
            let chunk = |c: usize| _mm256_loadu_si256(base.add(32 + 32 * c).cast());
            let (w0, w1, w2) = (chunk(0), chunk(1), chunk(2));
            let top2 = |w: __m256i| {
                _mm256_slli_epi32::<4>(_mm256_and_si256(_mm256_srli_epi32::<6>(w), two))
            };
            let scales = [
                _mm256_and_si256(w0, six),
                _mm256_or_si256(_mm256_and_si256(w2, low), top2(w0)),
            ];
            let mins = [
                _mm256_and_si256(w1, six),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32::<4>(w2), low), top2(w1)),
            ];
            // sub-block s's scale in both i16 of each row's lane, for vpmaddwd
            let sc = |s: usize| _mm256_shuffle_epi8(scales[s / 4], one[s % 4]);
            // ANCHOR_END: packed_q4_k_scales
            let mut sumq = [_mm256_setzero_si256(); N];
            let mut summ = [_mm256_setzero_si256(); N];
            for t in 0..N {
                // the activations' sums of each sub-block (pairs of the sums of 16), two a word
                let bs = _mm256_loadu_si256(a[t][b].bsums.as_ptr().cast());
                let h = _mm256_hadd_epi16(bs, bs);
                let p = _mm256_castsi256_si128(_mm256_permute4x64_epi64::<0b00_00_10_00>(h));
                let words: [i32; 4] = std::mem::transmute(p);
                for k in 0..4 {
                    let m = _mm256_shuffle_epi8(mins[k / 2], pair[k % 2]);
                    let term = _mm256_madd_epi16(m, _mm256_set1_epi32(words[k]));
                    summ[t] = _mm256_add_epi32(summ[t], term);
                }
            }
            for j in 0..4 {
                // sub-blocks 2j (low nibbles) and 2j + 1 (high), each row's in its lane
                let mut lo16 = [_mm256_setzero_si256(); N];
                let mut hi16 = [_mm256_setzero_si256(); N];
                for k in 0..8 {
                    let q = chunk(3 + 8 * j + k);
                    let lo = _mm256_and_si256(q, low);
                    let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q), low);
                    for t in 0..N {
                        let qa = a[t][b].qs.as_ptr().cast::<i32>();
                        let (alo, ahi) = (
                            qa.add(16 * j + k).read_unaligned(),
                            qa.add(16 * j + 8 + k).read_unaligned(),
                        );
                        let l = _mm256_maddubs_epi16(lo, _mm256_set1_epi32(alo));
                        let h = _mm256_maddubs_epi16(hi, _mm256_set1_epi32(ahi));
                        lo16[t] = _mm256_add_epi16(lo16[t], l);
                        hi16[t] = _mm256_add_epi16(hi16[t], h);
                    }
                }
                let (s0, s1) = (sc(2 * j), sc(2 * j + 1));
                for t in 0..N {
                    let both = _mm256_add_epi32(
                        _mm256_madd_epi16(lo16[t], s0),
                        _mm256_madd_epi16(hi16[t], s1),
                    );
                    sumq[t] = _mm256_add_epi32(sumq[t], both);
                }
            }
            let d = _mm256_cvtph_ps(_mm_loadu_si128(base.cast()));
            let dmin = _mm256_cvtph_ps(_mm_loadu_si128(base.add(16).cast()));
            for t in 0..N {
                let ad = _mm256_set1_ps(a[t][b].d);
                let q = _mm256_mul_ps(_mm256_mul_ps(d, ad), _mm256_cvtepi32_ps(sumq[t]));
                let m = _mm256_mul_ps(_mm256_mul_ps(dmin, ad), _mm256_cvtepi32_ps(summ[t]));
                acc[t] = _mm256_add_ps(acc[t], _mm256_sub_ps(q, m));
            }
        }
    }
    // SAFETY: this function's own target features.
    acc.map(|v| unsafe { lanes(v) })
}
// ANCHOR_END: packed8_q4_k

/// Sign-extends each i16's high byte: the lanes of a shuffle by [`lane_bytes`]`(.., signed)`.
#[inline]
#[target_feature(enable = "avx2")]
fn high_bytes_signed(v: __m256i) -> __m256i {
    _mm256_srai_epi16::<8>(v)
}

// ANCHOR: packed8_q6_k
/// A group of eight Q6_K rows against `N` tokens' Q8_K blocks: `out[t][r]` is chapter 8's
/// Q6_K row product of row `r` and token `t`, bit for bit. A group's block holds the eight
/// `d`, then 52 chunks of four bytes a row: 32 of `ql`, 16 of `qh`, 4 of the 16 signed
/// scales. Chunk `k` of a half's `ql` and chunk `k` of its `qh` make four runs of quants
/// 0..63 ([`super::avx2_grid_k::q6_k_runs`]), two chunks' pairs add in 16 bits
/// (at most 2 · 2 · 63 · 128), and each group of 16 meets its row's scale in `vpmaddwd`;
/// the offset of 32 comes off at the end as `32 · Σ scale · (the group's Σ a)`.
///
/// # Safety
/// None beyond the CPU's (AVX2 and F16C): the lengths are checked here.
#[target_feature(enable = "avx2,f16c")]
#[allow(clippy::needless_range_loop)] // `b` indexes every token's blocks
pub(super) unsafe fn packed8_q6_k<const N: usize>(w: &[u8], a: [&[BlockQ8K]; N]) -> [[f32; 8]; N] {
    let (bb, nb) = blocks(w, Format::Q6_K, a.iter().map(|a| a.len()));
    let one: [__m256i; 4] = std::array::from_fn(|i| lane_bytes(i as i8, false, true));
    let pair: [__m256i; 2] = std::array::from_fn(|k| lane_bytes(2 * k as i8, true, true));
    let mut acc = [_mm256_setzero_ps(); N];
    for b in 0..nb {
        // SAFETY: as in packed8_q4_k.
        unsafe {
            let base = w.as_ptr().add(b * bb);
            fetch_ahead(base, bb);
            let chunk = |c: usize| _mm256_loadu_si256(base.add(16 + 32 * c).cast());
            let sc: [__m256i; 4] = std::array::from_fn(chunk); // groups 4i..4i + 4
            let mut sum = [_mm256_setzero_si256(); N];
            for t in 0..N {
                // Σ_g scale_g · (Σ a over group g), two groups a vpmaddwd
                let bs = a[t][b].bsums.as_ptr().cast::<i32>();
                let mut off = _mm256_setzero_si256();
                for m in 0..8 {
                    let s = high_bytes_signed(_mm256_shuffle_epi8(sc[m / 2], pair[m % 2]));
                    let pair = _mm256_set1_epi32(bs.add(m).read_unaligned());
                    off = _mm256_add_epi32(off, _mm256_madd_epi16(s, pair));
                }
                sum[t] = _mm256_sub_epi32(sum[t], _mm256_slli_epi32::<5>(off));
            }
            for h in 0..2 {
                let mut s16 = [[_mm256_setzero_si256(); 4]; N]; // a run's pairs, per token
                for k in 0..8 {
                    // ql bytes 64h + 4k.., 64h + 32 + 4k.., qh bytes 32h + 4k..
                    let at = 4 + 24 * h + 3 * k;
                    let (qa, qb, qh) = (chunk(at), chunk(at + 1), chunk(at + 2));
                    let runs = super::avx2_grid_k::q6_k_runs(qa, qb, qh);
                    for t in 0..N {
                        let qs = a[t][b].qs.as_ptr().cast::<i32>();
                        for (run, q) in runs.iter().enumerate() {
                            // the token's quants 128h + 32 run + 4k ..
                            let at = 32 * h + 8 * run + k;
                            let p = _mm256_maddubs_epi16(
                                *q,
                                _mm256_set1_epi32(qs.add(at).read_unaligned()),
                            );
                            s16[t][run] = _mm256_add_epi16(s16[t][run], p);
                        }
                    }
                    if k % 2 == 1 {
                        // chunks k − 1 and k: group 8h + 2 run + k / 4 of each run
                        for run in 0..4 {
                            let g = 8 * h + 2 * run + k / 4;
                            let s = high_bytes_signed(_mm256_shuffle_epi8(sc[g / 4], one[g % 4]));
                            for t in 0..N {
                                let p = _mm256_madd_epi16(s16[t][run], s);
                                sum[t] = _mm256_add_epi32(sum[t], p);
                                s16[t][run] = _mm256_setzero_si256();
                            }
                        }
                    }
                }
            }
            let d = _mm256_cvtph_ps(_mm_loadu_si128(base.cast()));
            for t in 0..N {
                let dd = _mm256_mul_ps(d, _mm256_set1_ps(a[t][b].d));
                acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(dd, _mm256_cvtepi32_ps(sum[t])));
            }
        }
    }
    // SAFETY: this function's own target features.
    acc.map(|v| unsafe { lanes(v) })
}
// ANCHOR_END: packed8_q6_k
