//! The eight-token Q8_0 kernel of [`super::avx2_eights_q8_0`] on AVX-512 with VNNI, sixteen tokens
//! (two eights) at a time: each 512-bit register holds both eights' activations, so one
//! broadcast weight step meets sixteen tokens, and `vpdpbusd` multiplies and sums four byte
//! pairs of each lane into its 32-bit total in one instruction. AVX-512 has no `vpsignb`,
//! so the weights' signs move onto the activations with a masked subtraction from zero
//! (the mask is the weights' sign bits). The integer sums are exact either way, and the
//! float step is `avx2_eights_q8_0::dot8_q8_0`'s, lane for lane: the same bits.

use std::arch::x86_64::*;

use super::x86_helpers::f16;
use crate::layout::eights::Eights;

// ANCHOR: avx512_q8_0_sixteen
/// One Q8_0 row, as it lies in the file, against two eights of tokens: lanes 0..8 are
/// [`crate::layout::eights_q8_0::dot8_q8_0`]`(w, a[0])`, lanes 8..16 the same for `a[1]`.
///
/// # Safety
/// None beyond the CPU's (AVX-512 F/BW/VL, VNNI, and F16C): the lengths are checked here.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,f16c")]
pub(super) unsafe fn dot16_q8_0(w: &[u8], a: [&Eights; 2]) -> [f32; 16] {
    const BYTES: usize = 34;
    let n = a[0].qs.len();
    assert!(
        w.len() == n * BYTES && a.iter().all(|a| a.qs.len() == n && a.d.len() == n),
        "one activation block per weight block"
    );
    let zero = _mm512_setzero_si512();
    let mut acc = _mm512_setzero_ps(); // lane t: token t's sum so far
    for (b, block) in w.chunks_exact(BYTES).enumerate() {
        let (q, x0, x1) = (
            block[2..].as_ptr(),
            a[0].qs[b].as_ptr(),
            a[1].qs[b].as_ptr(),
        );
        // two chains of four steps, so that each waits on half as many `vpdpbusd`s
        let mut dots = [zero; 2];
        for s in 0..8 {
            // SAFETY: quants 4s..4s + 4 of the block's 32, and each eight's 32 bytes of step s.
            let (wq, y) = unsafe {
                let lo = _mm256_loadu_si256(x0.add(32 * s).cast());
                let hi = _mm256_loadu_si256(x1.add(32 * s).cast());
                (
                    _mm512_set1_epi32(q.add(4 * s).cast::<i32>().read_unaligned()),
                    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi),
                )
            };
            let signed = _mm512_mask_sub_epi8(y, _mm512_movepi8_mask(wq), zero, y);
            dots[s % 2] = _mm512_dpbusd_epi32(dots[s % 2], _mm512_abs_epi8(wq), signed);
        }
        let dots = _mm512_add_epi32(dots[0], dots[1]);
        // SAFETY: the 8 f32 scales of block b of each eight.
        let da = unsafe {
            let lo = _mm256_loadu_ps(a[0].d[b].as_ptr());
            let hi = _mm256_loadu_ps(a[1].d[b].as_ptr());
            _mm512_castpd_ps(_mm512_insertf64x4::<1>(
                _mm512_castps_pd(_mm512_castps256_ps512(lo)),
                _mm256_castps_pd(hi),
            ))
        };
        let scale = _mm512_mul_ps(_mm512_set1_ps(f16(block, 0)), da); // d_w · d_a
        acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_cvtepi32_ps(dots), scale));
    }
    let mut out = [0.0f32; 16];
    // SAFETY: sixteen f32 into sixteen f32.
    unsafe { _mm512_storeu_ps(out.as_mut_ptr(), acc) };
    out
}
// ANCHOR_END: avx512_q8_0_sixteen
