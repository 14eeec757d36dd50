//! The AArch64 helpers every NEON kernel shares: the byte dot product of both ARM levels,
//! loads, nibbles unpacked, the f16 converter, and the macro that compiles a kernel once per
//! level. No kernel is here; every NEON kernel file
//! imports from here, and this file from none of them.
//!
//! NEON registers are 128 bits: a block of 32 quants is two registers, where AVX2 takes one.

#![cfg(target_arch = "aarch64")]
#![allow(clippy::missing_safety_doc)]

use std::arch::aarch64::*;
use std::arch::asm;

// ANCHOR: sdot
/// `acc[l] += Σ_{k<4} x[4l + k] · y[4l + k]`: Armv8.2-A's `sdot`, four byte products summed
/// into each 32-bit lane in one instruction (x86's `vpdpbusd`, but with both operands
/// signed). Rust's intrinsic for it (`vdotq_s32`) is not stable yet, so the instruction is
/// written out; it touches registers only.
#[inline]
#[target_feature(enable = "neon,dotprod")]
pub(crate) fn sdot(mut acc: int32x4_t, x: int8x16_t, y: int8x16_t) -> int32x4_t {
    // SAFETY: `sdot` reads two vector registers and adds into a third, nothing else; this
    // function enables the dot-product extension that has it.
    unsafe {
        asm!(
            "sdot {acc:v}.4s, {x:v}.16b, {y:v}.16b",
            acc = inout(vreg) acc,
            x = in(vreg) x,
            y = in(vreg) y,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    acc
}

// ANCHOR_END: sdot

// ANCHOR: dot16
/// `acc + the byte products of x and y`, each 32-bit lane holding four of them: [`sdot`] on
/// the `Dotprod` level; on plain NEON, `smull` multiplies eight byte pairs into 16-bit lanes
/// (a product of two bytes always fits) and `sadalp` adds neighbouring 16-bit lanes into the
/// 32-bit lanes of `acc`, twice. Which four products a lane gets differs (`sdot`: bytes
/// `4l..4l + 4`; `sadalp`: bytes `2l, 2l + 1, 8 + 2l, 9 + 2l`), which does not matter to a
/// kernel that sums the lanes at the end; kernels whose lanes are tokens take
/// [`dot16_by_lane`].
///
/// # Safety
/// The CPU must have NEON, and with `DOTPROD` the dot-product instructions.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) unsafe fn dot16<const DOTPROD: bool>(
    acc: int32x4_t,
    x: int8x16_t,
    y: int8x16_t,
) -> int32x4_t {
    if DOTPROD {
        // SAFETY: with DOTPROD the caller promises the dot-product instructions.
        unsafe { sdot(acc, x, y) }
    } else {
        let lo = vmull_s8(vget_low_s8(x), vget_low_s8(y));
        let hi = vmull_high_s8(x, y);
        vpadalq_s16(vpadalq_s16(acc, lo), hi)
    }
}
// ANCHOR_END: dot16

/// [`dot16`] with [`sdot`]'s lanes on both levels: lane `l` gets bytes `4l..4l + 4`'s
/// products, for kernels whose lanes are tokens, four quants each. Plain NEON pays one more
/// pairwise add for it: `saddlp` turns each half's eight 16-bit products into four pair
/// sums, and `addp` pairs those up, lanes 0 and 1 from the low half, 2 and 3 from the high.
///
/// # Safety
/// As for [`dot16`].
#[inline]
#[target_feature(enable = "neon")]
pub(crate) unsafe fn dot16_by_lane<const DOTPROD: bool>(
    acc: int32x4_t,
    x: int8x16_t,
    y: int8x16_t,
) -> int32x4_t {
    if DOTPROD {
        // SAFETY: with DOTPROD the caller promises the dot-product instructions.
        unsafe { sdot(acc, x, y) }
    } else {
        let lo = vmull_s8(vget_low_s8(x), vget_low_s8(y)); // bytes 0..8
        let hi = vmull_high_s8(x, y); // bytes 8..16
        vaddq_s32(acc, vpaddq_s32(vpaddlq_s16(lo), vpaddlq_s16(hi)))
    }
}

/// `Σ x_j·y_j` over a block of 32 signed bytes each (two registers): the block's integer,
/// exact (at most 32 · 128 · 128 in size), whichever way the lanes were summed.
///
/// # Safety
/// As for [`dot16`].
#[inline]
#[target_feature(enable = "neon")]
pub(crate) unsafe fn dot32<const DOTPROD: bool>(x: [int8x16_t; 2], y: [int8x16_t; 2]) -> i32 {
    // SAFETY: the caller's promise, passed on.
    let acc = unsafe { dot16::<DOTPROD>(dot16::<DOTPROD>(vdupq_n_s32(0), x[0], y[0]), x[1], y[1]) };
    vaddvq_s32(acc)
}

/// 32 signed bytes as two registers.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn load_i8x32(q: &[i8; 32]) -> [int8x16_t; 2] {
    // SAFETY: `q` is 32 readable bytes; NEON loads need no alignment.
    unsafe { [vld1q_s8(q.as_ptr()), vld1q_s8(q.as_ptr().add(16))] }
}

