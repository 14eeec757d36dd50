//! The eight-token prefill kernels on AVX2 (layouts in [`crate::layout::eights`] and
//! [`crate::layout::eights_k`]): one unpacked Q4_0, Q5_0, Q4_1, Q4_K or Q6_K row against eight tokens, a token per
//! 32-bit lane.
//!
//! Per block, eight steps of one broadcast load of the weight's four quants
//! (`vpbroadcastd`, no shuffle), one load of the eight tokens' four activations and one
//! `vpmaddubsw`, summed in 16 bits. That sum is exact while it stays inside i16: two
//! products of a quant `q` and an activation `|a| ≤ 128` are at most `2 · 128 · q`, so the
//! eight steps of a 4-bit block fit (`16 · 128 · 15 = 30 720`), and a 5-bit block's fit four
//! at a time (`8 · 128 · 31 = 31 744`). `vpmaddwd` with ones widens them, and the block's
//! term, in the scalar kernel's float operations, is added to each token's lane in block
//! order.

use ch06_quantization::matrix::Q32;
use std::arch::x86_64::*;

use super::avx2_grid_k::scales_and_mins;
use super::x86_helpers::{f16, splat_f16};
use crate::layout::eights::{Block32, Eights};
use crate::layout::eights_k::{BlockK, EightsK, RowsK};
use crate::layout::kquant::{Q4_K_BYTES, Q6_K_BYTES, QK_K};

/// One Q4_0, Q5_0 or Q4_1 block unpacked as [`crate::layout::eights::unpack_block`] does:
/// the quants by [`quants32`], the scales by F16C.
#[target_feature(enable = "avx2,f16c")]
pub(super) fn unpack_block(format: Q32, b: &[u8]) -> Block32 {
    let at = match format {
        Q32::Q4_0 => 2,
        Q32::Q4_1 => 4,
        Q32::Q5_0 => 6,
    };
    assert!(b.len() >= at + 16, "a whole block");
    // SAFETY: the 16 nibble bytes, inside the block (checked).
    let nib = unsafe { _mm_loadu_si128(b.as_ptr().add(at).cast()) };
    let qh = i32::from_le_bytes([b[2], b[3], b[4], b[5]]); // Q5_0's fifth bits
    let mut out = [0u8; 32];
    // SAFETY: 32 bytes into 32 bytes.
    unsafe { _mm256_storeu_si256(out.as_mut_ptr().cast(), quants32(format, nib, qh)) };
    let m = if format.has_min() { f16(b, 2) } else { 0.0 };
    Block32 {
        q: out,
        d: f16(b, 0),
        m,
    }
}

/// A Q4_0, Q5_0 or Q4_1 block's 32 quants as bytes from its 16 bytes of nibbles (`nib`):
/// the nibbles split by a shift and a mask, Q5_0's fifth bits (`qh`; ignored for the
/// others) spread over the bytes (each byte tests its own bit) and put on with an OR.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn quants32(format: Q32, nib: __m128i, qh: i32) -> __m256i {
    let low = _mm_set1_epi8(0x0f);
    let q = _mm256_set_m128i(
        _mm_and_si128(_mm_srli_epi16::<4>(nib), low),
        _mm_and_si128(nib, low),
    );
    if format != Q32::Q5_0 {
        return q;
    }
    // Byte j gets byte j / 8 of qh, then 16 if its bit j % 8 is set.
    let spread = _mm256_setr_epi8(
        0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3,
        3, 3,
    );
    let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    let h = _mm256_shuffle_epi8(_mm256_set1_epi32(qh), spread);
    let h = _mm256_cmpeq_epi8(_mm256_and_si256(h, bit), bit);
    _mm256_or_si256(q, _mm256_and_si256(h, _mm256_set1_epi8(16)))
}

/// A block as [`dot8_blocks`] takes it: the quants, then `d` and `m` in every lane.
type Lanes = ([u8; 32], __m256, __m256);

/// [`unpack_block`] for [`dot8_raw32`], the scales converted straight into every lane
/// ([`splat_f16`]): converted alone, each left the loop waiting on its running sum.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn unpack_lanes(format: Q32, b: &[u8]) -> Lanes {
    let m = if format.has_min() {
        splat_f16(b, 2)
    } else {
        _mm256_setzero_ps()
    };
    (unpack_block(format, b).q, splat_f16(b, 0), m)
}

