//! Eight Q8_0 rows against one token (a decode step's LM head) on AVX2: the rows' sums in
//! the eight lanes of one register, so the float arithmetic of a block is four vector
//! instructions (a conversion, two multiplies, an add) for all eight rows.
//!
//! The eight rows' scales lie a row apart. `GATHER` fetches them with one `vpgatherdd`,
//! which is what the AVX-512 level runs; with AVX2 alone they are eight plain loads
//! (`eight_heads`), because on the AVX2-only CPUs the book was measured on the gather cost
//! about half a block's float work (the CHANGELOG has the figures).

use std::arch::x86_64::*;

use crate::kernels::x86_helpers::prefetch_next_rows;
use ch06_quantization::blocks::{BlockQ4_0, BlockQ4_1, BlockQ8_0, BlockQ8_1};

use super::x86_helpers::splat_bits;

// ANCHOR: avx2_rows8_q8_0
/// Eight consecutive Q8_0 rows (`w`: their bytes, `row_len` each, as in the file) against
/// one token's Q8_0 activations: lane `r` is chapter 6's `dot_q8_0_q8_0` of row `r`, bit
/// for bit. Per block, each row's 32 products are summed to one integer (the sign trick and
/// `vpmaddubsw` + `vpmaddwd`, as chapter 7), six `vphaddd`, two `vperm2i128` and one add
/// fold the eight rows' lane vectors into one vector of eight sums, the eight rows' f16
/// scales (they lie `row_len` apart) come in by one gather or eight loads (`GATHER`), and each lane then does the scalar's `sum += sumi · (d · d_a)`
/// in the scalar's order: eight independent sums, one per lane, block after block.
///
/// # Safety
/// None beyond the CPU's (AVX2 and F16C): the lengths are checked here.
#[target_feature(enable = "avx2,f16c")]
pub(super) unsafe fn rows8_q8_0<const GATHER: bool>(w: &[u8], a: &[BlockQ8_0]) -> [f32; 8] {
    let row_len = a.len() * BlockQ8_0::BYTES;
    let rows = eight_rows(w, row_len); // lane r: the offset of row r's block from row 0's
    let ones = _mm256_set1_epi16(1);
    let mut acc = _mm256_setzero_ps(); // lane r: row r's sum so far
    // ANCHOR_END: avx2_rows8_q8_0
    // ANCHOR: avx2_rows8_q8_0_block
    for (b, ab) in a.iter().enumerate() {
        // SAFETY: block b of every row lies inside `w` (length checked); the gather reads the
        // first 4 bytes of each row's block (scale and two quants); a prefetch never faults.
        unsafe {
            let base = w.as_ptr().add(b * BlockQ8_0::BYTES);
            let y = _mm256_loadu_si256(ab.qs.as_ptr().cast());
            prefetch_next_rows(w.as_ptr(), 8 * row_len, a.len(), b);
            let p: [__m256i; 8] = std::array::from_fn(|r| {
                let row = base.add(r * row_len);
                let x = _mm256_loadu_si256(row.add(2).cast());
                let pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
                _mm256_madd_epi16(pairs, ones)
            });
            let heads = eight_heads::<GATHER>(base, rows, row_len);
            acc = add_scaled(acc, fold8(p), heads, ab.d);
        }
    }
    let mut out = [0.0f32; 8];
    // SAFETY: eight f32 into eight f32.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), acc) };
    out
}
// ANCHOR_END: avx2_rows8_q8_0_block

/// The offsets of eight consecutive rows of `row_len` bytes from the first, one a lane, for
/// a gather, after checking that `w` is those eight rows and that 32-bit offsets reach them.
#[inline]
#[target_feature(enable = "avx2")]
fn eight_rows(w: &[u8], row_len: usize) -> __m256i {
    assert!(
        w.len() == 8 * row_len && w.len() <= i32::MAX as usize,
        "eight rows of whole blocks, one per activation block"
    );
    let step = row_len as i32;
    _mm256_setr_epi32(
        0,
        step,
        2 * step,
        3 * step,
        4 * step,
        5 * step,
        6 * step,
        7 * step,
    )
}

