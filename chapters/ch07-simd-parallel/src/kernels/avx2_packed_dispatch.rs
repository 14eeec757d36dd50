//! The packed eight-row products on AVX2 by format: a product's tokens, four at a time,
//! through [`super::avx2_packed_q32`]'s kernels (Q4_0, Q4_1, Q5_0) or [`super::avx2_packed_k`]'s
//! (Q4_K, Q6_K).

use super::avx2_packed_k::{packed8_q4_k, packed8_q6_k};
use super::avx2_packed_q32::{packed8_q4_0, packed8_q4_1, packed8_q5_0};
use crate::layout::kquant::KQuant;
use crate::layout::packed_dot::PackedToken;

/// `out[i]`, token `i`'s eight sums, for every token of `tokens`: four at a time through
/// `four`, the last one to three one at a time through `one`, each token's activations
/// taken out of its [`PackedToken`] by `pick`.
fn by_fours<'a, A: Copy>(
    tokens: &[PackedToken<'a>],
    out: &mut [[f32; 8]],
    pick: impl Fn(&PackedToken<'a>) -> A,
    four: impl Fn([A; 4]) -> [[f32; 8]; 4],
    one: impl Fn(A) -> [f32; 8],
) {
    let mut quads = tokens.chunks_exact(4);
    let mut outs = out.chunks_exact_mut(4);
    for (q, o) in (&mut quads).zip(&mut outs) {
        o.copy_from_slice(&four(std::array::from_fn(|j| pick(&q[j]))));
    }
    let done = tokens.len() / 4 * 4;
    for (t, o) in quads.remainder().iter().zip(&mut out[done..]) {
        *o = one(pick(t));
    }
}

/// [`crate::layout::packed_dot::packed8_scalar`]'s contract on AVX2: tokens of one format, four at a time
/// through the four-token kernels.
///
/// # Safety
/// The CPU must have AVX2 and F16C.
pub(super) unsafe fn packed8<'a>(group: &[u8], tokens: &[PackedToken<'a>], out: &mut [[f32; 8]]) {
    assert!(out.len() >= tokens.len(), "an output per token");
    let Some(first) = tokens.first() else { return };
    let other = || -> ! { panic!("one format per product") };
    // SAFETY (every kernel call below): the caller's promise; the kernels check the lengths.
    unsafe {
        match first {
            PackedToken::Q4_0(..) => by_fours(
                tokens,
                out,
                |t| match *t {
                    PackedToken::Q4_0(a, s) => (a, s),
                    PackedToken::Q4_1(_) | PackedToken::Q5_0(_) | PackedToken::K(..) => other(),
                },
                |p| packed8_q4_0::<4>(group, p.map(|p| p.0), p.map(|p| p.1)),
                |(a, s)| packed8_q4_0::<1>(group, [a], [s])[0],
            ),
            PackedToken::Q4_1(_) => by_fours(
                tokens,
                out,
                |t| match *t {
                    PackedToken::Q4_1(a) => a,
                    PackedToken::Q4_0(..) | PackedToken::Q5_0(_) | PackedToken::K(..) => other(),
                },
                |a| packed8_q4_1::<4>(group, a),
                |a| packed8_q4_1::<1>(group, [a])[0],
            ),
            PackedToken::Q5_0(_) => by_fours(
                tokens,
                out,
                |t| match *t {
                    PackedToken::Q5_0(a) => a,
                    PackedToken::Q4_0(..) | PackedToken::Q4_1(_) | PackedToken::K(..) => other(),
                },
                |a| packed8_q5_0::<4>(group, a),
                |a| packed8_q5_0::<1>(group, [a])[0],
            ),
            PackedToken::K(_, kquant) => {
                let pick = |t: &PackedToken<'a>| match *t {
                    PackedToken::K(a, q) if q == *kquant => a,
                    PackedToken::K(..)
                    | PackedToken::Q4_0(..)
                    | PackedToken::Q4_1(_)
                    | PackedToken::Q5_0(_) => other(),
                };
                match kquant {
                    KQuant::Q4_K => {
                        let four = |a| packed8_q4_k::<4>(group, a);
                        by_fours(tokens, out, pick, four, |a| {
                            packed8_q4_k::<1>(group, [a])[0]
                        });
                    }
                    KQuant::Q6_K => {
                        let four = |a| packed8_q6_k::<4>(group, a);
                        by_fours(tokens, out, pick, four, |a| {
                            packed8_q6_k::<1>(group, [a])[0]
                        });
                    }
                }
            }
        }
    }
}
