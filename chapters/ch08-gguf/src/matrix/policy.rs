//! The choices a product makes that are policy, not kernels: which prefill layout a level
//! with both uses, whether matrices are packed at load, and the fewest bytes a decode task
//! reads. Read once, from the environment where a reader can override them, and from the
//! kernels' capabilities.

use ch07_simd_parallel::kernels::ManyTokens;

/// The two layouts a multi-token prefill can use on a CPU with AVX-512 VNNI: eight tokens to
/// a register, one per 32-bit lane ([`ch07_simd_parallel::layout::eights`], the layout every SIMD level has), or
/// four tokens' blocks interleaved so that a lane follows one (block, token) pair
/// ([`ch07_simd_parallel::layout::quads::ActQuads`], VNNI only). Both give the same bits.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PrefillLayout {
    Eights,
    Quads,
}

/// The layout `LLM_BOOK_PREFILL=eights|quads` names, read once; eights unless told: on the
/// VNNI machines the book was measured on the eights were the faster prefill, so VNNI
/// machines take them too, and the quads stay for comparison (`LLM_BOOK_PREFILL=quads`).
pub fn prefill_layout() -> PrefillLayout {
    static LAYOUT: std::sync::OnceLock<PrefillLayout> = std::sync::OnceLock::new();
    *LAYOUT.get_or_init(|| match std::env::var("LLM_BOOK_PREFILL").as_deref() {
        Ok("quads") => PrefillLayout::Quads,
        Ok("eights") | Err(_) => PrefillLayout::Eights,
        Ok(other) => {
            eprintln!(
                "warning: LLM_BOOK_PREFILL={other:?} is neither eights nor quads; using eights"
            );
            PrefillLayout::Eights
        }
    })
}

// ANCHOR: packs
/// Whether the model's Q4_0, Q4_1, Q5_0, Q4_K and Q6_K matrices are interleaved eight rows at a time
/// when they load ([`ch07_simd_parallel::layout::packed::Packed`]): on both x86 SIMD levels,
/// whose one-token kernels read eight interleaved rows faster than eight rows of the file's
/// layout (the AVX-512 level runs the AVX2 packed kernels, so its decode is never below the
/// level under it); not on the scalar level. `LLM_BOOK_PACK=1` or `0` decides instead, to
/// compare the two layouts on one machine. Read once.
pub fn packs() -> bool {
    static PACKS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PACKS.get_or_init(|| match std::env::var("LLM_BOOK_PACK").as_deref() {
        Ok("1") => true,
        Ok("0") => false,
        other => {
            if let Ok(v) = other {
                eprintln!("warning: LLM_BOOK_PACK={v:?} is neither 1 nor 0; deciding by the CPU");
            }
            ch07_simd_parallel::Isa::from_env().is_ok_and(|isa| {
                matches!(
                    isa,
                    ch07_simd_parallel::Isa::Avx2 | ch07_simd_parallel::Isa::Avx512
                )
            })
        }
    })
}
// ANCHOR_END: packs

/// Whether a prefill on `kk` takes VNNI's interleaved four-token kernels.
pub fn use_quads(kk: &dyn ManyTokens) -> bool {
    kk.has_quads() && prefill_layout() == PrefillLayout::Quads
}

/// Whether a prefill on `kk` takes the eight-token kernels (every SIMD level, unless the
/// quads were asked for).
pub fn use_eights(kk: &dyn ManyTokens) -> bool {
    kk.has_eights() && !use_quads(kk)
}

/// The fewest bytes of weights a decode task reads: `LLM_BOOK_TASK_BYTES=N` (1 KiB to 64 MiB),
/// to race other floors against the default on a machine with many cores (at sixteen threads
/// a higher floor leaves SmolLM2's 576-wide products on fewer threads).
pub const TASK_BYTES_VAR: &str = "LLM_BOOK_TASK_BYTES";

/// The default floor: handing a task to another thread costs about as much as that thread
/// reading a few tens of kilobytes, so a smaller product is not spread over more threads
/// than it can keep busy. On two threads every product of a model's layers has two tasks or
/// more, on sixteen SmolLM2's 576-wide products have a few.
pub const TASK_BYTES: usize = 32 << 10;

/// The floor `value` names (`None` or empty: [`TASK_BYTES`]).
pub fn parse_task_bytes(value: Option<&str>) -> Result<usize, String> {
    const RANGE: std::ops::RangeInclusive<usize> = (1 << 10)..=(64 << 20);
    match value {
        None | Some("") => Ok(TASK_BYTES),
        Some(v) => v.parse().ok().filter(|n| RANGE.contains(n)).ok_or_else(|| {
            format!(
                "{TASK_BYTES_VAR}={v:?}: the fewest bytes of weights a decode task reads, a \
                 whole number from {} to {} (unset: {TASK_BYTES})",
                RANGE.start(),
                RANGE.end()
            )
        }),
    }
}

