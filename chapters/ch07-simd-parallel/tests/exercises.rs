#![cfg(feature = "exercises")]
//! One test per exercise, each against a plain scalar computation of the same thing.

use ch01_tensors::random::uniform;
use ch06_quantization::blocks::BlockQ8_0;
use ch07_simd_parallel::exercises::*;
#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Exercises 2 and 5 are AVX2 code. On a CPU without AVX2 (or not an x86-64 one) their
/// tests say so with this message instead of crashing; `cargo xtask exercises` recognises
/// it and reports those exercises as ones this CPU cannot run. Exercise 7's test says the
/// same, in its own words, where there is no arena of huge pages to compare with.
fn cannot_run(n: u32) -> ! {
    panic!(
        "cannot run on this CPU: exercise {n} is AVX2 code, and this CPU has no AVX2 \
         (x86-64 CPUs have it since 2013)"
    )
}

#[cfg(target_arch = "x86_64")]
fn require_avx2(n: u32) {
    if !is_x86_feature_detected!("avx2") {
        cannot_run(n);
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[test]
fn ex2_q8_0_block_dot() {
    cannot_run(2)
}

#[test]
fn ex1_the_eight_lane_f32_sum_in_two_halves() {
    let dot = ch06_quantization::kernels::dot_f32_lanes;
    let mut cases: Vec<(Vec<f32>, Vec<f32>)> = Vec::new();
    for n in 0..41 {
        for (seed, scale) in [(1u64, 1e-3f32), (2, 1.0), (3, 1e3)] {
            let a: Vec<f32> = uniform(n, 10 * n as u64 + seed)
                .iter()
                .map(|v| v * scale)
                .collect();
            let b: Vec<f32> = uniform(n, 1000 + n as u64 + seed).to_vec();
            cases.push((a, b));
        }
    }
    // lanes 0 and 1 cancel only if added first: the wrong pairing gives another number
    cases.push((vec![1e8, 1.0, -1e8, 1.0, 1.0, 1.0, 1.0, 1.0], vec![1.0; 8]));
    for (a, b) in cases {
        let (got, want) = (dot_f32_two_halves(&a, &b), dot(&a, &b));
        assert!(
            got.to_bits() == want.to_bits(),
            "length {}: the two-register sum is {got:e}, chapter 6's eight lanes give {want:e}: \
             the lanes or the final additions are in another order",
            a.len()
        );
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn ex2_q8_0_block_dot() {
    require_avx2(2);
    let mut cases: Vec<([i8; 32], [i8; 32])> = (0..200)
        .map(|s| {
            let (w, a) = (uniform(32, s), uniform(32, 1000 + s));
            (
                std::array::from_fn(|j| (w[j] * 127.0) as i8),
                std::array::from_fn(|j| (a[j] * 127.0) as i8),
            )
        })
        .collect();
    cases.push(([-128; 32], [127; 32])); // |-128| must be read as 128, unsigned
    cases.push(([127; 32], [-127; 32]));
    cases.push(([0; 32], [5; 32]));
    for (i, (w, a)) in cases.iter().enumerate() {
        let want: i32 = w
            .iter()
            .zip(a)
            .map(|(&x, &y)| i32::from(x) * i32::from(y))
            .sum();
        // SAFETY: AVX2 was checked above.
        let got = unsafe { dot_q8_0_block(w, a) };
        assert!(
            got == want,
            "block {i}: Σ w·a is {want}, yours is {got}{}",
            if w[0] == -128 {
                " (a weight of −128: after the sign trick its byte 0x80 must count as +128)"
            } else {
                ""
            }
        );
    }
}

#[test]
fn ex3_rows_across_threads() {
    for &(rows, cols) in &[(1, 8), (7, 33), (64, 576), (10, 3)] {
        let (w, x) = (uniform(rows * cols, 5), uniform(cols, 6));
        let want: Vec<f32> = (0..rows)
            .map(|r| ch01_tensors::ops::dot(&w[r * cols..(r + 1) * cols], &x))
            .collect();
        for threads in [1, 2, 3, 7, 100] {
            let mut got = vec![f32::NAN; rows];
            matvec_rows_parallel(&mut got, &w, &x, threads);
            if let Some(r) = (0..rows).find(|&r| got[r].to_bits() != want[r].to_bits()) {
                panic!(
                    "{rows} rows over {threads} threads: row {r} is {}, one thread gives {} (every row must be written, \
                     by one dot product, whatever the split)",
                    got[r], want[r]
                );
            }
        }
    }
}

#[test]
fn ex4_eight_tokens_a_token_per_lane() {
    let tokens: Vec<[i8; 32]> = (0..8)
        .map(|t| std::array::from_fn(|j| (t * 32 + j) as i8)) // every quant says where it is from
        .collect();
    let got = interleave_eight(std::array::from_fn(|t| &tokens[t]));
    for k in 0..8 {
        for t in 0..8 {
            let want = &tokens[t][4 * k..4 * k + 4];
            assert!(
                got[k][t] == want,
                "step {k}, lane {t} should hold token {t}'s quants {}..{} ({want:?}), yours \
                 holds {:?}",
                4 * k,
                4 * k + 4,
                got[k][t]
            );
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[test]
fn ex5_the_eight_row_float_step() {
    cannot_run(5)
}

/// Eight Q8_0 rows of `nb` blocks as the file stores them, and one token's Q8_0 blocks, from
/// chapter 6's quantizer; scales spread over many binades, so the rounding order shows.
fn q8_0_rows_and_token(nb: usize, seed: u64) -> (Vec<Vec<u8>>, Vec<BlockQ8_0>) {
    use ch06_quantization::quantize::quantize_q8_0;
    let block = |x: &[f32]| quantize_q8_0(x.try_into().expect("32 values"));
    let rows = (0..8u64)
        .map(|r| {
            let x = uniform(32 * nb, seed * 10 + r);
            let mut row = vec![0u8; nb * BlockQ8_0::BYTES];
            for (b, (xb, out)) in x
                .chunks_exact(32)
                .zip(row.chunks_exact_mut(BlockQ8_0::BYTES))
                .enumerate()
            {
                let scale = 2f32.powi((b as i32 % 9) - 4) * (1.0 + r as f32 / 7.0);
                let xs: Vec<f32> = xb.iter().map(|v| v * scale).collect();
                block(&xs).write(out.try_into().expect("34 bytes"));
            }
            row
        })
        .collect();
    let a = uniform(32 * nb, seed * 10 + 9);
    (rows, a.chunks_exact(32).map(block).collect())
}

#[cfg(target_arch = "x86_64")]
#[test]
fn ex5_the_eight_row_float_step() {
    if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("f16c")) {
        cannot_run(5);
    }
    for (nb, seed) in [(1, 1), (18, 2), (40, 3)] {
        let (rows, a) = q8_0_rows_and_token(nb, seed);
        // SAFETY (every intrinsic below): AVX2 and F16C were checked above; loads and stores
        // are of eight lanes from and to eight-lane arrays.
        let mut acc = unsafe { _mm256_setzero_ps() };
        for (b, ab) in a.iter().enumerate() {
            let w: Vec<BlockQ8_0> = rows
                .iter()
                .map(|row| {
                    let at = b * BlockQ8_0::BYTES;
                    BlockQ8_0::from_bytes(row[at..at + BlockQ8_0::BYTES].try_into().expect("34"))
                })
                .collect();
            let sumi: [i32; 8] = std::array::from_fn(|r| {
                w[r].qs
                    .iter()
                    .zip(&ab.qs)
                    .map(|(&x, &y)| i32::from(x) * i32::from(y))
                    .sum()
            });
            let d: [u16; 8] = std::array::from_fn(|r| w[r].d);
            acc = unsafe {
                let s = _mm256_loadu_si256(sumi.as_ptr().cast());
                eight_rows_step(acc, s, &d, ab.d)
            };
        }
        let mut got = [0f32; 8];
        unsafe { _mm256_storeu_ps(got.as_mut_ptr(), acc) };
        for (r, row) in rows.iter().enumerate() {
            let want = ch06_quantization::dot::dot_q8_0_q8_0(row, &a);
            assert!(
                got[r].to_bits() == want.to_bits(),
                "row {r} after {nb} blocks: your lane holds {}, chapter 6's dot_q8_0_q8_0 gives \
                 {want} (each block must add sumi · (d · d_a), the scales multiplied first, in \
                 block order)",
                got[r]
            );
        }
    }
}

#[test]
fn ex6_a_packed_group_s_block() {
    use ch06_quantization::Format;
    use ch06_quantization::blocks::BlockQ4_0;
    use ch06_quantization::quantize::quantize_q4_0;
    use ch07_simd_parallel::layout::packed::Packed;
    let (nb, bb) = (5, BlockQ4_0::BYTES);
    let x = uniform(8 * 32 * nb, 77);
    let mut src = vec![0u8; 8 * nb * bb];
    for (xb, out) in x.chunks_exact(32).zip(src.chunks_exact_mut(bb)) {
        quantize_q4_0(xb.try_into().expect("32"), out.try_into().expect("18"));
    }
    let packed = Packed::new(Format::Q4_0, 8, 32 * nb, &src).expect("eight whole rows");
    let group = packed.group(0);
    for b in 0..nb {
        let rows: [&[u8; 18]; 8] = std::array::from_fn(|r| {
            let at = (r * nb + b) * bb;
            src[at..at + bb].try_into().expect("18 bytes")
        });
        let got = pack_q4_0_block(rows);
        let want = &group[b * 144..(b + 1) * 144];
        if let Some(i) = (0..144).find(|&i| got[i] != want[i]) {
            let place = if i < 16 {
                format!("the scale of row {}", i / 2)
            } else {
                let (c, r, k) = ((i - 16) / 32, (i - 16) % 32 / 4, (i - 16) % 4);
                format!("chunk {c}, lane {r}: nibble byte {} of row {r}", 4 * c + k)
            };
            panic!(
                "block {b}, byte {i} ({place}) should be {:#04x}, yours is {:#04x}",
                want[i], got[i]
            );
        }
    }
}

#[test]
fn ex7_where_the_arena_puts_each_copy() {
    use ch07_simd_parallel::huge::{Arena, HUGE_PAGE};
    let cap = 3 * HUGE_PAGE;
    let lens = [
        100,
        HUGE_PAGE,
        5,
        0,
        64,
        2 * HUGE_PAGE,
        usize::MAX,
        HUGE_PAGE / 2,
        1,
        HUGE_PAGE,
    ];
    let Some(arena) = Arena::new(cap) else {
        panic!(
            "cannot run on this CPU: exercise 7 compares with the arena of huge pages, which \
             this machine does not map (not Linux, or LLM_BOOK_HUGE=0)"
        );
    };
    let pieces: Vec<_> = lens.iter().map(|&len| arena.take(len)).collect();
    let base = pieces[0]
        .as_ref()
        .expect("the first piece fits")
        .as_ref()
        .as_ptr() as usize;
    let want: Vec<Option<usize>> = pieces
        .iter()
        .map(|p| p.as_ref().map(|p| p.as_ref().as_ptr() as usize - base))
        .collect();
    let got = arena_offsets(&lens, cap);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            g == w,
            "request {i} ({} bytes, in an arena of {cap}): the arena gives {w:?}, you \
             give {g:?} (a piece after another starts at its end rounded up to 64 bytes; one \
             that does not fit is None and moves nothing)",
            lens[i]
        );
    }
    assert!(
        got.len() == lens.len(),
        "one answer per request: {} requests, {} answers",
        lens.len(),
        got.len()
    );
}