// ANCHOR: add_scaled
/// The scalar's `sum += sumi · (d · d_a)` in each of eight lanes: `heads` holds each row's
/// block's first four bytes (its f16 scale in the low two, from [`eight_heads`]), `d_a` the
/// token's block scale (f16 bits).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn add_scaled(acc: __m256, sumi: __m256i, heads: __m256i, d_a: u16) -> __m256 {
    // the low two bytes (the f16 scale) of each 32-bit lane, packed into each 128-bit half
    let low_halves = _mm256_setr_epi8(
        0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1, 0, 1, 4, 5, 8, 9, 12, 13, -1, -1,
        -1, -1, -1, -1, -1, -1,
    );
    let g = _mm256_permute4x64_epi64::<0b00_00_10_00>(_mm256_shuffle_epi8(heads, low_halves));
    let dw = _mm256_cvtph_ps(_mm256_castsi256_si128(g));
    let da = splat_bits(d_a);
    let term = _mm256_mul_ps(_mm256_cvtepi32_ps(sumi), _mm256_mul_ps(dw, da));
    _mm256_add_ps(acc, term)
}
// ANCHOR_END: add_scaled

// ANCHOR: eight_heads
/// The first four bytes of the block at `base` in each of eight rows `row_len` apart (its
/// scale, and Q4_1's minimum), one row a lane: one gather (`rows` holds the offsets), or
/// eight 32-bit loads.
///
/// # Safety
/// `base + 7 · row_len + 4` must lie inside one allocation with `base`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn eight_heads<const GATHER: bool>(
    base: *const u8,
    rows: __m256i,
    row_len: usize,
) -> __m256i {
    // SAFETY: each read is four bytes at the start of a block of one of the eight rows.
    unsafe {
        if GATHER {
            _mm256_i32gather_epi32::<1>(base.cast(), rows)
        } else {
            let head = |r: usize| base.add(r * row_len).cast::<i32>().read_unaligned();
            _mm256_setr_epi32(
                head(0),
                head(1),
                head(2),
                head(3),
                head(4),
                head(5),
                head(6),
                head(7),
            )
        }
    }
}
// ANCHOR_END: eight_heads

/// Eight rows' 4-bit blocks against one token's 32 quants `y`: row `r`'s 16 bytes of
/// nibbles at `nibbles + r · row_len` (element `j` in the low nibble of byte `j`, element
/// `j + 16` in its high nibble, as Q4_0 and Q4_1 store them), unpacked to 32 bytes of
/// 0..15 and multiplied with `y` by `vpmaddubsw` and `vpmaddwd`: the row's lane vector of
/// 32-bit partial sums, for [`fold8`].
///
/// # Safety
/// Each row's 16 bytes must lie inside one allocation with `nibbles`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn nibble_dots(nibbles: *const u8, row_len: usize, y: __m256i) -> [__m256i; 8] {
    let (low, ones) = (_mm_set1_epi8(0x0f), _mm256_set1_epi16(1));
    std::array::from_fn(|r| {
        // SAFETY: the caller's promise.
        let nib = unsafe { _mm_loadu_si128(nibbles.add(r * row_len).cast()) };
        let q = _mm256_set_m128i(
            _mm_and_si128(_mm_srli_epi16::<4>(nib), low),
            _mm_and_si128(nib, low),
        );
        _mm256_madd_epi16(_mm256_maddubs_epi16(q, y), ones)
    })
}

/// The sums of eight rows' lane vectors, in row order: six `vphaddd` give
/// `[r0 r1 r2 r3 | r0 r1 r2 r3]` and `[r4 .. r7 | r4 .. r7]`, each half one 128-bit half's
/// partial sums, and two `vperm2i128` and one add put the eight rows' sums in order.
#[inline]
#[target_feature(enable = "avx2")]
fn fold8(p: [__m256i; 8]) -> __m256i {
    let h01 = _mm256_hadd_epi32(p[0], p[1]);
    let h23 = _mm256_hadd_epi32(p[2], p[3]);
    let h45 = _mm256_hadd_epi32(p[4], p[5]);
    let h67 = _mm256_hadd_epi32(p[6], p[7]);
    let (lo, hi) = (_mm256_hadd_epi32(h01, h23), _mm256_hadd_epi32(h45, h67));
    _mm256_add_epi32(
        _mm256_permute2x128_si256::<0x20>(lo, hi),
        _mm256_permute2x128_si256::<0x31>(lo, hi),
    )
}

