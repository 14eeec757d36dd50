//! The shaders Gemma's steps add, each against chapter 8's CPU code: attention over a
//! sliding window, the GELU gate through chapter 8's f16 table, Gemma-2's soft-cap, RoPE
//! from the table of the layer's base, RMSNorm on every head of Q and K; and that nothing
//! in Gemma-3 is refused.

mod common;

use ch01_tensors::models;
use ch03_attention::{Heads, Pairing};
use ch05_kv_cache::{KvCache, KvLayout, KvStore};
use ch06_quantization::kernels::Scalar;
use ch06_quantization::matrix::ActFormat;
use ch08_gguf::engine::{LayerAttention, LazyRope, attend, gelu_f16};
use ch13_gpu::Gpu;
use ch13_gpu::acts::{self, BLOCK_WORDS};
use ch13_gpu::model::{RopeAngles, unsupported};
use ch13_gpu::ops::{Dispatch, Ops, groups_of_64};
use ch13_gpu::quantize::{Gate, Quantize, QuantizeStep};
use ch13_gpu::random::Rng;
use ch13_gpu::rmsnorm::{NormStep, RmsNorm};
use common::{gpu, max_diff};

/// Runs one dispatch in one submission.
fn run(gpu: &Gpu, d: &Dispatch) {
    gpu.submit_pass("a test's dispatch", |pass| d.record(pass))
        .unwrap_or_else(|e| panic!("{e}"));
}

/// The step's small buffer as `step.rs` writes it for one token: its position, one token,
/// the count of `tables`, a word of padding, then each table's cos and sin.
fn step_buffer(gpu: &Gpu, pos: usize, tables: usize, trig: &[f32]) -> wgpu::Buffer {
    let header = [pos as u32, 1, tables as u32, 0].map(f32::from_bits);
    let mut words = header.to_vec();
    words.extend_from_slice(trig);
    gpu.upload_f32("step", &words, wgpu::BufferUsages::empty())
}

fn bits(gpu: &Gpu, b: &wgpu::Buffer, n: usize) -> Vec<f32> {
    gpu.read_f32(b, n).unwrap()
}

