//! The loops that every product's driver shares: rows four at a time, and a prefill's bands
//! of tokens against blocks of rows. They call only the closures they are handed.

use rayon::prelude::*;

/// `out[i]` = row `r0 + i`'s output: four rows at a time (`four(r)` gives rows `r..r + 4`),
/// the last one to three alone (`one(r)`).
pub(super) fn rows_in_fours(
    out: &mut [f32],
    r0: usize,
    four: impl Fn(usize) -> [f32; 4],
    one: impl Fn(usize) -> f32,
) {
    let mut quads = out.chunks_exact_mut(4);
    for (q, o4) in (&mut quads).enumerate() {
        o4.copy_from_slice(&four(r0 + 4 * q));
    }
    let done = out.len() / 4 * 4;
    for (i, o) in out[done..].iter_mut().enumerate() {
        *o = one(r0 + done + i);
    }
}

// ANCHOR: prefill_bands
/// The prefill split of chapter 6, for every matrix kind here: each thread takes a band of
/// at least four tokens and walks the weights in blocks of 64 rows that stay in cache while
/// the band's tokens meet them, four tokens at a time (`dot4(row, first token, prepared)`,
/// where `prepare(first token)` is made once per four tokens of the band), the band's last
/// one to three tokens one at a time (`dot(row, token)`).
pub(super) fn prefill_bands<P: Send>(
    out: &mut [f32],
    rows: usize,
    seq: usize,
    prepare: impl Fn(usize) -> Option<P> + Sync,
    dot4: impl Fn(usize, usize, Option<&P>) -> [f32; 4] + Sync,
    dot: impl Fn(usize, usize) -> f32 + Sync,
) {
    let band = seq.div_ceil(rayon::current_num_threads());
    out.par_chunks_mut(band * rows)
        .enumerate()
        .for_each(|(b, out_band)| {
            let (t0, n) = (b * band, out_band.len() / rows);
            let prepared: Vec<Option<P>> = (0..n / 4).map(|g| prepare(t0 + 4 * g)).collect();
            for r0 in (0..rows).step_by(64) {
                for r in r0..(r0 + 64).min(rows) {
                    for (g, p) in prepared.iter().enumerate() {
                        for (j, v) in dot4(r, t0 + 4 * g, p.as_ref()).into_iter().enumerate() {
                            out_band[(4 * g + j) * rows + r] = v;
                        }
                    }
                    for i in n / 4 * 4..n {
                        out_band[i * rows + r] = dot(r, t0 + i);
                    }
                }
            }
        });
}
// ANCHOR_END: prefill_bands
