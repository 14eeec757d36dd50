//! What the binary measures: the machine's read bandwidth, each kernel's throughput, and
//! end-to-end prefill and decode in llama-bench's terms.
//!
//! - **pp512**: tokens per second of one 512-token prefill from an empty cache;
//! - **tg128**: tokens per second of 128 decode steps of one token each, from an empty cache
//!   (llama-bench generates from an empty context too).
//!
//! Every figure is the median of several runs (the read bandwidth: the best), each run in a rayon pool of exactly the
//! requested number of threads.

use std::sync::Arc;
use std::time::Instant;

use ch05_kv_cache::KvCache;
use ch06_quantization::forward::QEngine;
use ch06_quantization::matrix::Q32;
use ch06_quantization::{Bytes, Format, Kernels, QMatrix, QModel, ScaleRule};
use rayon::prelude::*;
use serde::Serialize;

use crate::huge::Arena;
use crate::kernels::ManyTokens;
use crate::pool::in_pool;
use crate::stats::median;

// ANCHOR: bandwidth
/// Read bandwidth in GB/s: the threads sum a 256 MiB buffer (far larger than any cache),
/// each its own contiguous part; the best of `runs`. The buffer is on huge pages where the
/// OS gives them ([`crate::huge`]), as chapter 8's packed weights are: the ceiling is what
/// the memory streams at its best.
pub fn read_bandwidth(threads: usize, runs: usize) -> Result<f64, String> {
    const BYTES: usize = 256 << 20;
    let mut piece = Arena::new(BYTES).and_then(|a| a.take(BYTES));
    let mut heap: Vec<u64>;
    let words: &mut [u64] = match &mut piece {
        // SAFETY: any eight bytes are a u64; the piece starts on a huge page, so the middle
        // part is all of it
        Some(p) => unsafe { p.as_mut_slice().align_to_mut::<u64>().1 },
        None => {
            heap = vec![0; BYTES / 8];
            &mut heap
        }
    };
    words
        .iter_mut()
        .enumerate()
        .for_each(|(i, w)| *w = i as u64); // written: really mapped
    let buf: &[u64] = words;
    in_pool(threads, || {
        let mut best = 0.0f64;
        for _ in 0..runs {
            let start = Instant::now();
            let part = buf.len().div_ceil(threads);
            let total: u64 = buf
                .par_chunks(part)
                .map(sum_words)
                .reduce(|| 0, u64::wrapping_add);
            std::hint::black_box(total);
            best = best.max(BYTES as f64 / start.elapsed().as_secs_f64() / 1e9);
        }
        best
    })
}
// ANCHOR_END: bandwidth

/// The wrapping sum of `words`, as fast as loads allow: 256-bit loads into four independent
/// accumulators where the CPU has AVX2 (the baseline's 128-bit loads leave bandwidth unused),
/// eight scalar accumulators otherwise.
fn sum_words(words: &[u64]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if crate::Isa::Avx2.supported() {
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { sum_words_avx2(words) };
    }
    let mut acc = [0u64; 8];
    for w in words.as_chunks::<8>().0 {
        for l in 0..8 {
            acc[l] = acc[l].wrapping_add(w[l]);
        }
    }
    acc.iter().fold(0u64, |a, &b| a.wrapping_add(b))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn sum_words_avx2(words: &[u64]) -> u64 {
    use std::arch::x86_64::*;
    let mut acc = [_mm256_setzero_si256(); 4];
    for w in words.as_chunks::<16>().0 {
        for (k, acc) in acc.iter_mut().enumerate() {
            // SAFETY: `w` is 16 readable u64; 4k + 4 ≤ 16.
            *acc = _mm256_add_epi64(*acc, unsafe {
                _mm256_loadu_si256(w.as_ptr().add(4 * k).cast())
            });
        }
    }
    let mut lanes = [0u64; 16];
    for (k, a) in acc.iter().enumerate() {
        // SAFETY: `lanes[4k..4k + 4]` is 4 writable u64.
        unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().add(4 * k).cast(), *a) };
    }
    lanes.iter().fold(0u64, |a, &b| a.wrapping_add(b))
}

/// One kernel's throughput on a matrix-vector product too large for the caches.
#[derive(Clone, Debug, Serialize)]
pub struct KernelRate {
    pub isa: &'static str,
    pub format: &'static str,
    pub threads: usize,
    /// Weight bytes streamed per second, GB/s.
    pub gb_s: f64,
    /// Multiply-adds per second, in billions.
    pub gmac_s: f64,
}

/// `out = W·x` for a `(rows, 576)` matrix of `format` sized to ~`mib` MiB, timed: the median
/// of `runs` products. A block format's bytes are moved onto huge pages where the OS gives
/// them ([`crate::huge`]), as the bandwidth buffer's are.
pub fn kernel_rate(
    k: &dyn Kernels,
    format: Format,
    threads: usize,
    mib: usize,
    runs: usize,
) -> Result<KernelRate, String> {
    let cols = 576;
    let rows = (mib << 20) / format.row_bytes(cols);
    let w: Vec<f32> = ch01_tensors::random::uniform(rows * cols, 7);
    let m = on_huge_pages(QMatrix::quantize(
        &w,
        rows,
        cols,
        format,
        ScaleRule::Absmax,
    )?);
    drop(w);
    let x = ch01_tensors::random::uniform(cols, 8);
    let mut out = vec![0.0f32; rows];
    let mut times = in_pool(threads, || {
        m.matmul_with(k, &mut out, &x, 1); // warm-up: page in, spin up the pool
        (0..runs)
            .map(|_| {
                let start = Instant::now();
                m.matmul_with(k, &mut out, &x, 1);
                start.elapsed().as_secs_f64()
            })
            .collect::<Vec<_>>()
    })?;
    let t = median(&mut times);
    Ok(KernelRate {
        isa: k.name(),
        format: format.name(),
        threads,
        gb_s: m.bytes() as f64 / t / 1e9,
        gmac_s: (rows * cols) as f64 / t / 1e9,
    })
}