// ANCHOR: window_test
/// A query at position 30 of a layer that sees 8 positions: the GPU's attention reads keys
/// 23..=30, as chapter 8's `attend` with the same window, and without a window all 31. The
/// keys before the window are made to agree with the query strongly, so that reading any
/// of them would change the output by far more than the tolerance. Without a window but
/// with Gemma-2's soft-cap on the scores (a cap of 0.5, below those keys' scores), the output
/// is chapter 8's capped one, and far from the uncapped one.
#[test]
fn attention_sees_only_the_window_and_caps_as_chapter_8_does() {
    let gpu = gpu();
    let ops = Ops::new(&gpu).unwrap();
    let (n_heads, n_kv, hd, capacity, pos) = (4usize, 1usize, 32usize, 40usize, 30usize);
    let heads = Heads {
        n_heads,
        n_kv_heads: n_kv,
        head_dim: hd,
    };
    let scale = 1.0 / (hd as f32).sqrt();
    let mut rng = Rng::new(60);
    let q: Vec<f32> = (0..n_heads * hd).map(|_| rng.signed()).collect();
    let mut cpu_cache = KvCache::new(
        KvLayout {
            n_layers: 1,
            n_kv_heads: n_kv,
            head_dim: hd,
        },
        capacity,
    );
    let mut k_cache = vec![0.0f32; capacity * n_kv * hd]; // (capacity, n_kv_heads, head_dim)
    let mut v_cache = vec![0.0f32; capacity * n_kv * hd];
    let (mut k, mut v) = (Vec::new(), Vec::new());
    for j in 0..=pos {
        // before the window: the first query head's direction, scaled up
        let old = j + 8 <= pos;
        k = (0..hd)
            .map(|d| match old {
                true => 3.0 * q[d] + 0.1 * rng.signed(),
                false => rng.signed(),
            })
            .collect();
        v = (0..hd)
            .map(|_| rng.signed() + if old { 5.0 } else { 0.0 })
            .collect();
        cpu_cache.write(0, j, &k, &v);
        k_cache[j * hd..(j + 1) * hd].copy_from_slice(&k);
        v_cache[j * hd..(j + 1) * hd].copy_from_slice(&v);
    }
    let step = step_buffer(&gpu, pos, 1, &vec![0.0; hd]);
    let up = |name: &str, x: &[f32]| gpu.upload_f32(name, x, wgpu::BufferUsages::empty());
    let (qb, kb, vb) = (up("q", &q), up("k", &k), up("v", &v));
    let empty = wgpu::BufferUsages::empty();
    let mut outputs = Vec::new();
    for (window, softcap) in [(Some(8usize), None), (None, None), (None, Some(0.5f32))] {
        let (kc, vc) = (up("k_cache", &k_cache), up("v_cache", &v_cache));
        let out = gpu.storage("out", n_heads * hd * 4, wgpu::BufferUsages::COPY_SRC);
        let scores = gpu.storage("scores", n_heads * capacity * 4, empty);
        let blocks = n_heads * hd / 32; // the output quantized too, for the output product
        let acts = gpu.storage(
            "acts",
            blocks * BLOCK_WORDS * 4,
            wgpu::BufferUsages::COPY_SRC,
        );
        let params = [
            n_heads as u32,
            n_kv as u32,
            hd as u32,
            capacity as u32,
            scale.to_bits(),
            window.unwrap_or(0) as u32,
            softcap.map_or(0, f32::to_bits),
            softcap.map_or(0, |c| (1.0 / c).to_bits()),
            1, // quantized as Q8_0
            0,
            0,
            0,
            0, // no norms on the heads
            0,
            0,
            0,
        ];
        let no = &ops.no_norm;
        let buffers = [&step, &qb, &kb, &vb, &kc, &vc, &out, &scores, &acts, no, no];
        let d = Dispatch::new(&gpu, &ops.attention, &buffers, &params, n_heads).unwrap();
        run(&gpu, &d);
        let got = bits(&gpu, &out, n_heads * hd);
        let at = LayerAttention {
            kernels: &Scalar,
            layer: 0,
            heads,
            window,
            scale,
            softcap,
        };
        let mut want = vec![0.0f32; n_heads * hd];
        attend(&at, &mut want, &q, &cpu_cache, pos, &mut Vec::new());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
                "window {window:?}, soft-cap {softcap:?}: head {} value {}: the GPU gives {g}, \
                 chapter 8's attend {w}",
                i / hd,
                i % hd
            );
        }
        let words: Vec<u32> = bits(&gpu, &acts, blocks * BLOCK_WORDS)
            .iter()
            .map(|v| v.to_bits())
            .collect();
        assert!(
            words == acts::quantize(ActFormat::Q8_0, &got).unwrap(),
            "attention's output, quantized in the same dispatch, is not chapter 6's blocks of it"
        );
        outputs.push(got);
    }
    let apart = max_diff(&outputs[0], &outputs[1]);
    assert!(
        apart > 1.0,
        "the windowed and the full attention differ by only {apart}: the test's keys before \
         the window do not weigh, so it would not see a window that is ignored"
    );
    let capped = max_diff(&outputs[1], &outputs[2]);
    assert!(
        capped > 0.5,
        "the capped and the uncapped attention differ by only {capped}: the test's scores are \
         too small for the cap, so it would not see a cap that is ignored"
    );
}
// ANCHOR_END: window_test

