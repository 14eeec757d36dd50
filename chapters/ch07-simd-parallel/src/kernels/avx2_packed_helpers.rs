//! What the packed eight-row kernels of AVX2 share, the 32-value formats'
//! ([`super::avx2_packed_q32`]) and the K-quants' ([`super::avx2_packed_k`]): a group's blocks
//! checked against the tokens', the prefetch ahead of the block being read, and a vector's
//! lanes.

use ch06_quantization::Format;
use std::arch::x86_64::*;

use super::x86_helpers::prefetch_lines;
use crate::layout::packed::GROUP;

/// A group's bytes per block and its blocks, after checking that `w` is whole blocks of
/// `format`, one per block of each token's activations (`tokens`: their lengths).
pub(super) fn blocks(
    w: &[u8],
    format: Format,
    tokens: impl Iterator<Item = usize>,
) -> (usize, usize) {
    let bb = GROUP * format.block_bytes();
    let nb = w.len() / bb;
    let whole = w.len() == nb * bb;
    assert!(
        whole && tokens.into_iter().all(|len| len == nb),
        "a group's blocks, one per activation block"
    );
    (bb, nb)
}

/// Bytes ahead of the block being read that a kernel asks the cache for: 4 KiB, a few
/// microseconds of a core's share of the memory's bandwidth, about the time a line takes to
/// come. On the Zen 5 of the reference run, 4 KiB rather than 1 decoded 5 to 10% faster
/// (the CHANGELOG has the rounds).
const AHEAD: usize = 4096;

/// Asks for the `bytes` that lie [`AHEAD`] of `at` (a prefetch never faults, wherever it
/// points): the group's blocks come in order, and the caches have them when their turn comes.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn fetch_ahead(at: *const u8, bytes: usize) {
    prefetch_lines(at.wrapping_add(AHEAD), bytes);
}

/// A vector's eight lanes.
#[inline]
#[target_feature(enable = "avx")]
pub(super) unsafe fn lanes(v: __m256) -> [f32; 8] {
    let mut out = [0.0f32; 8];
    // SAFETY: eight f32 into eight f32.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), v) };
    out
}