/// The floor this process runs with, read once from [`TASK_BYTES_VAR`].
pub fn task_bytes() -> Result<usize, String> {
    static FLOOR: std::sync::OnceLock<Result<usize, String>> = std::sync::OnceLock::new();
    FLOOR
        .get_or_init(|| parse_task_bytes(std::env::var(TASK_BYTES_VAR).ok().as_deref()))
        .clone()
}

/// The fewest tokens a band of a prefill's eight-token products takes:
/// `LLM_BOOK_PREFILL_BAND=N` (8 to 4096). Each band unpacks every tile of the weights it
/// meets, so a band a thread at sixteen threads unpacks each tile sixteen times, for 32
/// tokens each. Unset, there are at most [`MOST_BANDS`] bands of at least [`LEAST_BAND`]
/// tokens (fewer where they would not share the threads evenly), each band's rows shared by
/// the rest of the threads; set, the bands are at least `N` tokens long (`8`: a band a
/// thread, whatever the count).
pub const PREFILL_BAND_VAR: &str = "LLM_BOOK_PREFILL_BAND";

/// The band length `value` names (`None` or empty: `None`, a band a thread).
pub fn parse_prefill_band(value: Option<&str>) -> Result<Option<usize>, String> {
    match value {
        None | Some("") => Ok(None),
        Some(v) => v
            .parse()
            .ok()
            .filter(|n| (8..=4096).contains(n))
            .map(Some)
            .ok_or_else(|| {
                format!(
                    "{PREFILL_BAND_VAR}={v:?}: the fewest tokens a prefill band takes, a whole \
                     number from 8 to 4096 (unset: a band a thread, at most four of at least \
                     {LEAST_BAND} tokens)"
                )
            }),
    }
}

/// The band length this process runs with, read once from [`PREFILL_BAND_VAR`].
pub fn prefill_band() -> Result<Option<usize>, String> {
    static BAND: std::sync::OnceLock<Result<Option<usize>, String>> = std::sync::OnceLock::new();
    BAND.get_or_init(|| parse_prefill_band(std::env::var(PREFILL_BAND_VAR).ok().as_deref()))
        .clone()
}

/// How a prefill of `seq` tokens on `threads` threads is cut: `(bands of tokens, runs of
/// rows in each band)`, from [`prefill_band`] (checked when the engine was made).
pub fn prefill_split(seq: usize, threads: usize) -> (usize, usize) {
    split_for(prefill_band().ok().flatten(), seq, threads)
}

/// The most bands of tokens a prefill's product is cut into unless [`PREFILL_BAND_VAR`] says
/// otherwise. On 2 cores running 16 threads, a band a thread (32 tokens) gave 0.77× the 2
/// threads' pp512 on the 1B shape, four bands of four runs of rows 0.95–0.99×.
pub const MOST_BANDS: usize = 4;

/// The fewest tokens a band takes unless [`PREFILL_BAND_VAR`] says otherwise: a shorter
/// prompt is one band whose rows all the threads share, so each weight is read once. On 2
/// cores and 2 threads, prompts of 16 to 48 tokens as one band against two (or against
/// rows, under 32 tokens), three alternating rounds: about 1.1× the prefill's tok/s on
/// SmolLM2, Gemma-3 and the 1B-shaped files (0.92–1.41×), level from 64 tokens on.
pub const LEAST_BAND: usize = 32;

/// [`prefill_split`] for a given band length (`None`: the most bands up to [`MOST_BANDS`]
/// of at least [`LEAST_BAND`] tokens that divide the threads, so that every band has as
/// many runs of rows).
pub fn split_for(band: Option<usize>, seq: usize, threads: usize) -> (usize, usize) {
    let threads = threads.max(1);
    let bands = match band {
        None => (1..=MOST_BANDS.min(threads).min(seq / LEAST_BAND).max(1))
            .rev()
            .find(|&b| threads.is_multiple_of(b))
            .unwrap_or(1),
        Some(band) => (seq / band).clamp(1, threads),
    };
    (bands, (threads / bands).max(1))
}

/// The most tokens of a prefill of `seq` on `threads` threads that [`prefill_split`] cuts
/// into bands of whole eights: what a packed matrix gives its eight-token kernels
/// ([`super::prefill::prefill`] has no product of a single token for it), the rest going by
/// rows.
pub fn whole_eights(seq: usize, threads: usize) -> usize {
    whole_eights_for(prefill_band().ok().flatten(), seq, threads)
}

