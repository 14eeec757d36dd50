//! The prefill drivers for the eight-token kernels: each thread a band of tokens, the weights
//! in tiles of rows unpacked once for the band, every eight tokens meeting the whole tile.

use std::ops::Range;

use rayon::prelude::*;

use ch06_quantization::matrix::{Activations, Format, Q32};
use ch06_quantization::{Kernels, QMatrix};
use ch07_simd_parallel::kernels::ManyTokens;
use ch07_simd_parallel::layout::eights::{Eights, Rows32};
use ch07_simd_parallel::layout::eights_k::{EightsK, RowsK};
use ch07_simd_parallel::layout::kquant::{KQuant, QK_K};
use ch07_simd_parallel::layout::quads::ActQuads;

use super::bands::prefill_bands;

// ANCHOR: prefill
/// `out (seq, rows)` of a matrix in a prefill, on a kernel that wants eight tokens a row
/// ([`ManyTokens::has_eights`], [`super::policy::use_eights`]): each thread takes a band of tokens and interleaves them eight
/// at a time (`eights(first token)`), then walks the weights in tiles of `tile` rows unpacked
/// once for the band (`unpack(rows, into)`), every eight tokens meeting the whole tile
/// while their activations are in L1. The kernel (`dot16(unpacked, row in the tile, eights,
/// out)`) takes one, four or eight rows and two eights at a time (one if the band has an odd
/// count), the first eight's results in lanes 0..8 of each row's `out`, the second's in
/// 8..16. The band's last one to seven tokens go four (`dot4(row, first token)`) and then
/// one (`dot(row, token)`) at a time. Every output is the scalar kernel's number, whichever
/// way it was computed.
///
/// How the tokens and rows are shared among the threads is [`super::policy::prefill_split`]'s:
/// a band of tokens a thread up to four threads, past that at most four bands, and no more
/// bands than give each 32 tokens or so (a shorter prompt is one band); each band's rows
/// split into runs of whole tiles, a run a thread (each run's outputs made in a buffer of
/// its own, then copied to its place in every token's row).
#[allow(clippy::too_many_arguments)]
pub fn prefill<A: Send + Sync, U: Default>(
    out: &mut [f32],
    rows: usize,
    seq: usize,
    tile: usize,
    eights: impl Fn(usize) -> A + Sync,
    unpack: impl Fn(Range<usize>, &mut U) + Sync,
    dot16: impl Fn(&U, usize, &[A], &mut [[f32; 16]]) + Sync,
    dot4: impl Fn(usize, usize) -> [f32; 4] + Sync,
    dot: impl Fn(usize, usize) -> f32 + Sync,
) {
    assert_eq!(out.len(), seq * rows, "prefill: out is not (seq, rows)");
    let (bands, parts) = super::policy::prefill_split(seq, rayon::current_num_threads());
    let band = seq.div_ceil(bands);
    // Rows `rs` of a band's `n` tokens from `t0` (their eights `groups`): token t's row r
    // into out[t · stride + r − rs.start].
    let run = |out: &mut [f32], stride: usize, rs: Range<usize>, groups: &[A], t0, n| {
        let mut unpacked = U::default();
        for r0 in rs.clone().step_by(tile) {
            let r1 = (r0 + tile).min(rs.end);
            if !groups.is_empty() {
                unpack(r0..r1, &mut unpacked); // for nothing when the band has < 8 tokens
            }
            for (p, two) in groups.chunks(2).enumerate() {
                let mut r = r0;
                while r < r1 {
                    let k = [8, 4, 1].into_iter().find(|&k| r + k <= r1).unwrap_or(1); // rows at once
                    let mut v = [[0.0f32; 16]; 8];
                    dot16(&unpacked, r - r0, two, &mut v[..k]);
                    for j in 0..8 * two.len() {
                        let at = (16 * p + j) * stride + r - rs.start; // token 16p + j's rows r..r + k
                        for (o, v) in out[at..at + k].iter_mut().zip(&v) {
                            *o = v[j];
                        }
                    }
                    r += k;
                }
            }
            for r in r0..r1 {
                let mut i = n / 8 * 8;
                while i + 4 <= n {
                    for (j, v) in dot4(r, t0 + i).into_iter().enumerate() {
                        out[(i + j) * stride + r - rs.start] = v;
                    }
                    i += 4;
                }
                for i in i..n {
                    out[i * stride + r - rs.start] = dot(r, t0 + i);
                }
            }
        }
    };
    out.par_chunks_mut(band * rows)
        .enumerate()
        .for_each(|(b, out_band)| {
            let (t0, n) = (b * band, out_band.len() / rows);
            if parts == 1 {
                let groups: Vec<A> = (0..n / 8).map(|g| eights(t0 + 8 * g)).collect();
                return run(out_band, rows, 0..rows, &groups, t0, n);
            }
            // the band's eights made on the threads that share it
            let groups: Vec<A> = (0..n / 8)
                .into_par_iter()
                .map(|g| eights(t0 + 8 * g))
                .collect();
            // the band's rows in runs of whole tiles, a run a thread: each run's outputs into a
            // buffer of its own (compact, so in cache), then copied to its piece of every
            // token's outputs
            let per = rows.div_ceil(tile).div_ceil(parts) * tile;
            let mut pieces: Vec<Vec<&mut [f32]>> = Vec::new();
            pieces.resize_with(rows.div_ceil(per), || Vec::with_capacity(n));
            for token in out_band.chunks_mut(rows) {
                for (list, piece) in pieces.iter_mut().zip(token.chunks_mut(per)) {
                    list.push(piece);
                }
            }
            pieces
                .into_par_iter()
                .enumerate()
                .for_each(|(k, mut mine)| {
                    let rs = k * per..(k * per + per).min(rows);
                    let mut part = vec![0.0f32; n * rs.len()];
                    run(&mut part, rs.len(), rs.clone(), &groups, t0, n);
                    for (piece, row) in mine.iter_mut().zip(part.chunks_exact(rs.len())) {
                        piece.copy_from_slice(row);
                    }
                });
        });
}
// ANCHOR_END: prefill