/// Heads of 256 (Gemma-3's) take attention in workgroups of 256, which quantize each head's
/// output as one Q8_K super-block for an output product of K-quants: the output is the
/// 64-wide workgroups' bit for bit (every score, sum and value is one lane's, in the same
/// order), and the blocks are chapter 7's Q8_K of it, as `acts::quantize` makes them.
#[test]
fn wide_attention_is_the_narrow_one_and_quantizes_q8_k() {
    let gpu = gpu();
    let ops = Ops::new(&gpu).unwrap();
    let (n_heads, n_kv, hd, capacity, pos) = (4usize, 2usize, 256usize, 16usize, 9usize);
    let mut rng = Rng::new(256);
    let mut random = |n: usize| -> Vec<f32> { (0..n).map(|_| rng.signed()).collect() };
    let (q, k, v) = (random(n_heads * hd), random(n_kv * hd), random(n_kv * hd));
    let (k_cache, v_cache) = (random(capacity * n_kv * hd), random(capacity * n_kv * hd));
    let step = step_buffer(&gpu, pos, 1, &vec![0.0; hd]);
    let up = |name: &str, x: &[f32]| gpu.upload_f32(name, x, wgpu::BufferUsages::empty());
    let (qb, kb, vb) = (up("q", &q), up("k", &k), up("v", &v));
    let blocks = n_heads * hd / 32;
    let params = |quant: u32| {
        let scale = 1.0 / (hd as f32).sqrt();
        [n_heads, n_kv, hd, capacity]
            .map(|n| n as u32)
            .into_iter()
            .chain([scale.to_bits(), 0, 0, 0, quant, 0, 0, 0, 0, 0, 0, 0])
    };
    let mut outputs = Vec::new();
    // 64 wide, not quantizing; then 256 wide, quantizing as Q8_K (the params' 3)
    let pipelines = [
        (ops.attention.clone(), 0),
        (ops.attention_for(&gpu, hd).unwrap(), 3),
    ];
    for (pipeline, quant) in pipelines {
        let (kc, vc) = (up("k_cache", &k_cache), up("v_cache", &v_cache));
        let out = gpu.storage("out", n_heads * hd * 4, wgpu::BufferUsages::COPY_SRC);
        let empty = wgpu::BufferUsages::empty();
        let scores = gpu.storage("scores", n_heads * capacity * 4, empty);
        let acts = gpu.storage(
            "acts",
            blocks * BLOCK_WORDS * 4,
            wgpu::BufferUsages::COPY_SRC,
        );
        let no = &ops.no_norm;
        let buffers = [&step, &qb, &kb, &vb, &kc, &vc, &out, &scores, &acts, no, no];
        let words: Vec<u32> = params(quant).collect();
        run(
            &gpu,
            &Dispatch::new(&gpu, &pipeline, &buffers, &words, n_heads).unwrap(),
        );
        let got = bits(&gpu, &out, n_heads * hd);
        if quant != 0 {
            let words: Vec<u32> = bits(&gpu, &acts, blocks * BLOCK_WORDS)
                .iter()
                .map(|v| v.to_bits())
                .collect();
            assert!(
                words == acts::quantize(ActFormat::Q8_K, &got).unwrap(),
                "the 256-wide attention's output, quantized in the same dispatch, is not \
                 chapter 7's Q8_K blocks of it"
            );
        }
        outputs.push(got);
    }
    let same = outputs[0]
        .iter()
        .zip(&outputs[1])
        .all(|(a, b)| a.to_bits() == b.to_bits());
    assert!(
        same,
        "attention in workgroups of 256 gives other values than in workgroups of 64 (by up to \
         {})",
        max_diff(&outputs[0], &outputs[1])
    );
}