/// Eight consecutive Q4_1 rows against one token's Q8_1 activations: lane `r` is chapter
/// 6's `dot_q4_1_q8_1` of row `r`, bit for bit. [`rows8_q8_0`]'s shape: each row's block
/// unpacked (low nibbles, then high) and summed against the token with `vpmaddubsw` +
/// `vpmaddwd`, the eight sums folded into one vector, the eight rows' `d` and `m` fetched
/// together ([`eight_heads`]), and each lane doing the scalar's `(d · d_a) · sumi + m · s`.
///
/// # Safety
/// None beyond the CPU's (AVX2 and F16C): the lengths are checked here.
#[target_feature(enable = "avx2,f16c")]
pub(super) unsafe fn rows8_q4_1<const GATHER: bool>(w: &[u8], a: &[BlockQ8_1]) -> [f32; 8] {
    let row_len = a.len() * BlockQ4_1::BYTES;
    let rows = eight_rows(w, row_len); // lane r: the offset of row r's block from row 0's
    // each lane's d (bytes 0, 1) to the low 8 bytes of its half, m (bytes 2, 3) to the high
    let split = _mm256_setr_epi8(
        0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, 0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7,
        10, 11, 14, 15,
    );
    let mut acc = _mm256_setzero_ps(); // lane r: row r's sum so far
    for (b, ab) in a.iter().enumerate() {
        // SAFETY: block b of every row lies inside `w` (length checked); the gather reads
        // the first 4 bytes of each row's block (d and m); a prefetch never faults.
        unsafe {
            let base = w.as_ptr().add(b * BlockQ4_1::BYTES);
            let y = _mm256_loadu_si256(ab.qs.as_ptr().cast());
            prefetch_next_rows(w.as_ptr(), 8 * row_len, a.len(), b);
            let sumi = fold8(nibble_dots(base.add(4), row_len, y));
            let g = eight_heads::<GATHER>(base, rows, row_len);
            let g = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_shuffle_epi8(g, split));
            let dw = _mm256_cvtph_ps(_mm256_castsi256_si128(g));
            let mw = _mm256_cvtph_ps(_mm256_extracti128_si256::<1>(g));
            let bits = i32::from(ab.d) | (i32::from(ab.s) << 16);
            let ds = _mm_cvtph_ps(_mm_set1_epi32(bits)); // [d_a, s, d_a, s], every lane set
            let da = _mm256_set1_ps(_mm_cvtss_f32(ds));
            let s = _mm256_set1_ps(_mm_cvtss_f32(_mm_shuffle_ps::<0b01>(ds, ds)));
            let t = _mm256_add_ps(
                _mm256_mul_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(sumi)),
                _mm256_mul_ps(mw, s),
            );
            acc = _mm256_add_ps(acc, t);
        }
    }
    let mut out = [0.0f32; 8];
    // SAFETY: eight f32 into eight f32.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), acc) };
    out
}

/// Eight consecutive Q4_0 rows against one token's Q8_0 activations: lane `r` is chapter
/// 6's `dot_q4_0_q8_0` of row `r`, bit for bit. [`rows8_q4_1`]'s shape with Q8_0's float
/// step: the quants stay unsigned (0..15), and `Σ (q − 8)·a = Σ q·a − 8·Σ a`, with `Σ a`
/// summed once a block for the eight rows, exactly, in 32-bit integers.
///
/// # Safety
/// None beyond the CPU's (AVX2 and F16C): the lengths are checked here.
#[target_feature(enable = "avx2,f16c")]
pub(super) unsafe fn rows8_q4_0<const GATHER: bool>(w: &[u8], a: &[BlockQ8_0]) -> [f32; 8] {
    let row_len = a.len() * BlockQ4_0::BYTES;
    let rows = eight_rows(w, row_len); // lane r: the offset of row r's block from row 0's
    let (ones, ones_u8) = (_mm256_set1_epi16(1), _mm256_set1_epi8(1));
    let mut acc = _mm256_setzero_ps(); // lane r: row r's sum so far
    for (b, ab) in a.iter().enumerate() {
        // SAFETY: block b of every row lies inside `w` (length checked); the scales' reads
        // are the first 4 bytes of each row's block; a prefetch never faults.
        unsafe {
            let base = w.as_ptr().add(b * BlockQ4_0::BYTES);
            let y = _mm256_loadu_si256(ab.qs.as_ptr().cast());
            prefetch_next_rows(w.as_ptr(), 8 * row_len, a.len(), b);
            let p = nibble_dots(base.add(2), row_len, y);
            // Σ a: the token's 32 quants summed (pairs, then words, then the lanes)
            let sa =
                super::x86_helpers::hsum(_mm256_madd_epi16(_mm256_maddubs_epi16(ones_u8, y), ones));
            let sumi = _mm256_sub_epi32(fold8(p), _mm256_set1_epi32(8 * sa));
            let heads = eight_heads::<GATHER>(base, rows, row_len);
            acc = add_scaled(acc, sumi, heads, ab.d);
        }
    }
    let mut out = [0.0f32; 8];
    // SAFETY: eight f32 into eight f32.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), acc) };
    out
}