/// A `dot16` for [`prefill`] from a level's kernels: four rows against two eights by
/// `sixteen`, otherwise each eight on its own, by `four` (four rows) or `one` (one row), its
/// results in its eight lanes of each row's `out`.
pub(super) fn dot16_by_eights<A>(
    out: &mut [[f32; 16]],
    a: &[A],
    sixteen: impl FnOnce(&A, &A) -> [[f32; 16]; 4],
    four: impl Fn(&A) -> [[f32; 8]; 4],
    one: impl Fn(&A) -> [f32; 8],
) {
    assert!(
        matches!(out.len(), 1 | 4),
        "dot16_by_eights takes one row or four"
    );
    if let ([x, y], 4) = (a, out.len()) {
        out.copy_from_slice(&sixteen(x, y));
        return;
    }
    for (g, a) in a.iter().enumerate() {
        let lanes = 8 * g..8 * g + 8;
        match &mut *out {
            [out] => out[lanes].copy_from_slice(&one(a)),
            out => {
                for (out, v) in out.iter_mut().zip(four(a)) {
                    out[lanes.clone()].copy_from_slice(&v);
                }
            }
        }
    }
}

/// Rows per tile for [`prefill`] when a row unpacks to `bytes`: about 16 kB where rows are
/// narrow, a multiple of four (the kernels take rows four at a time), 16 to 32 rows. Every
/// tile reads all of the band's activations once, each sixteen tokens' for every four rows,
/// so a wide row must not leave a tile few rows: at 8 192 columns a row unpacks to 9 or 10 kB,
/// 16 kB would hold four, and each sixteen tokens' activations (128 kB there) would come from
/// beyond the core's L2 cache for every four rows; with sixteen they come from L2.
pub fn tile_rows(bytes: usize) -> usize {
    ((16_384 / bytes.max(1) + 2) / 4 * 4).clamp(16, 32)
}

/// [`tile_rows`] for a K-quant matrix of `cols` columns: a super-block unpacks to 280 bytes
/// (256 quants, 16 scales, d and dmin).
pub fn tile_rows_k(cols: usize) -> usize {
    tile_rows(cols / QK_K * 280)
}

