//! A prefill's tile of rows unpacked straight out of a packed matrix's groups
//! ([`crate::layout::packed`]) for the eight- and sixteen-token kernels: the blocks
//! [`ManyTokens::unpack_rows32`](super::ManyTokens::unpack_rows32) and
//! [`unpack_rows_k`](super::ManyTokens::unpack_rows_k) make of the rows
//! [`Packed::rows_into`] gives, bit for bit, without that copy in between.
//!
//! In a group, the bytes of a row's block past its head lie four at a time, 32 bytes apart:
//! every 32 bytes hold four of each of the eight rows. Taken back out four bytes at a time,
//! a Q4_K block is 35 small copies, and they cost more than the unpacking. Here one
//! `vpgatherdd` collects eight of a row's four-byte pieces (32 bytes) into the register the
//! unpacking starts from; the unpacking itself is the row-by-row one's
//! ([`super::avx2_eights_q32_k`]'s `quants32`, `q4_k_quants` and `q6_k_quants`), so the
//! quants are the same bytes. The blocks are written where they stay, the tile's buffer kept
//! from one tile to the next.

use std::arch::x86_64::*;
use std::ops::Range;

use ch06_quantization::matrix::{KQuant, Packable, Q32};

use super::avx2_eights_q32_k::{q4_k_quants, q6_k_quants, quants32};
use super::avx2_grid_k::scales_and_mins;
use super::x86_helpers::f16;
use crate::layout::eights::{Block32, Rows, Rows32};
use crate::layout::eights_k::{BlockK, RowsK};
use crate::layout::kquant::QK_K;
use crate::layout::packed::{GROUP, GroupLayout, Packed};

/// `out` made ready for `n` rows of `blocks` blocks: the blocks it held kept (to be
/// overwritten), new ones `zero`.
fn sized<B: Copy>(out: &mut Rows<B>, blocks: usize, n: usize, zero: B) -> &mut [B] {
    out.blocks = blocks;
    out.data.resize(n * blocks, zero);
    &mut out.data[..]
}

/// Four bytes of `blk` at `at`.
fn word(blk: &[u8], at: usize) -> [u8; 4] {
    blk[at..at + 4].try_into().expect("4")
}

/// Eight four-byte pieces of `blk`, `STRIDE` bytes apart from `at`, in one register (the
/// first in lane 0).
#[inline]
#[target_feature(enable = "avx2")]
fn gather<const STRIDE: i32>(blk: &[u8], at: usize) -> __m256i {
    assert!(
        at + 7 * STRIDE as usize + 4 <= blk.len(),
        "eight pieces inside the block"
    );
    let s = STRIDE;
    let offsets = _mm256_setr_epi32(0, s, 2 * s, 3 * s, 4 * s, 5 * s, 6 * s, 7 * s);
    // SAFETY: the eight pieces lie inside `blk` (checked).
    unsafe { _mm256_i32gather_epi32::<1>(blk.as_ptr().add(at).cast(), offsets) }
}

/// Rows `rows` of a packed Q4_0, Q4_1 or Q5_0 matrix unpacked: [`Packed::unpack_rows32`]'s
/// blocks. A row's 16 bytes of nibbles in a block are four pieces, one gather.
#[target_feature(enable = "avx2,f16c")]
pub(super) fn unpack_packed32(p: &Packed, rows: Range<usize>, out: &mut Rows32) {
    let Packable::Q32(format) = p.layout else {
        panic!(
            "unpack_packed32: {} is not Q4_0, Q4_1 or Q5_0",
            p.format.name()
        )
    };
    let f = p.layout;
    let (nb, gbb, head) = (p.cols / 32, f.group_block_bytes(), f.head_bytes());
    let zero = Block32 {
        q: [0; 32],
        d: 0.0,
        m: 0.0,
    };
    let out = sized(out, nb, rows.len(), zero);
    let offsets = _mm_setr_epi32(0, 32, 64, 96);
    for (r, out) in rows.zip(out.chunks_exact_mut(nb.max(1))) {
        let (group, lane) = (p.group(r / GROUP), r % GROUP);
        let at_d = f.field_at(0, lane).0;
        let at_second = (f.fields().len() > 1).then(|| f.field_at(1, lane).0); // m or qh
        let at = head + 4 * lane; // the row's first piece of nibbles
        for (blk, o) in group.chunks_exact(gbb).zip(out) {
            assert!(at + 100 <= blk.len(), "four pieces inside the block");
            // SAFETY: the four pieces at `at`, 32 bytes apart, lie inside `blk` (checked).
            let nib = unsafe { _mm_i32gather_epi32::<1>(blk.as_ptr().add(at).cast(), offsets) };
            let qh = match at_second {
                Some(at) if format == Q32::Q5_0 => i32::from_le_bytes(word(blk, at)),
                _ => 0,
            };
            // SAFETY: 32 bytes into the block's 32 quants.
            unsafe { _mm256_storeu_si256(o.q.as_mut_ptr().cast(), quants32(format, nib, qh)) };
            o.d = f16(blk, at_d);
            o.m = match at_second {
                Some(at) if format.has_min() => f16(blk, at),
                _ => 0.0,
            };
        }
    }
}

