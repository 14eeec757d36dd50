//! The interleaved prefill kernel for Q4_K on AVX2: one row against four tokens, from the
//! same interleaved activations as the AVX-512 kernel ([`KQuads`]), one 32-bit lane per
//! (super-block, token) pair, with the instructions AVX2 has.
//!
//! A 256-bit register holds eight lanes: two super-blocks × four tokens, the first block's
//! four tokens in the low 128 bits, the second's in the high 128 (the first or second half
//! of each 64-byte step of [`KQuads`]). A sub-block's quants are unpacked for the two
//! blocks side by side the same way, quants 0..16 of each in one register's halves and
//! 16..32 in another's, so step `k` (quants `4k..4k + 4`) is one `vpshufd` that copies
//! dword `k % 4` across its half, and one `vpmaddubsw` multiplies every lane's four quants
//! by its own token's four activations.
//!
//! `vpmaddubsw` leaves 16-bit sums of two products. The eight steps of a sub-block are
//! summed in 16 bits, exactly: two products of a 4-bit quant and an activation
//! `|a| ≤ 128` are at most `2 · 128 · 15`, and eight steps at most `30 720 < 2^15`. Then
//! `vpmaddwd` widens them with the sub-block's 6-bit scale as its second operand: the
//! multiply by the scale comes with the widening, exactly as the scalar `scale · dot` in
//! 32 bits. No horizontal add is needed, and the float work is eight lanes at a time.

use std::arch::x86_64::*;

use super::avx2::scales_and_mins;
use crate::kquant::{self, BlockQ8K, KQuads, Q4_K_BYTES};

/// Four steps of 16-bit sums: `q` holds quants `4s..4s + 4` of each lane's block in dword
/// `s` of its half (s in 0..4), `act` points at the first step's 32 activation bytes, the
/// next steps 64 bytes apart. The caller keeps the sums inside i16 (see the module).
///
/// # Safety
/// `act` must be readable for `3 · 64 + 32` bytes.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn four_steps(q: __m256i, act: *const i8) -> __m256i {
    // SAFETY: the four 32-byte loads the caller vouches for.
    let a: [__m256i; 4] =
        std::array::from_fn(|s| unsafe { _mm256_loadu_si256(act.add(64 * s).cast()) });
    let p0 = _mm256_maddubs_epi16(_mm256_shuffle_epi32::<0x00>(q), a[0]);
    let p1 = _mm256_maddubs_epi16(_mm256_shuffle_epi32::<0x55>(q), a[1]);
    let p2 = _mm256_maddubs_epi16(_mm256_shuffle_epi32::<0xaa>(q), a[2]);
    let p3 = _mm256_maddubs_epi16(_mm256_shuffle_epi32::<0xff>(q), a[3]);
    _mm256_add_epi16(_mm256_add_epi16(p0, p1), _mm256_add_epi16(p2, p3))
}

/// The f16 pairs at the start of four blocks `bytes` apart (Q4_K's `d` and `dmin`), as f32:
/// `[d0, m0, d1, m1, d2, m2, d3, m3]`.
///
/// # Safety
/// `p` must be readable for four bytes at each of the four blocks' starts.
#[inline]
#[target_feature(enable = "avx2,f16c")]
unsafe fn block_halves(p: *const u8, bytes: usize) -> __m256 {
    // SAFETY: four bytes at the start of each block.
    let h: [i32; 4] =
        std::array::from_fn(|j| unsafe { p.add(j * bytes).cast::<i32>().read_unaligned() });
    _mm256_cvtph_ps(_mm_setr_epi32(h[0], h[1], h[2], h[3]))
}

/// Lane (b, t) of block pair `pair` gets entry `2b + HALF` of `dm` ([`block_halves`]).
#[inline]
#[target_feature(enable = "avx2")]
fn pair_lanes<const HALF: i32>(dm: __m256, pair: usize) -> __m256 {
    let (a, b) = (4 * pair as i32 + HALF, 4 * pair as i32 + 2 + HALF);
    _mm256_permutevar8x32_ps(dm, _mm256_setr_epi32(a, a, a, a, b, b, b, b))
}

/// `acc` (a token per lane) plus each block's four tokens of `p` (two blocks, a half each),
/// the first block first: the scalar loop's order of additions.
#[inline]
#[target_feature(enable = "avx2")]
fn add_in_block_order(acc: __m128, p: __m256) -> __m128 {
    let acc = _mm_add_ps(acc, _mm256_castps256_ps128(p));
    _mm_add_ps(acc, _mm256_extractf128_ps::<1>(p))
}

/// The four lanes of `v`.
#[inline]
#[target_feature(enable = "avx2")]
fn lanes(v: __m128) -> [f32; 4] {
    let mut out = [0.0f32; 4];
    // SAFETY: four f32 into four f32.
    unsafe { _mm_storeu_ps(out.as_mut_ptr(), v) };
    out
}

/// The two super-blocks' 16 bytes at `at` and `at + 16` (each from its own block start,
/// `b0` and `b0 + bytes`): `[bytes 0..16, bytes 16..32]`, the first block in the low half.
///
/// # Safety
/// `b0` must be readable for `at + 32` bytes, and `b0 + bytes` too.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn pair_bytes(b0: *const u8, bytes: usize, at: usize) -> [__m256i; 2] {
    // SAFETY: the caller's promise.
    unsafe {
        let (p0, p1) = (b0.add(at), b0.add(bytes + at));
        [
            _mm256_loadu2_m128i(p1.cast(), p0.cast()),
            _mm256_loadu2_m128i(p1.add(16).cast(), p0.add(16).cast()),
        ]
    }
}