/// 32 bytes from `b[at..at + 32]`, read as signed.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn load_bytes32(b: &[u8], at: usize) -> [int8x16_t; 2] {
    let p = b[at..at + 32].as_ptr().cast::<i8>();
    // SAFETY: 32 readable bytes at `p` (the slice above checked the bounds).
    unsafe { [vld1q_s8(p), vld1q_s8(p.add(16))] }
}

/// The 32 quants of a 4-bit block's 16 bytes at `b[at..at + 16]`, one per byte in element
/// order (0..16): the low nibbles (elements 0..16), then the high nibbles (16..32).
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn unpack_nibbles(b: &[u8], at: usize) -> [uint8x16_t; 2] {
    let p = b[at..at + 16].as_ptr();
    // SAFETY: 16 readable bytes at `p`.
    let v = unsafe { vld1q_u8(p) };
    [vandq_u8(v, vdupq_n_u8(0x0f)), vshrq_n_u8::<4>(v)]
}

/// Four f16 bits to four f32, exactly: AArch64's `fcvtl`, which every AArch64 CPU has (it
/// is half-precision *arithmetic* that is optional, not conversion); Rust's intrinsic for it
/// takes the unstable `f16` type, so the instruction is written out. Like x86's
/// `vcvtph2ps`, it converts every half exactly and makes a signalling NaN quiet.
#[inline]
#[target_feature(enable = "neon")]
pub(crate) fn f16x4_to_f32(h: uint16x4_t) -> float32x4_t {
    let out: float32x4_t;
    // SAFETY: `fcvtl` reads one vector register and writes another, nothing else; it is
    // base AArch64 NEON, which this function enables.
    unsafe {
        asm!(
            "fcvtl {out:v}.4s, {h:v}.4h",
            out = lateout(vreg) out,
            h = in(vreg) h,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    out
}

/// One target-feature wrapper per level and kernel: a kernel file's bodies (each needing NEON,
/// and with `DOTPROD` the dot product), compiled with NEON alone, or with the dot product too.
macro_rules! levels {
    ($($neon:ident, $dotprod:ident = $body:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {$(
        #[target_feature(enable = "neon")]
        pub fn $neon($($arg: $ty),*) -> $ret {
            // SAFETY: this function enables NEON, all the body needs without DOTPROD.
            unsafe { $body::<false>($($arg),*) }
        }
        #[target_feature(enable = "neon,dotprod")]
        pub fn $dotprod($($arg: $ty),*) -> $ret {
            // SAFETY: this function enables NEON and the dot product, what DOTPROD needs.
            unsafe { $body::<true>($($arg),*) }
        }
    )*};
}
pub(crate) use levels;
