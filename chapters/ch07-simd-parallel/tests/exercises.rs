#![cfg(feature = "exercises")]
//! One test per exercise, each against a plain scalar computation of the same thing.

use ch01_tensors::random::uniform;
use ch07_simd_parallel::exercises::*;
#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Exercises 1, 2 and 4 are AVX2 code. On a CPU without AVX2 (or not an x86-64 one) their
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