/// In each 128-bit half, i16 (`BYTES` = 2) or i32 (4) lanes all holding the byte, or
/// the two bytes (`BYTES` = 4, `PAIR`), at `i` of that half of `v`, zero- or, for the
/// pairs, as they are: the shuffle pattern for `vpshufb`.
#[inline]
#[target_feature(enable = "avx2")]
fn pick<const BYTES: usize, const PAIR: bool>(i: u8) -> __m256i {
    let pattern: [u8; 32] = std::array::from_fn(|k| match (k % BYTES, PAIR) {
        (0, _) => i,
        (1, true) => i + 1,
        (2, true) => i + 2,
        (3, true) => i + 3,
        _ => 0x80, // a zero byte
    });
    // SAFETY: 32 bytes.
    unsafe { _mm256_loadu_si256(pattern.as_ptr().cast()) }
}

// ANCHOR: avx2_q4_k_quads
/// One Q4_K row's whole groups of four super-blocks against four tokens. Per sub-block of
/// 32: eight steps summed in 16 bits (4-bit quants: safe, see [`super::avx2_quads`]), then
/// `vpmaddwd` by the sub-block's 6-bit scale; the mins meet the activations' sub-block
/// sums the same way. Then `d · da · Σq − dmin · da · Σm`, as the scalar kernel writes it,
/// added to each token's sum in block order; the blocks after the last group one at a time.
///
/// # Safety
/// The row must be one whole block per activation block, and `quads` these activations'.
#[target_feature(enable = "avx2,f16c")]
pub(super) unsafe fn q4_k_quads(w: &[u8], quads: &KQuads, a: [&[BlockQ8K]; 4]) -> [f32; 4] {
    let low = _mm256_set1_epi8(0x0f);
    // Sub-block s's scale as i16 lanes, its min as i32 lanes, from the bytes of `sm` below.
    let scale_at: [__m256i; 8] = std::array::from_fn(|s| pick::<2, false>(s as u8));
    let min_at: [__m256i; 8] = std::array::from_fn(|s| pick::<4, false>(8 + s as u8));
    let mut acc = _mm_setzero_ps(); // lane t: token t's sum so far
    for (g, qs) in quads.qs.iter().enumerate() {
        let b = w[4 * g * Q4_K_BYTES..].as_ptr();
        // SAFETY: blocks 4g..4g + 4 lie inside the row (the caller's promise).
        let dm = unsafe { block_halves(b, Q4_K_BYTES) };
        for pair in 0..2 {
            let b0 = &w[(4 * g + 2 * pair) * Q4_K_BYTES..(4 * g + 2 * pair + 2) * Q4_K_BYTES];
            // Both blocks' 8 scales then 8 mins, a block per half.
            let (sm0, sm1) = (
                scales_and_mins(&b0[4..16]),
                scales_and_mins(&b0[Q4_K_BYTES + 4..Q4_K_BYTES + 16]),
            );
            // SAFETY: 16 bytes each.
            let sm = unsafe { _mm256_loadu2_m128i(sm1.as_ptr().cast(), sm0.as_ptr().cast()) };
            let (mut sumq, mut summ) = (_mm256_setzero_si256(), _mm256_setzero_si256());
            for c in 0..4 {
                // SAFETY: bytes 16 + 32c .. 48 + 32c of both blocks.
                let [first, second] = unsafe { pair_bytes(b0.as_ptr(), Q4_K_BYTES, 16 + 32 * c) };
                for (sub, shift) in [(2 * c, false), (2 * c + 1, true)] {
                    let nibs = |v: __m256i| {
                        let v = if shift { _mm256_srli_epi16::<4>(v) } else { v };
                        _mm256_and_si256(v, low)
                    };
                    let act = qs[64 * 8 * sub + 32 * pair..].as_ptr();
                    // SAFETY: steps 8·sub .. 8·sub + 8 of this pair, inside the 4096 bytes.
                    let s16 = unsafe {
                        _mm256_add_epi16(
                            four_steps(nibs(first), act),
                            four_steps(nibs(second), act.add(256)),
                        )
                    };
                    let scale = _mm256_shuffle_epi8(sm, scale_at[sub]);
                    sumq = _mm256_add_epi32(sumq, _mm256_madd_epi16(s16, scale));
                    // A sub-block's sum fits in i16, so `vpmaddwd` multiplies it by the min.
                    let min = _mm256_shuffle_epi8(sm, min_at[sub]);
                    // SAFETY: 8 of 16 i32.
                    let sums = unsafe {
                        _mm256_loadu_si256(quads.sums[g][sub][8 * pair..].as_ptr().cast())
                    };
                    summ = _mm256_add_epi32(summ, _mm256_madd_epi16(sums, min));
                }
            }
            let (d, dmin) = (pair_lanes::<0>(dm, pair), pair_lanes::<1>(dm, pair));
            // SAFETY: 8 of 16 f32.
            let da = unsafe { _mm256_loadu_ps(quads.d[g][8 * pair..].as_ptr()) };
            let p = _mm256_sub_ps(
                _mm256_mul_ps(_mm256_mul_ps(d, da), _mm256_cvtepi32_ps(sumq)),
                _mm256_mul_ps(_mm256_mul_ps(dmin, da), _mm256_cvtepi32_ps(summ)),
            );
            acc = add_in_block_order(acc, p);
        }
    }
    let mut out = lanes(acc);
    for (t, o) in out.iter_mut().enumerate() {
        for j in 4 * quads.qs.len()..a[t].len() {
            *o += kquant::dot_q4_k_q8_k(&w[j * Q4_K_BYTES..(j + 1) * Q4_K_BYTES], &a[t][j]);
        }
    }
    out
}
// ANCHOR_END: avx2_q4_k_quads
