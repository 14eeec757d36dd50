//! The prefill drivers for the eight-token kernels: each thread a band of tokens, the weights
//! in tiles of rows unpacked once for the band, every eight tokens meeting the whole tile.

use std::ops::Range;

use rayon::prelude::*;

use ch06_quantization::Format;
use ch07_simd_parallel::kernels::ManyTokens;
use ch07_simd_parallel::layout::eights::{Eights, Rows32};

// ANCHOR: prefill
/// `out (seq, rows)` of a matrix in a prefill, on a kernel that wants eight tokens a row
/// ([`ManyTokens::wants_octs`]): each thread takes a band of tokens and interleaves them eight
/// at a time (`octs(first token)`), then walks the weights in tiles of `tile` rows unpacked
/// once for the band (`unpack(rows, into)`), every eight tokens meeting the whole tile
/// while their activations are in L1 (`dot8(unpacked, row in the tile, eight tokens)`).
/// The band's last one to seven tokens go four (`dot4(row, first token)`) and then one
/// (`dot(row, token)`) at a time. Every output is the scalar kernel's number, whichever
/// way it was computed.
#[allow(clippy::too_many_arguments)]
pub fn prefill<A: Send, U: Default>(
    out: &mut [f32],
    rows: usize,
    seq: usize,
    tile: usize,
    octs: impl Fn(usize) -> A + Sync,
    unpack: impl Fn(Range<usize>, &mut U) + Sync,
    dot8: impl Fn(&U, usize, &A, &mut [[f32; 8]]) + Sync,
    dot4: impl Fn(usize, usize) -> [f32; 4] + Sync,
    dot: impl Fn(usize, usize) -> f32 + Sync,
) {
    assert_eq!(out.len(), seq * rows, "prefill: out is not (seq, rows)");
    let band = seq.div_ceil(rayon::current_num_threads());
    out.par_chunks_mut(band * rows)
        .enumerate()
        .for_each(|(b, out_band)| {
            let (t0, n) = (b * band, out_band.len() / rows);
            let groups: Vec<A> = (0..n / 8).map(|g| octs(t0 + 8 * g)).collect();
            let mut unpacked = U::default();
            for r0 in (0..rows).step_by(tile) {
                let r1 = (r0 + tile).min(rows);
                if !groups.is_empty() {
                    unpack(r0..r1, &mut unpacked); // for nothing when the band has < 8 tokens
                }
                for (g, a) in groups.iter().enumerate() {
                    let mut r = r0;
                    while r < r1 {
                        let k = if r + 4 <= r1 { 4 } else { 1 }; // rows at once
                        let mut v = [[0.0f32; 8]; 4];
                        dot8(&unpacked, r - r0, a, &mut v[..k]);
                        for j in 0..8 {
                            let at = (8 * g + j) * rows + r; // token 8g + j's rows r..r + k
                            for (o, v) in out_band[at..at + k].iter_mut().zip(&v) {
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
                            out_band[(i + j) * rows + r] = v;
                        }
                        i += 4;
                    }
                    for i in i..n {
                        out_band[i * rows + r] = dot(r, t0 + i);
                    }
                }
            }
        });
}
// ANCHOR_END: prefill

/// Rows per tile for [`prefill`] when a row unpacks to `bytes`: about 16 kB, a multiple of four
/// (the kernels take rows four at a time), 4 to 32 rows.
pub fn tile_rows(bytes: usize) -> usize {
    ((16_384 / bytes.max(1) + 2) / 4 * 4).clamp(4, 32)
}

/// [`prefill`] for a Q4_0, Q5_0 or Q4_1 matrix of `rows` rows (`row_bytes(r)`), its tokens'
/// activations interleaved by `octs`.
#[allow(clippy::too_many_arguments)]
pub fn prefill32<'w>(
    kk: &dyn ManyTokens,
    format: Format,
    out: &mut [f32],
    rows: usize,
    seq: usize,
    row_bytes: impl Fn(usize) -> &'w [u8] + Sync,
    octs: impl Fn(usize) -> Eights + Sync,
    dot4: impl Fn(usize, usize) -> [f32; 4] + Sync,
    dot: impl Fn(usize, usize) -> f32 + Sync,
) {
    let blocks = row_bytes(0).len() / format.block_bytes();
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
        octs,
        dot4,
        dot,
    );
}

/// [`prefill32`] for rows that `unpack(rows, into)` unpacks from wherever they are
/// (a [`crate::matrix::Packed`] matrix's groups), `blocks` blocks a row.
#[allow(clippy::too_many_arguments)]
pub fn prefill_unpacked32(
    kk: &dyn ManyTokens,
    format: Format,
    out: &mut [f32],
    (rows, seq, blocks): (usize, usize, usize),
    unpack: impl Fn(Range<usize>, &mut Rows32) + Sync,
    octs: impl Fn(usize) -> Eights + Sync,
    dot4: impl Fn(usize, usize) -> [f32; 4] + Sync,
    dot: impl Fn(usize, usize) -> f32 + Sync,
) {
    prefill(
        out,
        rows,
        seq,
        tile_rows(40 * blocks), // 32 quants, d and m a block
        octs,
        unpack,
        |u, i, a, out| match out {
            [out] => *out = kk.dot8_row32(format, u.row(i), a),
            out => {
                let rows = std::array::from_fn(|j| u.row(i + j));
                out.copy_from_slice(&kk.dot8x4_row32(format, rows, a));
            }
        },
        dot4,
        dot,
    );
}