/// Four steps of 16-bit sums: the weight's quants `4s..4s + 4` (at `w + 4s`) broadcast to
/// every lane, against the eight tokens' (at `a + 32s`), for s in 0..4.
///
/// # Safety
/// `w` must be readable for 16 bytes and `a` for 128.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn four_steps(w: *const u8, a: *const i8) -> __m256i {
    // SAFETY: the caller's promise: 4 bytes at w + 4s and 32 at a + 32s, s < 4.
    let p: [__m256i; 4] = std::array::from_fn(|s| unsafe {
        _mm256_maddubs_epi16(
            _mm256_set1_epi32(w.add(4 * s).cast::<i32>().read_unaligned()),
            _mm256_loadu_si256(a.add(32 * s).cast()),
        )
    });
    _mm256_add_epi16(_mm256_add_epi16(p[0], p[1]), _mm256_add_epi16(p[2], p[3]))
}

/// One unpacked row (Q4_1 with `Q4_1`, else Q5_0 or Q4_0: their offset is in the
/// activations) against eight tokens: each lane exactly
/// [`crate::layout::eights::dot8_row32`]'s, which is the scalar kernel's.
///
/// # Safety
/// None beyond the CPU's: the lengths are checked here.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn dot8_row32<const Q4_1: bool>(row: &[Block32], a: &Eights) -> [f32; 8] {
    dot8_blocks::<Q4_1>(
        row.len(),
        |b| (row[b].q, _mm256_set1_ps(row[b].d), _mm256_set1_ps(row[b].m)),
        a,
    )
}

/// One row as it lies in the file (whole blocks of `format`) against eight tokens, each
/// block unpacked into registers as it is met: for a batch of eight tokens, which would use
/// an unpacked copy of the row once, no copy is made. Each lane is [`dot8_row32`]'s.
///
/// # Safety
/// None beyond the CPU's: the lengths are checked here.
#[target_feature(enable = "avx2,f16c")]
pub(super) unsafe fn dot8_raw32<const Q4_1: bool>(format: Q32, w: &[u8], a: &Eights) -> [f32; 8] {
    let bytes = format.format().block_bytes();
    assert_eq!(
        w.len(),
        a.qs.len() * bytes,
        "one activation block per weight block"
    );
    dot8_blocks::<Q4_1>(
        a.qs.len(),
        |b| unpack_lanes(format, &w[b * bytes..][..bytes]),
        a,
    )
}

// ANCHOR: avx2_eights
/// The body of [`dot8_row32`] and [`dot8_raw32`]: `n` blocks, block `b` unpacked by
/// `block(b)`.
#[inline]
#[target_feature(enable = "avx2")]
fn dot8_blocks<const Q4_1: bool>(n: usize, block: impl Fn(usize) -> Lanes, a: &Eights) -> [f32; 8] {
    assert!(
        a.qs.len() == n && a.d.len() == n && a.offset.len() == n && a.s.len() == n,
        "one activation block per weight block"
    );
    let ones = _mm256_set1_epi16(1);
    let mut acc = _mm256_setzero_ps(); // lane t: token t's sum so far
    for b in 0..n {
        let (q, dw, mw) = block(b);
        let (w, x) = (q.as_ptr(), a.qs[b].as_ptr());
        // SAFETY: 32 weight bytes and 256 activation bytes of block b (lengths checked).
        let (first, second) = unsafe { (four_steps(w, x), four_steps(w.add(16), x.add(128))) };
        let dots = if Q4_1 {
            _mm256_madd_epi16(_mm256_add_epi16(first, second), ones)
        } else {
            _mm256_add_epi32(
                _mm256_madd_epi16(first, ones),
                _mm256_madd_epi16(second, ones),
            )
        };
        // SAFETY: 8 f32 (or i32) of block b.
        let da = unsafe { _mm256_loadu_ps(a.d[b].as_ptr()) };
        let p = if Q4_1 {
            // SAFETY: as above.
            let s = unsafe { _mm256_loadu_ps(a.s[b].as_ptr()) };
            _mm256_add_ps(
                _mm256_mul_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(dots)),
                _mm256_mul_ps(mw, s),
            )
        } else {
            // SAFETY: as above.
            let offset = unsafe { _mm256_loadu_si256(a.offset[b].as_ptr().cast()) };
            let dots = _mm256_cvtepi32_ps(_mm256_sub_epi32(dots, offset)); // Σ (q − o)·a
            _mm256_mul_ps(_mm256_mul_ps(dw, da), dots)
        };
        acc = _mm256_add_ps(acc, p);
    }
    let mut out = [0.0f32; 8];
    // SAFETY: eight f32 into eight f32.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), acc) };
    out
}
// ANCHOR_END: avx2_eights

/// One Q4_K block unpacked as [`crate::layout::eights_k::unpack_q4_k`] does: each 32 bytes
/// of nibbles give two sub-blocks ([`q4_k_quants`]); the scales by F16C.
#[target_feature(enable = "avx2,f16c")]
pub(super) fn unpack_q4_k(b: &[u8]) -> BlockK {
    assert!(b.len() >= Q4_K_BYTES, "a whole block");
    let mut q = [0u8; QK_K];
    for c in 0..4 {
        // SAFETY: bytes 16 + 32c .. 48 + 32c of the block (checked).
        let v = unsafe { _mm256_loadu_si256(b.as_ptr().add(16 + 32 * c).cast()) };
        q4_k_quants(v, (&mut q[64 * c..64 * c + 64]).try_into().expect("64"));
    }
    BlockK {
        q,
        sm: scales_and_mins(&b[4..16]),
        d: [f16(b, 0), f16(b, 2)],
    }
}