/// [`prefill`] for a Q4_0, Q5_0 or Q4_1 matrix of `rows` rows (`row_bytes(r)`), its tokens'
/// activations interleaved by `eights`.
#[allow(clippy::too_many_arguments)]
pub fn prefill32<'w>(
    kk: &dyn ManyTokens,
    format: Q32,
    out: &mut [f32],
    rows: usize,
    seq: usize,
    row_bytes: impl Fn(usize) -> &'w [u8] + Sync,
    eights: impl Fn(usize) -> Eights + Sync,
    dot4: impl Fn(usize, usize) -> [f32; 4] + Sync,
    dot: impl Fn(usize, usize) -> f32 + Sync,
) {
    let blocks = row_bytes(0).len() / format.format().block_bytes();
    let unpack = |rs: Range<usize>, u: &mut Rows32| {
        let rs: Vec<&[u8]> = rs.map(&row_bytes).collect();
        kk.unpack_rows32(format, &rs, u);
    };
    prefill_unpacked32(
        kk,
        format,
        out,
        (rows, seq, blocks),
        unpack,
        eights,
        dot4,
        dot,
    );
}

/// [`prefill32`] for rows that `unpack(rows, into)` unpacks from wherever they are
/// (a [`crate::matrix::Packed`] matrix's groups), `blocks` blocks a row.
#[allow(clippy::too_many_arguments)]
pub fn prefill_unpacked32(
    kk: &dyn ManyTokens,
    format: Q32,
    out: &mut [f32],
    (rows, seq, blocks): (usize, usize, usize),
    unpack: impl Fn(Range<usize>, &mut Rows32) + Sync,
    eights: impl Fn(usize) -> Eights + Sync,
    dot4: impl Fn(usize, usize) -> [f32; 4] + Sync,
    dot: impl Fn(usize, usize) -> f32 + Sync,
) {
    prefill(
        out,
        rows,
        seq,
        tile_rows(40 * blocks), // 32 quants, d and m a block
        eights,
        unpack,
        |u, i, a, out| {
            if let ([x, y], 8) = (a, out.len()) {
                let eight = std::array::from_fn(|j| u.row(i + j));
                out.copy_from_slice(&kk.dot16x8_row32(format, eight, [x, y]));
                return;
            }
            for (c, out) in out.chunks_mut(4).enumerate() {
                let i = i + 4 * c;
                let four = || std::array::from_fn(|j| u.row(i + j));
                dot16_by_eights(
                    out,
                    a,
                    |x, y| kk.dot16x4_row32(format, four(), [x, y]),
                    |a| kk.dot8x4_row32(format, four(), a),
                    |a| kk.dot8_row32(format, u.row(i), a),
                );
            }
        },
        dot4,
        dot,
    );
}

/// Each token's row of `x` (`cols` values) quantized on the threads by `quantize`, its
/// blocks back to back in one list, Q8_1 if `q8_1`, else Q8_0: the same blocks as one call
/// over all of `x`. The lists are joined on the threads too: on sixteen threads, a copy of
/// every block on one of them would stand where the fifteen others wait.
pub(super) fn quantize_tokens(
    x: &[f32],
    cols: usize,
    q8_1: bool,
    quantize: impl Fn(&[f32]) -> Activations + Sync,
) -> Activations {
    if x.len() == cols {
        return quantize(x); // one token (a decode step): nothing to split or join
    }
    let per_token: Vec<Activations> = x.par_chunks(cols).map(&quantize).collect();
    if q8_1 {
        let parts = per_token.iter().map(|a| match a {
            Activations::Q8_1(a) => &a[..],
            Activations::Q8_0(_) => unreachable!("quantize gives Q8_1 here"),
        });
        Activations::Q8_1(joined(parts.collect()))
    } else {
        let parts = per_token.iter().map(|a| match a {
            Activations::Q8_0(a) => &a[..],
            Activations::Q8_1(_) => unreachable!("quantize gives Q8_0 here"),
        });
        Activations::Q8_0(joined(parts.collect()))
    }
}

/// The lists of `parts` (all the same length) one after the other, copied on the threads.
fn joined<T: Copy + Send + Sync>(parts: Vec<&[T]>) -> Vec<T> {
    let Some(&first) = parts.first().and_then(|p| p.first()) else {
        return Vec::new();
    };
    let each = parts[0].len();
    assert!(
        parts.iter().all(|p| p.len() == each),
        "every token has as many blocks"
    );
    let mut out = vec![first; each * parts.len()];
    out.par_chunks_mut(each)
        .zip(parts.par_iter())
        .for_each(|(o, p)| o.copy_from_slice(p));
    out
}

