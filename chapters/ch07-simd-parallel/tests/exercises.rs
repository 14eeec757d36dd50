#![cfg(feature = "exercises")]
//! One test per exercise, each against a plain scalar computation of the same thing.

use ch01_tensors::random::uniform;
use ch07_simd_parallel::exercises::*;
#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Exercises 1, 2, 4 and 6 are AVX2 code. On a CPU without AVX2 (or not an x86-64 one) their
/// tests say so with this message instead of crashing; `cargo xtask exercises` recognises
/// it and reports those exercises as ones this CPU cannot run.
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
fn ex1_avx2_horizontal_sum() {
    cannot_run(1)
}

#[cfg(not(target_arch = "x86_64"))]
#[test]
fn ex2_q8_0_block_dot() {
    cannot_run(2)
}

#[cfg(not(target_arch = "x86_64"))]
#[test]
fn ex4_round_half_away_from_zero() {
    cannot_run(4)
}

#[cfg(target_arch = "x86_64")]
#[test]
fn ex1_avx2_horizontal_sum() {
    require_avx2(1);
    let mut cases: Vec<[i32; 8]> = (0..100)
        .map(|s| std::array::from_fn(|l| (uniform(8, s)[l] * 1e6) as i32))
        .collect();
    cases.push([i32::MAX, 1, 0, 0, 0, 0, 0, 0]); // wraps to i32::MIN, as the lane additions do
    cases.push([-1, -2, -3, -4, 5, 6, 7, 8]);
    for lanes in cases {
        // SAFETY: `lanes` is 8 readable i32.
        let v = unsafe { _mm256_loadu_si256(lanes.as_ptr().cast()) };
        let want = lanes.iter().fold(0i32, |a, &b| a.wrapping_add(b));
        // SAFETY: AVX2 was checked above.
        let got = unsafe { hsum_i32(v) };
        assert!(
            got == want,
            "the lanes {lanes:?} sum to {want} (wrapping), your horizontal sum gives {got}"
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

#[cfg(target_arch = "x86_64")]
#[test]
fn ex4_round_half_away_from_zero() {
    require_avx2(4);
    let mut values = vec![
        0.5f32,
        1.5,
        2.5,
        -2.5,
        -0.5,
        0.49999997,
        -0.49999997,
        3.0,
        -0.0,
        0.0,
        126.5,
        -126.5,
        8388607.0,
        1e-8,
    ];
    values.extend(uniform(256, 9).iter().map(|v| v * 200.0));
    for chunk in values.chunks(8) {
        let mut lanes = [0.0f32; 8];
        lanes[..chunk.len()].copy_from_slice(chunk);
        // SAFETY: `lanes` is 8 readable f32; AVX2 was checked above.
        let got = unsafe {
            let r = round_away(_mm256_loadu_ps(lanes.as_ptr()));
            let mut out = [0.0f32; 8];
            _mm256_storeu_ps(out.as_mut_ptr(), r);
            out
        };
        for (x, g) in lanes.iter().zip(got) {
            assert!(
                g == x.round(),
                "round_away({x}) gave {g}; rounding half away from zero gives {} (AVX's own rounding sends halves to even, \
                 and floor(x + 0.5) breaks on 0.49999997)",
                x.round()
            );
        }
    }
}

#[test]
fn ex5_eight_tokens_a_token_per_lane() {
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
fn ex6_one_step_of_the_eight_token_kernel() {
    cannot_run(6)
}

#[cfg(target_arch = "x86_64")]
#[test]
fn ex6_one_step_of_the_eight_token_kernel() {
    require_avx2(6);
    for seed in 0..50u64 {
        let (wq, aq, start) = (
            uniform(32, seed),
            uniform(32, 500 + seed),
            uniform(16, 900 + seed),
        );
        let q: [u8; 32] = std::array::from_fn(|j| ((wq[j] + 1.0) * 7.9) as u8); // 0..=15
        let acts: [i8; 32] = std::array::from_fn(|j| (aq[j] * 127.0) as i8);
        let pairs0: [i16; 16] = std::array::from_fn(|j| (start[j] * 1000.0) as i16);
        for k in 0..8 {
            // lane t's two i16: products 0-1 and 2-3 of the weight quants 4k.. with token t's
            let want: [i16; 16] = std::array::from_fn(|j| {
                let (t, half) = (j / 2, j % 2);
                let p = |i: usize| i16::from(q[4 * k + i]) * i16::from(acts[4 * t + i]);
                pairs0[j] + p(2 * half) + p(2 * half + 1)
            });
            // SAFETY: AVX2 was checked above; every load and store is of 32 bytes.
            let got: [i16; 16] = unsafe {
                let v = eights_step(
                    _mm256_loadu_si256(pairs0.as_ptr().cast()),
                    _mm256_loadu_si256(q.as_ptr().cast()),
                    _mm256_loadu_si256(acts.as_ptr().cast()),
                    k,
                );
                let mut out = [0i16; 16];
                _mm256_storeu_si256(out.as_mut_ptr().cast(), v);
                out
            };
            assert!(
                got == want,
                "step {k}: every token must meet the weight quants {}..{} (lane {k} of q, copied \
                 to all eight lanes); expected the 16-bit sums {want:?}, yours are {got:?}",
                4 * k,
                4 * k + 4
            );
        }
    }
}