/// Rows `rows` of a packed Q4_K or Q6_K matrix unpacked: the blocks of
/// [`super::avx2_eights_q32_k`]'s `unpack_q4_k` or `unpack_q6_k` of each row's bytes.
/// Where the pieces lie is the group's layout (`GroupLayout::chunk_of`): a Q4_K block
/// keeps its row's order, three pieces of scales and then 32 of nibbles, a gather for
/// every 32 bytes; a Q6_K block keeps the order its kernel reads, four pieces of scales,
/// then for each half eight rounds of a piece of `ql`'s first 32 bytes, one of its next
/// 32 and one of `qh`, so each of those 32-byte runs is a gather of every third piece.
#[target_feature(enable = "avx2,f16c")]
pub(super) fn unpack_packed_k(p: &Packed, rows: Range<usize>, out: &mut RowsK) {
    let Packable::K(kquant) = p.layout else {
        panic!("unpack_packed_k: {} is not Q4_K or Q6_K", p.format.name())
    };
    let f = p.layout;
    let (nb, gbb, head) = (p.cols / QK_K, f.group_block_bytes(), f.head_bytes());
    let zero = BlockK {
        q: [0; QK_K],
        sm: [0; 16],
        d: [0.0; 2],
    };
    let out = sized(out, nb, rows.len(), zero);
    for (r, out) in rows.zip(out.chunks_exact_mut(nb.max(1))) {
        let (group, lane) = (p.group(r / GROUP), r % GROUP);
        let at_d = f.field_at(0, lane).0;
        let at_dmin = f.fields().get(1).map(|_| f.field_at(1, lane).0); // Q4_K's
        let at = head + 4 * lane; // the row's first piece
        let piece = |c: usize| at + 32 * c; // where the row's piece c lies
        for (blk, o) in group.chunks_exact(gbb).zip(out) {
            match kquant {
                KQuant::Q4_K => {
                    for j in 0..4 {
                        let v = gather::<32>(blk, piece(3 + 8 * j)); // nibbles 32j..32j + 32
                        let q = (&mut o.q[64 * j..64 * j + 64]).try_into().expect("64");
                        q4_k_quants(v, q);
                    }
                    let mut packed = [0u8; 12];
                    for (c, p) in packed.chunks_exact_mut(4).enumerate() {
                        p.copy_from_slice(&word(blk, piece(c)));
                    }
                    o.sm = scales_and_mins(&packed);
                    let at_dmin = at_dmin.expect("Q4_K keeps dmin beside d");
                    o.d = [f16(blk, at_d), f16(blk, at_dmin)];
                }
                KQuant::Q6_K => {
                    for h in 0..2 {
                        let run = |k: usize| gather::<96>(blk, piece(4 + 24 * h + k));
                        let q = (&mut o.q[128 * h..128 * h + 128]).try_into().expect("128");
                        q6_k_quants(run(0), run(1), run(2), q);
                    }
                    for (c, s) in o.sm.chunks_exact_mut(4).enumerate() {
                        s.copy_from_slice(&word(blk, piece(c)));
                    }
                    o.d = [f16(blk, at_d), 0.0];
                }
            }
        }
    }
}
