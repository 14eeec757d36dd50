//! The eight-token prefill kernels on NEON (layouts in [`crate::layout::eights`] and
//! [`crate::layout::eights_k`]): one unpacked Q4_0, Q5_0, Q4_1, Q4_K or Q6_K row, or a Q8_0
//! row as it lies in the file, against eight tokens, a token per 32-bit lane: tokens 0..4 in
//! one register, 4..8 in another (AVX2 holds all eight in one).
//!
//! A step is the weight's four quants `4s..4s + 4` copied to every lane (`dup` of one 32-bit
//! word) against the eight tokens' four activations (32 bytes, two registers): with the dot
//! product, one `sdot` per register; on plain NEON, `smull` and two pairwise adds
//! ([`dot16_by_lane`]). Every weight here is small enough to be read as a signed byte
//! (4-bit 0..16, Q5_0's 0..32, Q6_K's 0..64; Q8_0's are signed already), so no sign trick.
//! After a (sub-)block's steps each lane holds its token's exact integer, and the block's
//! term, in the scalar twin's float operations, is added to its token's sum in block order.

#![cfg(target_arch = "aarch64")]
#![allow(clippy::missing_safety_doc)]

use std::arch::aarch64::*;

use ch06_quantization::blocks::BlockQ8_0;
use ch06_quantization::f16::f16_to_f32_fast as f16;
use ch06_quantization::matrix::Q32;

use super::arm_helpers::dot16_by_lane;
use super::arm_helpers::levels;
use crate::layout::eights::{Block32, Eights};
use crate::layout::eights_k::{EightsK, RowsK};

/// Eight tokens' lanes as two registers (tokens 0..4, 4..8).
type Lanes<T> = [T; 2];

/// Eight f32 of `v` as two registers.
#[inline]
#[target_feature(enable = "neon")]
fn f32x8(v: &[f32; 8]) -> Lanes<float32x4_t> {
    // SAFETY: 8 readable f32.
    unsafe { [vld1q_f32(v.as_ptr()), vld1q_f32(v.as_ptr().add(4))] }
}

/// Eight i32 of `v` as two registers.
#[inline]
#[target_feature(enable = "neon")]
fn i32x8(v: &[i32; 8]) -> Lanes<int32x4_t> {
    // SAFETY: 8 readable i32.
    unsafe { [vld1q_s32(v.as_ptr()), vld1q_s32(v.as_ptr().add(4))] }
}

/// Two registers of lanes out as eight f32.
#[inline]
#[target_feature(enable = "neon")]
fn store8(v: Lanes<float32x4_t>) -> [f32; 8] {
    let mut out = [0.0f32; 8];
    // SAFETY: 8 writable f32.
    unsafe {
        vst1q_f32(out.as_mut_ptr(), v[0]);
        vst1q_f32(out.as_mut_ptr().add(4), v[1]);
    }
    out
}

// ANCHOR: neon_steps
/// `acc + Σ_s w[4s..4s + 4] · (token t's a[32s + 4t..32s + 4t + 4])` for `steps` steps: the
/// weight's four bytes of a step in every lane, the eight tokens' in two registers.
///
/// # Safety
/// `w` readable for `4 · steps` bytes, `a` for `32 · steps`; the CPU has NEON, and with
/// `DOTPROD` the dot product.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn steps<const DOTPROD: bool>(
    mut acc: Lanes<int32x4_t>,
    w: *const u8,
    a: *const i8,
    steps: usize,
) -> Lanes<int32x4_t> {
    for s in 0..steps {
        // SAFETY: the caller's promise: 4 bytes at w + 4s, 32 at a + 32s.
        unsafe {
            let q = vreinterpretq_s8_u32(vdupq_n_u32(w.add(4 * s).cast::<u32>().read_unaligned()));
            acc[0] = dot16_by_lane::<DOTPROD>(acc[0], q, vld1q_s8(a.add(32 * s)));
            acc[1] = dot16_by_lane::<DOTPROD>(acc[1], q, vld1q_s8(a.add(32 * s + 16)));
        }
    }
    acc
}
// ANCHOR_END: neon_steps