/// Quants `64c..64c + 64` of a Q4_K block from its bytes of nibbles `16 + 32c..48 + 32c`
/// (`v`): the low nibbles are the first 32, the high ones the next.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn q4_k_quants(v: __m256i, out: &mut [u8; 64]) {
    let low = _mm256_set1_epi8(0x0f);
    let high = _mm256_and_si256(_mm256_srli_epi16::<4>(v), low);
    // SAFETY: 64 bytes out, 32 and 32.
    unsafe {
        _mm256_storeu_si256(out.as_mut_ptr().cast(), _mm256_and_si256(v, low));
        _mm256_storeu_si256(out.as_mut_ptr().add(32).cast(), high);
    }
}

// ANCHOR: avx2_eights_q4_k
/// Row `i` of unpacked Q4_K rows against eight tokens: per sub-block, eight steps summed in
/// 16 bits (4-bit quants: safe), widened by `vpmaddwd` with the sub-block's scale; the mins
/// meet the tokens' sub-block sums the same way (a sum of 32 activations fits in i16). Then
/// `d · da · Σq − dmin · da · Σm` per token, as [`crate::layout::kquant::dot_q4_k_q8_k`] writes it.
///
/// # Safety
/// None beyond the CPU's: the lengths are checked here.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn dot8_q4_k(rows: &RowsK, i: usize, a: &EightsK) -> [f32; 8] {
    let row = rows.row(i);
    let n = row.len();
    assert!(
        a.qs.len() == n && a.d.len() == n && a.sums.len() == n,
        "one activation block per weight block"
    );
    let mut acc = _mm256_setzero_ps(); // lane t: token t's sum so far
    for (b, BlockK { q, sm, d }) in row.iter().enumerate() {
        let (w, x) = (q.as_ptr(), a.qs[b].as_ptr());
        let (mut sumq, mut summ) = (_mm256_setzero_si256(), _mm256_setzero_si256());
        for s in 0..8 {
            // SAFETY: 32 quants of sub-block s and its 256 activation bytes (lengths checked).
            let a16 = unsafe {
                _mm256_add_epi16(
                    four_steps(w.add(32 * s), x.add(256 * s)),
                    four_steps(w.add(32 * s + 16), x.add(256 * s + 128)),
                )
            };
            let scale = _mm256_set1_epi16(i16::from(sm[s]));
            sumq = _mm256_add_epi32(sumq, _mm256_madd_epi16(a16, scale));
            // SAFETY: 8 i32.
            let sums = unsafe { _mm256_loadu_si256(a.sums[b][s].as_ptr().cast()) };
            let min = _mm256_set1_epi32(i32::from(sm[8 + s]));
            summ = _mm256_add_epi32(summ, _mm256_madd_epi16(sums, min));
        }
        // SAFETY: 8 f32.
        let da = unsafe { _mm256_loadu_ps(a.d[b].as_ptr()) };
        let [dw, dmin] = *d;
        let p = _mm256_sub_ps(
            _mm256_mul_ps(
                _mm256_mul_ps(_mm256_set1_ps(dw), da),
                _mm256_cvtepi32_ps(sumq),
            ),
            _mm256_mul_ps(
                _mm256_mul_ps(_mm256_set1_ps(dmin), da),
                _mm256_cvtepi32_ps(summ),
            ),
        );
        acc = _mm256_add_ps(acc, p);
    }
    let mut out = [0.0f32; 8];
    // SAFETY: eight f32 into eight f32.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), acc) };
    out
}
// ANCHOR_END: avx2_eights_q4_k

/// One Q6_K block unpacked as [`crate::layout::eights_k::unpack_q6_k`] does: each half of
/// 128 quants from its 64 bytes of `ql` and 32 of `qh` ([`q6_k_quants`], as
/// [`super::avx2_grid_k`]'s Q6_K kernel puts them together); the scale by F16C.
#[target_feature(enable = "avx2,f16c")]
pub(super) fn unpack_q6_k(b: &[u8]) -> BlockK {
    assert!(b.len() >= Q6_K_BYTES, "a whole block");
    let mut q = [0u8; QK_K];
    for h in 0..2 {
        // SAFETY: ql bytes 64h..64h + 64 and qh bytes 128 + 32h..+32 of the block (checked).
        let [ql0, ql1, qh] = [64 * h, 64 * h + 32, 128 + 32 * h]
            .map(|at| unsafe { _mm256_loadu_si256(b.as_ptr().add(at).cast()) });
        q6_k_quants(
            ql0,
            ql1,
            qh,
            (&mut q[128 * h..128 * h + 128]).try_into().expect("128"),
        );
    }
    let sm = b[192..208].try_into().expect("16 scales");
    BlockK {
        q,
        sm,
        d: [f16(b, 208), 0.0],
    }
}