/// `m`'s blocks copied into an arena of huge pages, or `m` as it is (not a block format, or
/// no arena).
fn on_huge_pages(m: QMatrix) -> QMatrix {
    if matches!(m.format(), Format::F32 | Format::Int8) {
        return m;
    }
    let bytes = m.rows_bytes(0, m.rows());
    let Some(mut piece) = Arena::new(bytes.len()).and_then(|a| a.take(bytes.len())) else {
        return m;
    };
    piece.as_mut_slice().copy_from_slice(bytes);
    let len = bytes.len();
    Bytes::slice_of(Arc::new(piece), 0, len)
        .and_then(|b| QMatrix::from_blocks(m.format(), m.rows(), m.cols(), b).ok())
        .unwrap_or(m)
}

/// End-to-end speed, in llama-bench's terms.
#[derive(Clone, Debug, Serialize)]
pub struct EndToEnd {
    pub isa: &'static str,
    pub threads: usize,
    pub pp512_tok_s: f64,
    pub tg128_tok_s: f64,
}

// ANCHOR: e2e
/// pp512 and tg128 of `model` with kernels `k` in a pool of `threads` threads: medians of
/// `runs` runs of each, after one unmeasured run when `warm_up`.
pub fn end_to_end(
    model: &QModel,
    k: &'static dyn Kernels,
    threads: usize,
    runs: usize,
    warm_up: bool,
) -> Result<EndToEnd, String> {
    let engine = QEngine::with_kernels(model, k);
    let vocab = model.config.vocab_size as u64;
    // Token ids spread over the vocabulary, as llama-bench's random prompt is.
    let prompt: Vec<u32> = (0..512u64)
        .map(|i| ((i * 7919 + 13) % vocab) as u32)
        .collect();
    let err = |e: ch06_quantization::Error| e.to_string();
    in_pool(threads, || -> Result<EndToEnd, String> {
        let (mut pp, mut tg) = (Vec::new(), Vec::new());
        let first = usize::from(!warm_up);
        for run in first..=runs {
            let mut cache = KvCache::new(engine.layout(), 512);
            let start = Instant::now();
            engine.forward(&mut cache, &prompt, 0).map_err(err)?;
            let pp_s = start.elapsed().as_secs_f64();
            let mut cache = KvCache::new(engine.layout(), 128);
            let start = Instant::now();
            let mut next = prompt[0];
            for pos in 0..128 {
                let logits = engine.forward(&mut cache, &[next], pos).map_err(err)?;
                next = ch04_forward::model::argmax(&logits) as u32;
            }
            let tg_s = start.elapsed().as_secs_f64();
            if run > 0 {
                // run 0 (if any) warms the caches and the page tables
                pp.push(512.0 / pp_s);
                tg.push(128.0 / tg_s);
            }
        }
        Ok(EndToEnd {
            isa: k.name(),
            threads,
            pp512_tok_s: median(&mut pp),
            tg128_tok_s: median(&mut tg),
        })
    })?
}
// ANCHOR_END: e2e

/// One thread's prefill products of a SmolLM2-sized Q4_1 matrix (1536 × 576, its gate and
/// up) with 64 tokens, in billions of multiply-adds a second: chapter 6's product on kernels
/// `k` (four tokens a dot, one shared horizontal add), and the same products eight tokens a
/// register ([`crate::layout::eights`], each row's blocks unpacked as they are met). The
/// medians of `runs`.
pub fn prefill_rates(k: &dyn ManyTokens, runs: usize) -> Result<(f64, f64), String> {
    use crate::layout::eights::Eights;
    use ch06_quantization::matrix::Activations;
    let (rows, cols, seq) = (1536, 576, 64);
    let w = ch01_tensors::random::uniform(rows * cols, 11);
    let m = QMatrix::quantize(&w, rows, cols, Format::Q4_1, ScaleRule::Absmax)?;
    let x = ch01_tensors::random::uniform(seq * cols, 12);
    let mut out = vec![0.0f32; seq * rows];
    let macs = (rows * cols * seq) as f64;
    let (mut four, mut eight) = in_pool(1, || {
        let (mut four, mut eight) = (Vec::new(), Vec::new());
        for _ in 0..runs + 1 {
            let start = Instant::now();
            m.matmul_with(k, &mut out, &x, seq);
            four.push(macs / start.elapsed().as_secs_f64() / 1e9);
            let start = Instant::now();
            let Activations::Q8_1(a) = m.quantize_activations(k, &x) else {
                unreachable!("Q4_1 takes Q8_1 activations")
            };
            let nb = cols / 32;
            for g in 0..seq / 8 {
                let e = Eights::from_q8_1(std::array::from_fn(|t| &a[(8 * g + t) * nb..][..nb]));
                for r in 0..rows {
                    let lanes = k.dot8_raw32(Q32::Q4_1, m.row_bytes(r), &e);
                    for (t, v) in lanes.into_iter().enumerate() {
                        out[(8 * g + t) * rows + r] = v;
                    }
                }
            }
            eight.push(macs / start.elapsed().as_secs_f64() / 1e9);
        }
        (four.split_off(1), eight.split_off(1)) // the first run warms up
    })?;
    Ok((median(&mut four), median(&mut eight)))
}