/// [`whole_eights`] for a given band length: the largest multiple of eight whose bands
/// (`m.div_ceil(bands)` tokens each, the last one what is left) are whole eights.
pub fn whole_eights_for(band: Option<usize>, seq: usize, threads: usize) -> usize {
    (0..=seq / 8)
        .rev()
        .map(|e| 8 * e)
        .find(|&m| m.div_ceil(split_for(band, m, threads).0).is_multiple_of(8))
        .unwrap_or(0)
}

/// What a product's tokens are counted per when it chooses between splitting its rows
/// and splitting its tokens ([`super::FEW`] of them at the least): `LLM_BOOK_FEW_PER=band`
/// (the default) or `thread`. A prefill cut into bands reads every weight once a band, and
/// a band has about [`LEAST_BAND`] tokens or more unless it is the only one, so counted per
/// band a product goes by rows only under 16 tokens; counted per thread, a 128-token prompt
/// on sixteen threads would have 8 a thread and go by rows, four tokens at a time.
/// `thread` keeps the count per thread (sixteen tokens a thread before a product is split by
/// tokens), to race the two where the cores are.
pub const FEW_PER_VAR: &str = "LLM_BOOK_FEW_PER";

/// What [`FEW_PER_VAR`] names.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum FewPer {
    Band,
    Thread,
}

/// The count `value` names (`None` or empty: [`FewPer::Band`]).
pub fn parse_few_per(value: Option<&str>) -> Result<FewPer, String> {
    match value {
        None | Some("" | "band") => Ok(FewPer::Band),
        Some("thread") => Ok(FewPer::Thread),
        Some(v) => Err(format!(
            "{FEW_PER_VAR}={v:?}: band or thread, what a prefill's fewest tokens are counted \
             per (unset: band)"
        )),
    }
}

/// The count this process runs with, read once from [`FEW_PER_VAR`].
pub fn few_per() -> Result<FewPer, String> {
    static PER: std::sync::OnceLock<Result<FewPer, String>> = std::sync::OnceLock::new();
    PER.get_or_init(|| parse_few_per(std::env::var(FEW_PER_VAR).ok().as_deref()))
        .clone()
}

/// How many parts a product of `seq` tokens on `threads` threads is counted in before it
/// may be split by tokens: its prefill's bands ([`prefill_split`]) for a matrix whose
/// prefill is `banded`, otherwise a thread each (a band a thread, or chapter 6's product).
pub fn few_parts(banded: bool, seq: usize, threads: usize) -> usize {
    few_parts_for(
        few_per().unwrap_or(FewPer::Band),
        prefill_band().ok().flatten(),
        banded,
        seq,
        threads,
    )
}

/// [`few_parts`] for a given count and band length.
pub fn few_parts_for(
    per: FewPer,
    band: Option<usize>,
    banded: bool,
    seq: usize,
    threads: usize,
) -> usize {
    match (per, banded) {
        (FewPer::Band, true) => split_for(band, seq, threads).0,
        (FewPer::Band, false) | (FewPer::Thread, _) => threads.max(1),
    }
}