/// One Q4_0, Q5_0 or Q4_1 block unpacked as [`crate::layout::eights::unpack_block`] does:
/// the nibbles by a mask and a shift, Q5_0's fifth bits tested one per byte (`cmtst`).
#[target_feature(enable = "neon")]
pub fn unpack_block(format: Q32, b: &[u8]) -> Block32 {
    let at = match format {
        Q32::Q4_0 => 2,
        Q32::Q4_1 => 4,
        Q32::Q5_0 => 6,
    };
    let nib = b[at..at + 16].as_ptr();
    // SAFETY: 16 readable bytes (the slice checked the bounds).
    let nib = unsafe { vld1q_u8(nib) };
    let mut q = [vandq_u8(nib, vdupq_n_u8(0x0f)), vshrq_n_u8::<4>(nib)];
    if format == Q32::Q5_0 {
        // SAFETY: 16 bytes.
        let bit = unsafe {
            vld1q_u8([1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128].as_ptr())
        };
        for (h, q) in q.iter_mut().enumerate() {
            let spread = vcombine_u8(vdup_n_u8(b[2 + 2 * h]), vdup_n_u8(b[3 + 2 * h]));
            *q = vorrq_u8(*q, vandq_u8(vtstq_u8(spread, bit), vdupq_n_u8(16)));
        }
    }
    let mut out = [0u8; 32];
    // SAFETY: 32 writable bytes.
    unsafe {
        vst1q_u8(out.as_mut_ptr(), q[0]);
        vst1q_u8(out.as_mut_ptr().add(16), q[1]);
    }
    let half = |i: usize| f16(u16::from_le_bytes([b[i], b[i + 1]]));
    let m = if format.has_min() { half(2) } else { 0.0 };
    Block32 {
        q: out,
        d: half(0),
        m,
    }
}

/// The body of [`dot8_row32`] and [`dot8_raw32`]: `n` blocks, block `b` unpacked by
/// `block(b)`; each lane exactly [`crate::layout::eights::dot8_row32`]'s.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn dot8_blocks<const DOTPROD: bool>(
    q4_1: bool,
    n: usize,
    block: impl Fn(usize) -> Block32,
    a: &Eights,
) -> [f32; 8] {
    assert!(
        a.qs.len() == n && a.d.len() == n && a.offset.len() == n && a.s.len() == n,
        "one activation block per weight block"
    );
    let mut acc = [vdupq_n_f32(0.0); 2]; // lane t: token t's sum so far
    for b in 0..n {
        let Block32 { q, d, m } = block(b);
        // SAFETY: 32 weight bytes, 256 activation bytes; NEON and DOTPROD's promise passed on.
        let dots =
            unsafe { steps::<DOTPROD>([vdupq_n_s32(0); 2], q.as_ptr(), a.qs[b].as_ptr(), 8) };
        let (da, off, s) = (f32x8(&a.d[b]), i32x8(&a.offset[b]), f32x8(&a.s[b]));
        for h in 0..2 {
            let dd = vmulq_n_f32(da[h], d); // d · d_a, as the scalar `d * a.d`
            let p = if q4_1 {
                vaddq_f32(vmulq_f32(dd, vcvtq_f32_s32(dots[h])), vmulq_n_f32(s[h], m))
            } else {
                vmulq_f32(dd, vcvtq_f32_s32(vsubq_s32(dots[h], off[h])))
            };
            acc[h] = vaddq_f32(acc[h], p);
        }
    }
    store8(acc)
}

/// One unpacked row against eight tokens ([`crate::layout::eights::dot8_row32`]).
#[inline]
#[target_feature(enable = "neon")]
unsafe fn row32<const DOTPROD: bool>(format: Q32, row: &[Block32], a: &Eights) -> [f32; 8] {
    // SAFETY: the caller's promise.
    unsafe { dot8_blocks::<DOTPROD>(format.has_min(), row.len(), |b| row[b], a) }
}

/// One row as it lies in the file against eight tokens, each block unpacked as it is met.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn raw32<const DOTPROD: bool>(format: Q32, w: &[u8], a: &Eights) -> [f32; 8] {
    let bytes = format.format().block_bytes();
    assert_eq!(
        w.len(),
        a.qs.len() * bytes,
        "one activation block per weight block"
    );
    let unpack = |b: usize| unpack_block(format, &w[b * bytes..][..bytes]);
    // SAFETY: the caller's promise.
    unsafe { dot8_blocks::<DOTPROD>(format.has_min(), a.qs.len(), unpack, a) }
}

/// One Q8_0 row (34-byte blocks as in the file: `d`, 32 signed quants) against eight
/// tokens: [`crate::layout::eights_q8_0::dot8_q8_0`]'s `dot · (d_w · d_a)` per token.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn q8_0<const DOTPROD: bool>(w: &[u8], a: &Eights) -> [f32; 8] {
    assert_eq!(
        w.len(),
        a.qs.len() * BlockQ8_0::BYTES,
        "one activation block per weight block"
    );
    let mut acc = [vdupq_n_f32(0.0); 2];
    for (b, wb) in w.chunks_exact(BlockQ8_0::BYTES).enumerate() {
        let d = f16(u16::from_le_bytes([wb[0], wb[1]]));
        // SAFETY: 32 quants at wb[2..34], 256 activation bytes; the caller's promise.
        let dots =
            unsafe { steps::<DOTPROD>([vdupq_n_s32(0); 2], wb[2..].as_ptr(), a.qs[b].as_ptr(), 8) };
        let da = f32x8(&a.d[b]);
        for h in 0..2 {
            let p = vmulq_f32(vcvtq_f32_s32(dots[h]), vmulq_n_f32(da[h], d));
            acc[h] = vaddq_f32(acc[h], p);
        }
    }
    store8(acc)
}