/// A decode step's heads of Q and K normed by attention as it reads them (`qk_norm`,
/// Gemma-3's and Qwen3's): the output, and the key it appends to the cache, are those of
/// attention reading the RMSNorm shader's rows (two dispatches, as a prefill norms them),
/// bit for bit: for heads of 64 and of 256, in workgroups of 64 and of 256.
#[test]
fn attention_norms_a_decode_step_s_heads_as_the_norm_shader_does() {
    let gpu = gpu();
    let ops = Ops::new(&gpu).unwrap();
    let norm = RmsNorm::new(&gpu).unwrap();
    let (n_heads, n_kv, capacity, pos, eps) = (4usize, 2usize, 16usize, 9usize, 1e-6f32);
    let empty = wgpu::BufferUsages::empty();
    let read = wgpu::BufferUsages::COPY_SRC;
    for hd in [64usize, 256] {
        let mut rng = Rng::new(65 + hd as u64);
        let mut random =
            |n: usize, s: f32| -> Vec<f32> { (0..n).map(|_| s * rng.signed()).collect() };
        let (q, k, v) = (
            random(n_heads * hd, 20.0),
            random(n_kv * hd, 20.0),
            random(n_kv * hd, 1.0),
        );
        let (q_w, k_w) = (random(hd, 2.0), random(hd, 2.0));
        let angles = random(hd / 2, 3.0);
        let trig: Vec<f32> = angles
            .iter()
            .map(|a| a.cos())
            .chain(angles.iter().map(|a| a.sin()))
            .collect();
        let cache = (
            random(capacity * n_kv * hd, 1.0),
            random(capacity * n_kv * hd, 1.0),
        );
        let step = step_buffer(&gpu, pos, 1, &trig);
        let up = |name: &str, x: &[f32]| gpu.upload_f32(name, x, empty);
        let (qb, kb, vb) = (up("q", &q), up("k", &k), up("v", &v));
        let (qw, kw) = (up("q_norm", &q_w), up("k_norm", &k_w));
        let q_normed = gpu.storage("q normed", q.len() * 4, empty);
        let k_normed = gpu.storage("k normed", k.len() * 4, empty);
        for (x, w, out, rows) in [(&qb, &qw, &q_normed, n_heads), (&kb, &kw, &k_normed, n_kv)] {
            let s = NormStep::new(&gpu, &norm, x, w, out, hd, rows, eps).unwrap();
            gpu.submit_pass("the norm", |pass| s.record(pass)).unwrap();
        }
        // (output, appended key) of attention on `q`, `k`, normed by it where `fused`
        let attend = |pipeline: &wgpu::ComputePipeline, fused: bool| {
            let (kc, vc) = (
                gpu.upload_f32("k_cache", &cache.0, read),
                up("v_cache", &cache.1),
            );
            let out = gpu.storage("out", n_heads * hd * 4, read);
            let scores = gpu.storage("scores", n_heads * capacity * 4, empty);
            let (qi, ki, norms) = match fused {
                true => (&qb, &kb, [&qw, &kw]),
                false => (&q_normed, &k_normed, [&ops.no_norm, &ops.no_norm]),
            };
            let scale = 1.0 / (hd as f32).sqrt();
            let head = [n_heads, n_kv, hd, capacity].map(|n| n as u32);
            let rest = [
                scale.to_bits(),
                0,
                0,
                0,
                0,
                1,
                1,
                0,
                u32::from(fused),
                eps.to_bits(),
                0,
                0,
            ];
            let params: Vec<u32> = head.into_iter().chain(rest).collect();
            let buffers = [
                &step,
                qi,
                ki,
                &vb,
                &kc,
                &vc,
                &out,
                &scores,
                &ops.no_acts,
                norms[0],
                norms[1],
            ];
            run(
                &gpu,
                &Dispatch::new(&gpu, pipeline, &buffers, &params, n_heads).unwrap(),
            );
            let key = bits(&gpu, &kc, capacity * n_kv * hd)[pos * n_kv * hd..(pos + 1) * n_kv * hd]
                .to_vec();
            (bits(&gpu, &out, n_heads * hd), key)
        };
        let want = attend(&ops.attention, false);
        let mut pipelines = vec![("64 wide", ops.attention.clone())];
        if hd == 256 {
            pipelines.push(("256 wide", ops.attention_for(&gpu, hd).unwrap()));
        }
        for (width, pipeline) in pipelines {
            let got = attend(&pipeline, true);
            for (what, g, w) in [
                ("output", &got.0, &want.0),
                ("appended key", &got.1, &want.1),
            ] {
                let same = g.iter().zip(w).all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(
                    same,
                    "heads of {hd}, attention {width}: its {what} with the heads normed as it \
                     reads them is not its {what} after the RMSNorm shader (apart by up to {})",
                    max_diff(g, w)
                );
            }
        }
    }
}

/// GELU(gate) · up with up = 1 on every f16 value, every midpoint between two neighbouring
/// f16 values inside ±10 (where rounding to f16 ties, to even), and random values across
/// ±12: bit for bit chapter 8's `gelu_f16`, computed by the quantizer of the down product's
/// input, whose blocks are chapter 6's of those values.
#[test]
fn gelu_is_chapter_8_s_bit_for_bit() {
    let gpu = gpu();
    let quantize = Quantize::new(&gpu).unwrap();
    let f16 = |b: u16| ch06_quantization::f16::f16_to_f32_fast(b);
    let mut x: Vec<f32> = (0..=u16::MAX).map(f16).filter(|v| !v.is_nan()).collect();
    for b in 0..0x7bffu16 {
        for sign in [0, 0x8000] {
            let (a, c) = (f16(b | sign), f16((b + 1) | sign));
            if a.abs() < 10.0 {
                x.push((a + c) / 2.0); // exact in f32: f16 has 13 fewer fraction bits
            }
        }
    }
    let mut rng = Rng::new(62);
    x.extend((0..65536).map(|_| rng.signed() * 12.0));
    x.resize(x.len().next_multiple_of(32), 0.0); // whole blocks for the quantizer
    let n = x.len();
    let gate = gpu.upload_f32("gate", &x, wgpu::BufferUsages::COPY_SRC);
    let up = gpu.upload_f32("up", &vec![1.0; n], wgpu::BufferUsages::empty());
    let table = ch08_gguf::engine::gelu_table();
    let table = gpu.upload_f32("gelu table", table, wgpu::BufferUsages::empty());
    let blocks = n / 32;
    let acts = gpu.storage(
        "acts",
        blocks * BLOCK_WORDS * 4,
        wgpu::BufferUsages::COPY_SRC,
    );
    let (act, format) = (Gate::Gelu(&table), ActFormat::Q8_0);
    let step = QuantizeStep::gated(&gpu, &quantize, act, format, &gate, &up, &acts, blocks);
    let step = step.unwrap_or_else(|e| panic!("{e}"));
    gpu.submit_pass("GELU, quantized", |pass| step.record(pass))
        .unwrap_or_else(|e| panic!("{e}"));
    let got = bits(&gpu, &gate, n);
    let wrong: Vec<_> = x
        .iter()
        .zip(&got)
        .filter(|(x, g)| gelu_f16(**x).to_bits() != g.to_bits())
        .take(5)
        .map(|(x, g)| (*x, *g, gelu_f16(*x)))
        .collect();
    assert!(
        wrong.is_empty(),
        "GELU on the GPU differs from chapter 8's at {} of {n} inputs; (x, GPU, CPU): {wrong:?}",
        wrong.len()
    );
    let blocks_got: Vec<u32> = bits(&gpu, &acts, blocks * BLOCK_WORDS)
        .iter()
        .map(|v| v.to_bits())
        .collect();
    assert!(
        blocks_got == acts::quantize(format, &got).unwrap(),
        "the gate's values are chapter 8's, but the blocks quantized from them in the same \
         dispatch are not chapter 6's"
    );
}