/// Every policy the environment sets, checked: this chapter's task floor, prefill band and
/// count of the fewest tokens, and chapter 7's team
/// ([`ch07_simd_parallel::team::team_policy`]). An engine is not made with a bad value.
pub fn check() -> Result<(), String> {
    task_bytes()?;
    prefill_band()?;
    few_per()?;
    ch07_simd_parallel::team::team_policy()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefill_band_is_a_number_of_tokens_or_an_error_that_says_so() {
        assert_eq!(parse_prefill_band(None), Ok(None));
        assert_eq!(parse_prefill_band(Some("128")), Ok(Some(128)));
        for bad in ["7", "4097", "x", "-1"] {
            let e = parse_prefill_band(Some(bad)).unwrap_err();
            assert!(
                e.contains("from 8 to 4096"),
                "{PREFILL_BAND_VAR}={bad}: {e}"
            );
        }
        // unset: a band a thread up to four threads, then four bands (or three, or one)
        // sharing the rest as runs of rows
        let unset: Vec<_> = [1, 2, 3, 4, 5, 6, 8, 16]
            .map(|t| split_for(None, 512, t))
            .into();
        assert_eq!(
            unset,
            [
                (1, 1),
                (2, 1),
                (3, 1),
                (4, 1),
                (1, 5),
                (3, 2),
                (4, 2),
                (4, 4)
            ]
        );
        // unset, a short prompt: bands of 32 tokens or more, one under 64
        let short: Vec<_> = [
            (2, 63),
            (2, 64),
            (4, 100),
            (4, 128),
            (3, 95),
            (3, 96),
            (16, 64),
        ]
        .map(|(t, seq)| split_for(None, seq, t))
        .into();
        assert_eq!(
            short,
            [(1, 2), (2, 1), (2, 2), (4, 1), (1, 3), (3, 1), (2, 8)]
        );
        assert_eq!(split_for(None, 0, 8), (1, 8));
        // set: bands of at least that many tokens, a band a thread at most
        assert_eq!(split_for(Some(8), 512, 16), (16, 1));
        assert_eq!(split_for(Some(128), 512, 16), (4, 4));
        assert_eq!(split_for(Some(128), 512, 2), (2, 1));
        assert_eq!(split_for(Some(128), 40, 16), (1, 16));
    }

    #[test]
    fn a_packed_prefill_gives_every_band_whole_eights() {
        for band in [
            None,
            Some(8),
            Some(20),
            Some(36),
            Some(64),
            Some(100),
            Some(4096),
        ] {
            for threads in 1..=17 {
                for seq in 0..700 {
                    let m = whole_eights_for(band, seq, threads);
                    let (bands, _) = split_for(band, m, threads);
                    let per = m.div_ceil(bands);
                    assert!(
                        m <= seq && m.is_multiple_of(8) && per.is_multiple_of(8),
                        "band {band:?}, {threads} threads, {seq} tokens: {m} tokens in bands \
                         of {per}, not whole eights"
                    );
                    // none larger would do
                    let next = (m + 8..=seq)
                        .step_by(8)
                        .find(|&n| n.div_ceil(split_for(band, n, threads).0).is_multiple_of(8));
                    assert_eq!(next, None, "band {band:?}, {threads} threads, {seq} tokens");
                }
            }
        }
        // unset, as many bands as threads up to four (one on 5, three on 6): a multiple of
        // eight tokens a band
        assert_eq!(whole_eights_for(None, 300, 16), 288);
        assert_eq!(whole_eights_for(None, 300, 2), 288);
        assert_eq!(whole_eights_for(None, 300, 3), 288);
        assert_eq!(whole_eights_for(None, 300, 5), 296);
        // a band of 36 on 8 threads: 200 tokens are five bands of 40; of 199, 192 would be
        // five bands of 39, 176 four of 44
        assert_eq!(whole_eights_for(Some(36), 200, 8), 200);
        assert_eq!(split_for(Some(36), 192, 8), (5, 1));
        assert_eq!(whole_eights_for(Some(36), 199, 8), 160);
    }

    #[test]
    fn the_fewest_tokens_are_counted_per_band_of_the_prefill() {
        assert_eq!(parse_few_per(None), Ok(FewPer::Band));
        assert_eq!(parse_few_per(Some("thread")), Ok(FewPer::Thread));
        let e = parse_few_per(Some("threads")).unwrap_err();
        assert!(e.contains("band or thread"), "{FEW_PER_VAR}=threads: {e}");
        // the tokens below which a banded product of `seq` goes by rows: 16 a part
        let below = |per, band, threads| {
            (1..=4096)
                .find(|&seq| {
                    seq >= super::super::FEW * few_parts_for(per, band, true, seq, threads)
                })
                .expect("some prompt is long enough")
        };
        // counted per band: a prompt under 64 tokens is one band, so 16 tokens whatever the
        // threads; per thread, 16 tokens a thread
        for t in [1, 2, 3, 4, 5, 6, 8, 12, 16, 64] {
            assert_eq!(below(FewPer::Band, None, t), 16, "{t} threads");
            assert_eq!(below(FewPer::Thread, None, t), 16 * t, "{t} threads");
        }
        // from 16 tokens on, no banded product goes by rows
        for t in 1..=64 {
            for seq in 16..600 {
                let parts = few_parts_for(FewPer::Band, None, true, seq, t);
                assert!(
                    seq >= super::super::FEW * parts,
                    "{seq} tokens, {t} threads"
                );
            }
        }
        // a band of 8 (a band a thread, as before): 16 tokens a thread again
        assert_eq!(below(FewPer::Band, Some(8), 16), 256);
        // a matrix whose prefill is a band a thread (VNNI's quads) counts threads
        assert_eq!(few_parts_for(FewPer::Band, None, false, 64, 16), 16);
    }

    #[test]
    fn a_floor_is_a_number_of_bytes_or_an_error_that_says_so() {
        assert_eq!(parse_task_bytes(None), Ok(TASK_BYTES));
        assert_eq!(parse_task_bytes(Some("")), Ok(TASK_BYTES));
        assert_eq!(parse_task_bytes(Some("65536")), Ok(65536));
        for bad in ["64k", "0", "1023", "67108865", "-5"] {
            let e = parse_task_bytes(Some(bad)).unwrap_err();
            assert!(
                e.contains("from 1024 to 67108864"),
                "{TASK_BYTES_VAR}={bad} should say what it takes: {e}"
            );
        }
    }
}