/// Chapter 6's product for a Q4_0, Q4_1 or Q8_0 matrix in a prefill, the same numbers bit
/// for bit, with this chapter's eight-token kernels (or, for Q4_1 with VNNI, the interleaved
/// four-token one) doing the tokens of a row together, on `acts`, the tokens' activations
/// quantized by [`quantize_tokens`].
pub(super) fn q4_prefill(
    m: &QMatrix,
    k: &dyn Kernels,
    kk: &dyn ManyTokens,
    out: &mut [f32],
    acts: &Activations,
    seq: usize,
) {
    assert_eq!(out.len(), seq * m.rows(), "matmul: out is not (seq, rows)");
    let nb = m.cols() / 32;
    let blocks = match acts {
        Activations::Q8_0(a) => a.len(),
        Activations::Q8_1(a) => a.len(),
    };
    assert_eq!(
        blocks,
        seq * nb,
        "matmul: the activations are not (seq, cols)"
    );
    let dot4 = |r: usize, t: usize| m.dot_rows4(k, [r; 4], acts, [t, t + 1, t + 2, t + 3]);
    let dot = |r: usize, t: usize| m.dot_row(k, r, acts, t);
    match acts {
        // nothing to unpack: each tile is its first row, read as it lies in the file
        Activations::Q8_0(a) if m.format() == Format::Q8_0 => prefill(
            out,
            m.rows(),
            seq,
            tile_rows(34 * nb),
            |t| Eights::from_q8_0_blocks(std::array::from_fn(|j| &a[(t + j) * nb..][..nb])),
            |rs, first: &mut usize| *first = rs.start,
            |first, i, a, out| {
                for (j, out) in out.iter_mut().enumerate() {
                    let w = m.row_bytes(first + i + j);
                    match a {
                        [a] => out[..8].copy_from_slice(&kk.dot8_q8_0(w, a)),
                        a => *out = kk.dot16_q8_0(w, [&a[0], &a[1]]),
                    }
                }
            },
            dot4,
            dot,
        ),
        Activations::Q8_0(a) => prefill32(
            kk,
            Q32::Q4_0,
            out,
            m.rows(),
            seq,
            |r| m.row_bytes(r),
            |t| Eights::from_q8_0_blocks(std::array::from_fn(|j| &a[(t + j) * nb..][..nb])),
            dot4,
            dot,
        ),
        Activations::Q8_1(a) if crate::matrix::policy::use_eights(kk) => prefill32(
            kk,
            Q32::Q4_1,
            out,
            m.rows(),
            seq,
            |r| m.row_bytes(r),
            |t| Eights::from_q8_1(std::array::from_fn(|j| &a[(t + j) * nb..][..nb])),
            dot4,
            dot,
        ),
        Activations::Q8_1(a) => prefill_bands(
            out,
            m.rows(),
            seq,
            |t| {
                let a4 = std::array::from_fn(|j| &a[(t + j) * nb..][..nb]);
                Some(ActQuads::from_q8_1(a4))
            },
            |r, t, q| {
                let a4 = std::array::from_fn(|j| &a[(t + j) * nb..][..nb]);
                q.and_then(|q| kk.tokens4_q4_1_quads(m.row_bytes(r), q, a4))
                    .unwrap_or_else(|| dot4(r, t))
            },
            dot,
        ),
    }
}

/// Rows `i..i + out.len()` (one, four or eight) of a tile of unpacked Q4_K or Q6_K rows against
/// one or two eights of tokens ([`prefill`]'s `dot16`).
pub(super) fn dot16_k(
    kk: &dyn ManyTokens,
    kquant: KQuant,
    u: &RowsK,
    i: usize,
    a: &[EightsK],
    out: &mut [[f32; 16]],
) {
    if out.len() == 8 {
        let (lo, hi) = out.split_at_mut(4);
        dot16_k(kk, kquant, u, i, a, lo);
        dot16_k(kk, kquant, u, i + 4, a, hi);
        return;
    }
    dot16_by_eights(
        out,
        a,
        |x, y| kk.dot16x4_k(kquant, u, i, [x, y]),
        |a| match kquant {
            KQuant::Q4_K => kk.dot8x4_q4_k(u, i, a),
            KQuant::Q6_K => kk.dot8x4_q6_k(u, i, a),
        },
        |a| match kquant {
            KQuant::Q4_K => kk.dot8_q4_k(u, i, a),
            KQuant::Q6_K => kk.dot8_q6_k(u, i, a),
        },
    );
}
