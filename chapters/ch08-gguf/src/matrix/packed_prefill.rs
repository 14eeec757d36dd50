//! A packed matrix in a prefill: the eight-token kernels on tiles of rows taken back out of
//! the groups, the last few tokens split by rows.

use ch06_quantization::Kernels;
use ch06_quantization::matrix::{Activations, Packable};
use ch07_simd_parallel::kernels::ManyTokens;
use ch07_simd_parallel::layout::eights::{Eights, Rows32};
use ch07_simd_parallel::layout::eights_k::{EightsK, RowsK};
use ch07_simd_parallel::layout::packed::Packed;

use super::group::split_by_rows;
use super::prefill::{dot16_k, prefill, prefill_unpacked32, tile_rows_k};
use super::types::{Acts, Matrix};

// ANCHOR: packed_prefill
/// A packed matrix in a prefill: chapter 8's eight-token prefill ([`eights`]) for as many
/// tokens as give every band whole eights ([`super::policy::whole_eights`]), its tiles of
/// rows unpacked straight out of the groups (`ManyTokens::unpack_packed32`,
/// `unpack_packed_k`), on `acts`, every token's activations ([`Matrix::quantize_tokens`]);
/// the last few tokens split by rows ([`split_by_rows`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn packed_prefill(
    m: &Matrix,
    p: &Packed,
    k: &dyn Kernels,
    kk: &dyn ManyTokens,
    out: &mut [f32],
    acts: &Acts,
    x: &[f32],
    seq: usize,
) {
    let (rows, cols) = (p.rows, p.cols);
    let main = super::policy::whole_eights(seq, rayon::current_num_threads());
    let every_band_whole = |_, _| -> [f32; 4] { unreachable!("every band is whole eights") };
    let whole = |_, _| -> f32 { unreachable!("every band is whole eights") };
    if main > 0 {
        match p.layout {
            Packable::K(kquant) => {
                // a K-quant: the rows' blocks unpacked as a KMatrix's are (KMatrix::prefill)
                let q8k = |t: usize| match acts {
                    Acts::K(a) => a[t].q8_k(),
                    Acts::Q(_) | Acts::Sums(..) => {
                        unreachable!("quantize made the activations for this matrix")
                    }
                };
                prefill(
                    &mut out[..main * rows],
                    rows,
                    main,
                    tile_rows_k(cols),
                    |t| EightsK::new(std::array::from_fn(|j| q8k(t + j))),
                    |rs, u: &mut RowsK| kk.unpack_packed_k(p, rs, u),
                    |u, i, a, out| dot16_k(kk, kquant, u, i, a, out),
                    every_band_whole,
                    whole,
                );
            }
            Packable::Q32(format) => {
                let nb = cols / 32;
                let eights = |t: usize| match acts {
                    Acts::Sums(a, sums) => Eights::from_q8_0_sums(
                        std::array::from_fn(|j| &a[(t + j) * nb..][..nb]),
                        std::array::from_fn(|j| &sums[(t + j) * nb..][..nb]),
                    ),
                    Acts::Q(Activations::Q8_1(a)) => {
                        Eights::from_q8_1(std::array::from_fn(|j| &a[(t + j) * nb..][..nb]))
                    }
                    Acts::K(a) => Eights::from_q8_0(std::array::from_fn(|j| a[t + j].q8_0())),
                    Acts::Q(Activations::Q8_0(_)) => {
                        unreachable!("quantize made the activations for this matrix")
                    }
                };
                let unpack =
                    |rs: std::ops::Range<usize>, u: &mut Rows32| kk.unpack_packed32(p, rs, u);
                prefill_unpacked32(
                    kk,
                    format,
                    &mut out[..main * rows],
                    (rows, main, nb),
                    unpack,
                    eights,
                    every_band_whole,
                    whole,
                );
            }
        }
    }
    if main < seq {
        // fewer than eight tokens a thread: split by rows (by_rows)
        let tail = vec![(m, &mut out[main * rows..])];
        split_by_rows(k, kk, tail, &x[main * cols..], seq - main);
    }
}
// ANCHOR_END: packed_prefill