/// Quants `128h..128h + 128` of a Q6_K block from its half `h`: `ql` bytes `64h..64h + 32`
/// (`ql0`) and the next 32 (`ql1`), and `qh` bytes `128 + 32h..` (`qh`). Four runs of 32,
/// each a nibble of `ql` and two bits of `qh` put together by masks and shifts.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn q6_k_quants(ql0: __m256i, ql1: __m256i, qh: __m256i, out: &mut [u8; 128]) {
    let (low, three) = (_mm256_set1_epi8(0x0f), _mm256_set1_epi8(3));
    let top = |v: __m256i| _mm256_and_si256(v, _mm256_slli_epi16::<4>(three)); // bits 4, 5
    let runs = [
        _mm256_or_si256(_mm256_and_si256(ql0, low), top(_mm256_slli_epi16::<4>(qh))),
        _mm256_or_si256(_mm256_and_si256(ql1, low), top(_mm256_slli_epi16::<2>(qh))),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(ql0), low), top(qh)),
        _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16::<4>(ql1), low),
            top(_mm256_srli_epi16::<2>(qh)),
        ),
    ];
    for (run, v) in runs.into_iter().enumerate() {
        // SAFETY: 32 bytes of the 128 out.
        unsafe { _mm256_storeu_si256(out.as_mut_ptr().add(32 * run).cast(), v) };
    }
}

/// Row `i` of unpacked Q6_K rows against eight tokens: per group of 16, its four steps
/// summed in 16 bits two at a time (6-bit quants: four could overflow), widened by
/// `vpmaddwd` with the group's signed scale; the offset of 32 out once per block from the
/// tokens' group sums. Then `d · da · Σ` per token, as [`crate::layout::kquant::dot_q6_k_q8_k`].
///
/// # Safety
/// None beyond the CPU's: the lengths are checked here.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn dot8_q6_k(rows: &RowsK, i: usize, a: &EightsK) -> [f32; 8] {
    let row = rows.row(i);
    let n = row.len();
    assert!(
        a.qs.len() == n && a.d.len() == n && a.sums16.len() == n,
        "one activation block per weight block"
    );
    let mut acc = _mm256_setzero_ps(); // lane t: token t's sum so far
    for (b, BlockK { q, sm, d }) in row.iter().enumerate() {
        let (w, x) = (q.as_ptr(), a.qs[b].as_ptr());
        let (mut sum, mut offset) = (_mm256_setzero_si256(), _mm256_setzero_si256());
        for (g, &scale) in sm.iter().enumerate() {
            // SAFETY: 4 quants at w + 16g + 4j and 32 activation bytes at x + 128g + 32j,
            // j < 4, inside block b (lengths checked).
            let step = |j: usize| unsafe {
                _mm256_maddubs_epi16(
                    _mm256_set1_epi32(w.add(16 * g + 4 * j).cast::<i32>().read_unaligned()),
                    _mm256_loadu_si256(x.add(128 * g + 32 * j).cast()),
                )
            };
            let scale = i16::from(scale as i8);
            let s16 = _mm256_set1_epi16(scale);
            sum = _mm256_add_epi32(
                sum,
                _mm256_add_epi32(
                    _mm256_madd_epi16(_mm256_add_epi16(step(0), step(1)), s16),
                    _mm256_madd_epi16(_mm256_add_epi16(step(2), step(3)), s16),
                ),
            );
            // A group's sum fits in i16: `vpmaddwd` by [scale, 0] multiplies it.
            // SAFETY: 8 i32.
            let sums = unsafe { _mm256_loadu_si256(a.sums16[b][g].as_ptr().cast()) };
            let s32 = _mm256_set1_epi32(i32::from(scale as u16));
            offset = _mm256_add_epi32(offset, _mm256_madd_epi16(sums, s32));
        }
        let sum = _mm256_sub_epi32(sum, _mm256_slli_epi32::<5>(offset));
        // SAFETY: 8 f32.
        let da = unsafe { _mm256_loadu_ps(a.d[b].as_ptr()) };
        let p = _mm256_mul_ps(
            _mm256_mul_ps(_mm256_set1_ps(d[0]), da),
            _mm256_cvtepi32_ps(sum),
        );
        acc = _mm256_add_ps(acc, p);
    }
    let mut out = [0.0f32; 8];
    // SAFETY: eight f32 into eight f32.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), acc) };
    out
}