/// Gemma-2's soft-cap of the logits (`softcap.wgsl`; the attention shader caps its scores
/// the same way) on values from 0 to far past the cap, against chapter 8's `softcap`: the
/// same `x · (1/cap)` and `· cap`, and a tanh that is not the CPU's bits (WGSL fixes no
/// accuracy for it), so within a few units in the last place of the cap.
#[test]
fn softcap_is_chapter_8_s_within_a_few_ulps() {
    let gpu = gpu();
    let ops = Ops::new(&gpu).unwrap();
    let cap = 30.0f32;
    let mut rng = Rng::new(64);
    let mut x: Vec<f32> = (0..65536).map(|_| rng.signed() * 100.0).collect();
    x.extend([0.0, -0.0, 1e-30, 1e-7, 29.9, 30.0, 1e4, -1e4, 3e38, -3e38]);
    let n = x.len();
    let buf = gpu.upload_f32("logits", &x, wgpu::BufferUsages::COPY_SRC);
    let params = [n as u32, cap.to_bits(), (1.0 / cap).to_bits(), 0];
    let d = Dispatch::new(&gpu, &ops.softcap, &[&buf], &params, groups_of_64(n)).unwrap();
    run(&gpu, &d);
    let got = bits(&gpu, &buf, n);
    let mut want = x.clone();
    ch08_gguf::engine::softcap(&mut want, cap);
    let allowed = 8.0 * f32::EPSILON * cap; // 8ε of the cap: 15 units in the last place of 30
    let mut worst = 0.0f32;
    for ((x, g), w) in x.iter().zip(&got).zip(&want) {
        let d = (g - w).abs();
        assert!(
            d <= allowed,
            "soft-cap of {x}: the GPU gives {g}, chapter 8 {w}"
        );
        worst = worst.max(d);
    }
    eprintln!("soft-cap: {n} values, worst |GPU − CPU| {worst:e} (allowed {allowed:e})");
}

