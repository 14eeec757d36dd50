//! The eight-token Q8_0 kernel on AVX2 (the layout and the scalar twin are in
//! [`crate::layout::eights_q8_0`]).

use std::arch::x86_64::*;

use super::x86_helpers::splat_f16;
use crate::layout::eights::Eights;

// ANCHOR: avx2_q8_0_eights
/// One Q8_0 row, as it lies in the file, against eight tokens: each lane exactly
/// [`crate::layout::eights_q8_0::dot8_q8_0`]'s. A step broadcasts four signed weights to every lane,
/// takes their magnitudes (`vpabsb`) as the unsigned operand and gives their signs to the
/// eight tokens' four activations (`vpsignb`), then `vpmaddubsw` and `vpmaddwd` add the four
/// products of each lane into 32 bits.
///
/// # Safety
/// None beyond the CPU's (AVX2 and F16C): the lengths are checked here.
#[target_feature(enable = "avx2,f16c")]
pub(super) unsafe fn dot8_q8_0(w: &[u8], a: &Eights) -> [f32; 8] {
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
        let scale = _mm256_mul_ps(splat_f16(block, 0), da); // d_w · d_a
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
pub(super) unsafe fn dot16_q8_0(w: &[u8], a: [&Eights; 2]) -> [f32; 16] {
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
        let dw = splat_f16(block, 0);
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

// ANCHOR: avx2_q8_0_half
/// Two Q8_0 rows against the first four tokens of an eight (a batch of four, or four past
/// a whole eight): lanes 0..4 row 0's, lanes 4..8 row 1's, where [`dot8_q8_0`] would spend a
/// whole register on one row and leave half of it to padding. Each half of a register holds
/// one row's quants, so one `vpshufd` gives every lane of a half its row's four weights of a
/// step; the four tokens' activations fill both halves. Each lane's arithmetic is
/// `dot8_q8_0`'s, so its bits are too.
///
/// # Safety
/// None beyond the CPU's (AVX2 and F16C): the lengths are checked here.
#[target_feature(enable = "avx2,f16c")]
pub(super) unsafe fn dot2x4_q8_0(w: [&[u8]; 2], a: &Eights) -> [f32; 8] {
    const BYTES: usize = 34;
    let n = a.qs.len();
    assert!(
        w.iter().all(|w| w.len() == n * BYTES) && a.d.len() == n,
        "one activation block per weight block, in both rows"
    );
    let ones = _mm256_set1_epi16(1);
    let mut acc = _mm256_setzero_ps(); // lanes 0..4: row 0's tokens 0..4; 4..8: row 1's
    for b in 0..n {
        let (r0, r1) = (&w[0][b * BYTES..][..BYTES], &w[1][b * BYTES..][..BYTES]);
        let x = a.qs[b].as_ptr();
        // SAFETY: each row's 32 quants.
        let (q0, q1) = unsafe {
            (
                _mm256_loadu_si256(r0[2..].as_ptr().cast()),
                _mm256_loadu_si256(r1[2..].as_ptr().cast()),
            )
        };
        // quants 0..16 of row 0 | of row 1, then quants 16..32 the same way
        let halves = [
            _mm256_permute2x128_si256::<0x20>(q0, q1),
            _mm256_permute2x128_si256::<0x31>(q0, q1),
        ];
        let mut dots = _mm256_setzero_si256();
        let mut step = |s: usize, wq: __m256i| {
            // SAFETY: the first 16 of step s's 32 activation bytes: tokens 0..4.
            let y = unsafe { _mm256_broadcastsi128_si256(_mm_loadu_si128(x.add(32 * s).cast())) };
            let pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(wq), _mm256_sign_epi8(y, wq));
            dots = _mm256_add_epi32(dots, _mm256_madd_epi16(pairs, ones));
        };
        for (h, q) in halves.into_iter().enumerate() {
            step(4 * h, _mm256_shuffle_epi32::<0x00>(q)); // each half's word 0, in all its lanes
            step(4 * h + 1, _mm256_shuffle_epi32::<0x55>(q));
            step(4 * h + 2, _mm256_shuffle_epi32::<0xaa>(q));
            step(4 * h + 3, _mm256_shuffle_epi32::<0xff>(q));
        }
        let [d0, d1] = [r0, r1].map(|r| i16::from_le_bytes([r[0], r[1]]));
        // each row's half in its four lanes, every lane set (see splat_f16)
        let dw = _mm256_cvtph_ps(_mm_unpacklo_epi64(_mm_set1_epi16(d0), _mm_set1_epi16(d1)));
        // SAFETY: the first four of block b's eight f32 scales.
        let d4 = unsafe { _mm_loadu_ps(a.d[b].as_ptr()) };
        let scale = _mm256_mul_ps(dw, _mm256_set_m128(d4, d4)); // d_w · d_a
        acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(dots), scale));
    }
    let mut out = [0.0f32; 8];
    // SAFETY: eight f32 into eight f32.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), acc) };
    out
}
// ANCHOR_END: avx2_q8_0_half
