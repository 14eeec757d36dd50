//! The eight-token Q8_0 kernel on AVX2 (the layout and the scalar twin are in
//! [`crate::octs_q8_0`]).

use std::arch::x86_64::*;

use super::avx2::f16;
use crate::octs::ActOcts;

// ANCHOR: avx2_q8_0_eights
/// One Q8_0 row, as it lies in the file, against eight tokens: each lane exactly
/// [`crate::octs_q8_0::dot8_q8_0`]'s. A step broadcasts four signed weights to every lane,
/// takes their magnitudes (`vpabsb`) as the unsigned operand and gives their signs to the
/// eight tokens' four activations (`vpsignb`), then `vpmaddubsw` and `vpmaddwd` add the four
/// products of each lane into 32 bits.
///
/// # Safety
/// None beyond the CPU's (AVX2 and F16C): the lengths are checked here.
#[target_feature(enable = "avx2,f16c")]
pub(super) unsafe fn dot8_q8_0(w: &[u8], a: &ActOcts) -> [f32; 8] {
    const BYTES: usize = 34;
    let n = a.qs.len();
    assert!(
        w.len() == n * BYTES && a.d.len() == n,
        "one activation block per weight block"
    );
    let ones = _mm256_set1_epi16(1);
    let mut acc = _mm256_setzero_ps(); // lane t: token t's sum so far
    for (b, block) in w.chunks_exact(BYTES).enumerate() {
        let (q, x) = (block[2..].as_ptr(), a.qs[b].as_ptr());
        let steps: [__m256i; 8] = std::array::from_fn(|s| {
            // SAFETY: quants 4s..4s + 4 of the block's 32 and the step's 32 activation bytes.
            let (wq, y) = unsafe {
                (
                    _mm256_set1_epi32(q.add(4 * s).cast::<i32>().read_unaligned()),
                    _mm256_loadu_si256(x.add(32 * s).cast()),
                )
            };
            let pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(wq), _mm256_sign_epi8(y, wq));
            _mm256_madd_epi16(pairs, ones)
        });
        let halves = [0, 2, 4, 6].map(|s| _mm256_add_epi32(steps[s], steps[s + 1]));
        let dots = _mm256_add_epi32(
            _mm256_add_epi32(halves[0], halves[1]),
            _mm256_add_epi32(halves[2], halves[3]),
        );
        // SAFETY: the 8 f32 scales of block b.
        let da = unsafe { _mm256_loadu_ps(a.d[b].as_ptr()) };
        let scale = _mm256_mul_ps(_mm256_set1_ps(f16(block, 0)), da); // d_w · d_a
        acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(dots), scale));
    }
    let mut out = [0.0f32; 8];
    // SAFETY: eight f32 into eight f32.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), acc) };
    out
}
// ANCHOR_END: avx2_q8_0_eights

// ANCHOR: avx2_q8_0_sixteen
/// [`dot8_q8_0`] against two eights of tokens at once (lanes 0..8 the first eight's, 8..16
/// the second's): each step's four weights are broadcast, and their magnitudes taken, once
/// for both eights. A block's integer sums are exact in any order, and its scaling is
/// `dot8_q8_0`'s, so every lane is the same bits as that kernel's.
///
/// # Safety
/// None beyond the CPU's (AVX2 and F16C): the lengths are checked here.
#[target_feature(enable = "avx2,f16c")]
pub(super) unsafe fn dot16_q8_0(w: &[u8], a: [&ActOcts; 2]) -> [f32; 16] {
    const BYTES: usize = 34;
    let n = a[0].qs.len();
    assert!(
        w.len() == n * BYTES && a.iter().all(|a| a.qs.len() == n && a.d.len() == n),
        "one activation block per weight block, in both eights"
    );
    let ones = _mm256_set1_epi16(1);
    let mut acc = [_mm256_setzero_ps(); 2]; // lane t of acc[e]: token 8e + t's sum so far
    for (b, block) in w.chunks_exact(BYTES).enumerate() {
        let q = block[2..].as_ptr();
        let mut dots = [_mm256_setzero_si256(); 2];
        for s in 0..8 {
            // SAFETY: quants 4s..4s + 4 of the block's 32.
            let wq = unsafe { _mm256_set1_epi32(q.add(4 * s).cast::<i32>().read_unaligned()) };
            let magnitudes = _mm256_abs_epi8(wq);
            for (dot, a) in dots.iter_mut().zip(a) {
                // SAFETY: the step's 32 activation bytes of this eight's block b.
                let y = unsafe { _mm256_loadu_si256(a.qs[b].as_ptr().add(32 * s).cast()) };
                let pairs = _mm256_maddubs_epi16(magnitudes, _mm256_sign_epi8(y, wq));
                *dot = _mm256_add_epi32(*dot, _mm256_madd_epi16(pairs, ones));
            }
        }
        let dw = _mm256_set1_ps(f16(block, 0));
        for ((acc, dot), a) in acc.iter_mut().zip(dots).zip(a) {
            // SAFETY: the 8 f32 scales of block b.
            let da = unsafe { _mm256_loadu_ps(a.d[b].as_ptr()) };
            let scale = _mm256_mul_ps(dw, da); // d_w · d_a
            *acc = _mm256_add_ps(*acc, _mm256_mul_ps(_mm256_cvtepi32_ps(dot), scale));
        }
    }
    let mut out = [0.0f32; 16];
    // SAFETY: two times eight f32 into sixteen.
    unsafe {
        _mm256_storeu_ps(out.as_mut_ptr(), acc[0]);
        _mm256_storeu_ps(out.as_mut_ptr().add(8), acc[1]);
    }
    out
}
// ANCHOR_END: avx2_q8_0_sixteen