/// Two RoPE bases in one step buffer (Gemma-3: 10 000 for sliding layers, 1 000 000 for
/// global ones): the dispatch with table 1 turns Q and K as chapter 8's rope of the second
/// base does, and not as the first's.
#[test]
fn rope_turns_with_the_layer_s_table() {
    let gpu = gpu();
    let ops = Ops::new(&gpu).unwrap();
    let (n_heads, n_kv, hd, pos) = (2usize, 1usize, 16usize, 77usize);
    let bases = [10_000.0f32, 1_000_000.0];
    let tables: Vec<RopeAngles> = bases
        .iter()
        .map(|&theta| {
            let r = LazyRope::new(hd, 128, theta).unwrap();
            RopeAngles {
                freqs: (0..hd / 2)
                    .map(|i| r.scaling.frequency(i, hd, theta))
                    .collect(),
                mscale: 1.0,
            }
        })
        .collect();
    let trig: Vec<f32> = tables.iter().flat_map(|t| t.at(pos)).collect();
    let step = step_buffer(&gpu, pos, tables.len(), &trig);
    let mut rng = Rng::new(63);
    let q: Vec<f32> = (0..n_heads * hd).map(|_| rng.signed()).collect();
    let k: Vec<f32> = (0..n_kv * hd).map(|_| rng.signed()).collect();
    for (t, &theta) in bases.iter().enumerate() {
        let qb = gpu.upload_f32("q", &q, wgpu::BufferUsages::COPY_SRC);
        let kb = gpu.upload_f32("k", &k, wgpu::BufferUsages::COPY_SRC);
        let params = [n_heads as u32, n_kv as u32, hd as u32, 1, t as u32, 0, 0, 0];
        let groups = groups_of_64((n_heads + n_kv) * hd / 2);
        let d = Dispatch::new(&gpu, &ops.rope, &[&step, &qb, &kb], &params, groups).unwrap();
        run(&gpu, &d);
        let got = [bits(&gpu, &qb, q.len()), bits(&gpu, &kb, k.len())].concat();
        for (other, &base) in bases.iter().enumerate() {
            let rope = LazyRope::new(hd, 128, base).unwrap();
            let (mut wq, mut wk) = (q.clone(), k.clone());
            rope.apply(&mut wq, n_heads, pos, Pairing::SplitHalves);
            rope.apply(&mut wk, n_kv, pos, Pairing::SplitHalves);
            let want = [wq, wk].concat();
            // a multiply and an add per value, which a compiler may fuse: 2 roundings
            let close = got
                .iter()
                .zip(&want)
                .all(|(g, w)| (g - w).abs() <= 4.0 * f32::EPSILON * (1.0 + w.abs()));
            assert_eq!(
                close,
                other == t,
                "table {t} (base {theta}) against chapter 8's rope of base {base}: {}",
                if close { "the same" } else { "different" }
            );
        }
    }
}

/// RMSNorm on every head of Q (4 rows of 256) and of K (1 row) with Gemma-3's own weights,
/// as chapter 8's `rmsnorm_rows` (chapter 1's norm on each row), within the bound
/// `ops.rs` derives for the norm.
#[test]
fn qk_norms_on_every_head_match_chapter_8() {
    let gpu = gpu();
    let shader = RmsNorm::new(&gpu).unwrap();
    let path = models::require(&models::gemma3_gguf()).unwrap_or_else(|e| panic!("{e}"));
    let file = ch08_gguf::GgufFile::open(&path).unwrap_or_else(|e| panic!("{e}"));
    let mut rng = Rng::new(64);
    for (name, rows) in [
        ("blk.0.attn_q_norm.weight", 4),
        ("blk.0.attn_k_norm.weight", 1),
    ] {
        let weight = file.f32s(file.info(name).unwrap()).unwrap();
        let n = weight.len();
        let x: Vec<f32> = (0..n * rows).map(|_| 20.0 * rng.signed()).collect();
        let xb = gpu.upload_f32("x", &x, wgpu::BufferUsages::empty());
        let wb = gpu.upload_f32("w", &weight, wgpu::BufferUsages::empty());
        let out = gpu.storage("out", x.len() * 4, wgpu::BufferUsages::COPY_SRC);
        let step = NormStep::new(&gpu, &shader, &xb, &wb, &out, n, rows, 1e-6).unwrap();
        gpu.submit_pass("the norm", |pass| step.record(pass))
            .unwrap();
        let got = bits(&gpu, &out, x.len());
        let want = ch08_gguf::engine::rmsnorm_rows(&x, &weight, 1e-6);
        let u = f64::from(f32::EPSILON) / 2.0;
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let allowed = (n as f64 / 2.0 + 9.0) * u * f64::from(w.abs()) * 1.01;
            assert!(
                (f64::from(*g) - f64::from(*w)).abs() <= allowed,
                "{name}: head {} value {}: the GPU gives {g}, chapter 8 {w}",
                i / n,
                i % n
            );
        }
    }
}

/// Gemma-3 is not refused: the step runs all of it (`families.rs` checks what it does with
/// every family chapter 8 makes, Gemma-2's soft-caps refused by name).
#[test]
fn gemma3_is_not_refused() {
    let path = models::require(&models::gemma3_gguf()).unwrap_or_else(|e| panic!("{e}"));
    let gemma3 = ch08_gguf::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(unsupported(&gemma3.model), None, "Gemma-3 runs on the GPU");
}