/// Row `i` of unpacked Q4_K rows against eight tokens
/// ([`crate::layout::eights_k::dot8_q4_k`]): per sub-block of 32, eight steps, its lanes
/// times its scale (exact in i32); the mins against the tokens' sub-block sums.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn q4_k<const DOTPROD: bool>(rows: &RowsK, i: usize, a: &EightsK) -> [f32; 8] {
    let row = rows.row(i);
    assert_eq!(
        row.len(),
        a.qs.len(),
        "one activation block per weight block"
    );
    let mut acc = [vdupq_n_f32(0.0); 2];
    for (b, blk) in row.iter().enumerate() {
        let (mut sum_q, mut sum_m) = ([vdupq_n_s32(0); 2], [vdupq_n_s32(0); 2]);
        for s in 0..8 {
            let (w, x) = (blk.q[32 * s..].as_ptr(), a.qs[b][256 * s..].as_ptr());
            // SAFETY: 32 quants of sub-block s, its 8 steps of 32 bytes; the caller's promise.
            let dot = unsafe { steps::<DOTPROD>([vdupq_n_s32(0); 2], w, x, 8) };
            let sums = i32x8(&a.sums[b][s]);
            for h in 0..2 {
                sum_q[h] = vmlaq_n_s32(sum_q[h], dot[h], i32::from(blk.sm[s]));
                sum_m[h] = vmlaq_n_s32(sum_m[h], sums[h], i32::from(blk.sm[8 + s]));
            }
        }
        let ad = f32x8(&a.d[b]);
        let [dw, dmin] = blk.d;
        for h in 0..2 {
            // dw · ad · sum_q − dmin · ad · sum_m, in that order
            let p = vsubq_f32(
                vmulq_f32(vmulq_n_f32(ad[h], dw), vcvtq_f32_s32(sum_q[h])),
                vmulq_f32(vmulq_n_f32(ad[h], dmin), vcvtq_f32_s32(sum_m[h])),
            );
            acc[h] = vaddq_f32(acc[h], p);
        }
    }
    store8(acc)
}

/// Row `i` of unpacked Q6_K rows against eight tokens
/// ([`crate::layout::eights_k::dot8_q6_k`]): per group of 16, four steps, then
/// `scale · (dot − 32 · Σa)` (the quants' offset of 32 taken out with the tokens' sums).
#[inline]
#[target_feature(enable = "neon")]
unsafe fn q6_k<const DOTPROD: bool>(rows: &RowsK, i: usize, a: &EightsK) -> [f32; 8] {
    let row = rows.row(i);
    assert_eq!(
        row.len(),
        a.qs.len(),
        "one activation block per weight block"
    );
    let mut acc = [vdupq_n_f32(0.0); 2];
    for (b, blk) in row.iter().enumerate() {
        let mut sum = [vdupq_n_s32(0); 2];
        for g in 0..16 {
            let (w, x) = (blk.q[16 * g..].as_ptr(), a.qs[b][128 * g..].as_ptr());
            // SAFETY: 16 quants of group g, its 4 steps of 32 bytes; the caller's promise.
            let dot = unsafe { steps::<DOTPROD>([vdupq_n_s32(0); 2], w, x, 4) };
            let sums = i32x8(&a.sums16[b][g]);
            for h in 0..2 {
                let centred = vsubq_s32(dot[h], vshlq_n_s32::<5>(sums[h]));
                sum[h] = vmlaq_n_s32(sum[h], centred, i32::from(blk.sm[g] as i8));
            }
        }
        let ad = f32x8(&a.d[b]);
        for h in 0..2 {
            let p = vmulq_f32(vmulq_n_f32(ad[h], blk.d[0]), vcvtq_f32_s32(sum[h]));
            acc[h] = vaddq_f32(acc[h], p);
        }
    }
    store8(acc)
}

levels! {
    dot8_row32, dot8_row32_sdot = row32(format: Q32, row: &[Block32], a: &Eights) -> [f32; 8];
    dot8_raw32, dot8_raw32_sdot = raw32(format: Q32, w: &[u8], a: &Eights) -> [f32; 8];
    dot8_q8_0, dot8_q8_0_sdot = q8_0(w: &[u8], a: &Eights) -> [f32; 8];
    dot8_q4_k, dot8_q4_k_sdot = q4_k(rows: &RowsK, i: usize, a: &EightsK) -> [f32; 8];
    dot8_q6_k, dot8_q6_k_sdot = q6_k(rows: &RowsK, i: usize, a: &EightsK) -> [f32; 8];
}
