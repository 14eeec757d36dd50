//! The shaders around the products: the input quantized on the GPU, and RMSNorm, each
//! against the CPU code of chapters 1 and 6.

mod common;

use ch01_tensors::models;
use ch01_tensors::ops::rmsnorm;
use ch06_quantization::matrix::ActFormat;
use ch13_gpu::acts::{self, BLOCK_WORDS};
use ch13_gpu::bench::ReadProbe;
use ch13_gpu::matvec::FORMATS;
use ch13_gpu::ops::{Dispatch, Ops, groups_of_64};
use ch13_gpu::quantize::{Gate, Quantize, QuantizeStep};
use ch13_gpu::random::{self, Rng};
use ch13_gpu::rmsnorm::{NormStep, Residual, RmsNorm};
use ch13_gpu::{Gpu, GpuMatrix, MatVec, Product, matvec};
use common::gpu;

/// Runs `record` in one pass of one submission.
fn run(gpu: &Gpu, record: impl FnOnce(&mut wgpu::ComputePass<'_>)) {
    gpu.submit_pass("a test's pass", record)
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Vectors that test the quantizer's corners: random values, a block of zeros (scale 0),
/// a block whose max is 127 so that the scale is 1 and ±0.5, ±1.5, ±2.5 are exact halves
/// (rounded away from zero, not to even), and one tiny block (subnormal f16 scale).
fn vectors(rng: &mut Rng) -> Vec<Vec<f32>> {
    let mut halves = vec![0.0f32; 32];
    halves[0] = 127.0;
    for (j, v) in [0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 126.5, -3.5]
        .iter()
        .enumerate()
    {
        halves[j + 1] = *v;
    }
    let tiny: Vec<f32> = (0..32).map(|_| rng.signed() * 1e-6).collect();
    let mut mixed: Vec<f32> = (0..32 * 45).map(|_| 4.0 * rng.signed()).collect();
    mixed[32 * 7..32 * 8].fill(0.0);
    mixed[32 * 9..32 * 10].copy_from_slice(&halves);
    mixed[32 * 11..32 * 12].copy_from_slice(&tiny);
    vec![halves, (0..32 * 100).map(|_| rng.signed()).collect(), mixed]
}

/// Vectors for Q8_K, whose scale is per super-block of 256: random values; a super-block of
/// zeros; one whose largest magnitude is 127 (so iscale is −1) with exact halves that must
/// round to even; one whose largest magnitude comes twice with opposite signs (the first
/// sets the scale's sign); tiny values.
fn k_vectors(rng: &mut Rng) -> Vec<Vec<f32>> {
    let mut halves = vec![0.0f32; 256];
    halves[5] = 127.0;
    for (j, v) in [0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 126.5, -3.5, 4.5]
        .iter()
        .enumerate()
    {
        halves[40 * j % 256 + 7] = *v;
    }
    let mut ties: Vec<f32> = (0..256).map(|_| rng.signed()).collect();
    ties[130] = -2.0;
    ties[200] = 2.0;
    let mut mixed: Vec<f32> = (0..256 * 7).map(|_| 4.0 * rng.signed()).collect();
    mixed[256..512].fill(0.0);
    mixed[512..768].copy_from_slice(&halves);
    mixed[768..1024].copy_from_slice(&ties);
    mixed[1024..1280].iter_mut().for_each(|v| *v *= 1e-6);
    vec![
        halves,
        ties,
        (0..256 * 20).map(|_| rng.signed()).collect(),
        mixed,
    ]
}

#[test]
fn the_gpu_quantizes_as_chapter_6_does() {
    let gpu = gpu();
    let shader = Quantize::new(&gpu).unwrap_or_else(|e| panic!("{e}"));
    let mut rng = Rng::new(8);
    let small = vectors(&mut rng)
        .into_iter()
        .map(|x| (x, [ActFormat::Q8_0, ActFormat::Q8_1]));
    let k = k_vectors(&mut rng)
        .into_iter()
        .map(|x| (x, [ActFormat::Q8_K; 2]));
    for (x, formats) in small.chain(k) {
        let blocks = x.len() / 32;
        for format in formats {
            let input = gpu.upload_f32("x", &x, wgpu::BufferUsages::empty());
            let out = gpu.storage(
                "acts",
                blocks * BLOCK_WORDS * 4,
                wgpu::BufferUsages::COPY_SRC,
            );
            let step = QuantizeStep::new(&gpu, &shader, format, &input, &out, blocks).unwrap();
            run(&gpu, |pass| step.record(pass));
            let got: Vec<u32> = gpu
                .read_f32(&out, blocks * BLOCK_WORDS)
                .unwrap()
                .iter()
                .map(|v| v.to_bits())
                .collect();
            let want = acts::quantize(format, &x).unwrap();
            for (b, (g, w)) in got
                .chunks(BLOCK_WORDS)
                .zip(want.chunks(BLOCK_WORDS))
                .enumerate()
            {
                assert_eq!(
                    g,
                    w,
                    "{format:?}, block {b} of {blocks}: the GPU's block (d, s, quants as words) \
                     differs from chapters 6 and 7's; input {:?}",
                    &x[b * 32..b * 32 + 32]
                );
            }
        }
    }
}

#[test]
fn a_product_fed_by_the_gpus_quantizer_equals_one_fed_by_the_host() {
    // Quantize then multiply in one submission, nothing read back between: the same bits
    // as `matvec`, which quantizes on the host.
    let gpu = gpu();
    let (shaders, quantize) = (MatVec::new(&gpu).unwrap(), Quantize::new(&gpu).unwrap());
    let mut rng = Rng::new(9);
    for format in FORMATS {
        // 41 blocks of 32; the K-quants' 5 super-blocks of 256
        let rows = 37;
        let cols = if format.block_values() == 256 {
            256 * 5
        } else {
            32 * 41
        };
        let blocks = random::blocks(format, rows, cols, &mut rng);
        let m = GpuMatrix::from_blocks(&gpu, format, rows, cols, &blocks).unwrap();
        let x: Vec<f32> = (0..cols).map(|_| rng.signed()).collect();
        let input = gpu.upload_f32("x", &x, wgpu::BufferUsages::empty());
        let product = Product::new(&gpu, &shaders, &m).unwrap();
        let activation = format.activation().unwrap();
        let step = QuantizeStep::new(
            &gpu,
            &quantize,
            activation,
            &input,
            &product.acts,
            cols / 32,
        )
        .unwrap();
        run(&gpu, |pass| {
            step.record(pass);
            product.record(pass);
        });
        let on_gpu = gpu.read_f32(&product.out, rows).unwrap();
        let on_host = matvec(&gpu, &shaders, &m, &x).unwrap();
        for (r, (g, h)) in on_gpu.iter().zip(&on_host).enumerate() {
            assert_eq!(
                g.to_bits(),
                h.to_bits(),
                "{}: row {r}: quantized on the GPU {g}, on the host {h}",
                format.name()
            );
        }
    }
}

/// The tolerance, derived: the CPU sums the squares in f64 (exact to f32's eyes), the GPU in
/// f32, `n` squares and `n − 1` additions of positive terms: relative error at most
/// `γ(n) ≈ n·u`. The scale is `(mean + eps)^(−1/2)`: the division by `n` and the `+ eps`
/// add a rounding each, the square root halves the relative error, and Vulkan allows
/// `inverseSqrt` 2 ulp (≤ 4u relative). Then two products on each side, two roundings each.
/// In all `(n/2 + 1 + 4 + 4)·u` of `|out|`, plus 1% for γ's denominator.
fn norm_bound(n: usize, want: f32) -> f64 {
    let u = f64::from(f32::EPSILON) / 2.0;
    (n as f64 / 2.0 + 9.0) * u * f64::from(want.abs()) * 1.01
}

fn check_norm(gpu: &Gpu, shader: &RmsNorm, what: &str, x: &[f32], weight: &[f32], eps: f32) {
    let n = weight.len();
    let rows = x.len() / n;
    let xb = gpu.upload_f32("x", x, wgpu::BufferUsages::empty());
    let wb = gpu.upload_f32("weight", weight, wgpu::BufferUsages::empty());
    let out = gpu.storage("out", x.len() * 4, wgpu::BufferUsages::COPY_SRC);
    let step = NormStep::new(gpu, shader, &xb, &wb, &out, n, rows, eps).unwrap();
    run(gpu, |pass| step.record(pass));
    let got = gpu.read_f32(&out, x.len()).unwrap();
    let mut want = vec![0.0f32; x.len()];
    for (o, xr) in want.chunks_mut(n).zip(x.chunks(n)) {
        rmsnorm(o, xr, weight, eps);
    }
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let allowed = norm_bound(n, *w);
        let diff = (f64::from(*g) - f64::from(*w)).abs();
        assert!(
            diff <= allowed,
            "{what}: value {} of row {}: the GPU gives {g}, chapter 1's rmsnorm {w} \
             (off by {diff:e}, more than {allowed:e})",
            i % n,
            i / n
        );
    }
}

#[test]
fn rmsnorm_matches_chapter_1() {
    let gpu = gpu();
    let shader = RmsNorm::new(&gpu).unwrap_or_else(|e| panic!("{e}"));
    let mut rng = Rng::new(1);
    // lengths below, at and past the 256 lanes, not multiples of them; one row and several
    for (n, rows) in [(32, 1), (256, 2), (1000, 3), (2048, 1)] {
        let x: Vec<f32> = (0..n * rows).map(|_| 3.0 * rng.signed()).collect();
        let weight: Vec<f32> = (0..n).map(|_| 1.0 + rng.signed()).collect();
        check_norm(&gpu, &shader, &format!("{rows}x{n}"), &x, &weight, 1e-5);
    }
    // SmolLM2's first norm weights, from its file
    let path = models::require(&models::smollm2_gguf()).unwrap_or_else(|e| panic!("{e}"));
    let file = ch08_gguf::GgufFile::open(&path).unwrap_or_else(|e| panic!("{e}"));
    let info = file.info("blk.0.attn_norm.weight").unwrap();
    let weight = file.f32s(info).unwrap();
    let x: Vec<f32> = (0..weight.len()).map(|_| rng.signed()).collect();
    check_norm(
        &gpu,
        &shader,
        "SmolLM2's blk.0.attn_norm",
        &x,
        &weight,
        1e-5,
    );
}

#[test]
fn steps_refuse_buffers_too_small() {
    let gpu = gpu();
    let (quantize, norm) = (Quantize::new(&gpu).unwrap(), RmsNorm::new(&gpu).unwrap());
    let small = gpu.storage("small", 64, wgpu::BufferUsages::empty());
    let big = gpu.storage("big", 1 << 16, wgpu::BufferUsages::empty());
    assert!(QuantizeStep::new(&gpu, &quantize, ActFormat::Q8_0, &small, &big, 4).is_err());
    assert!(QuantizeStep::new(&gpu, &quantize, ActFormat::Q8_0, &big, &small, 4).is_err());
    // Q8_K: 4 blocks of 32 are half a super-block; 8 need 1 KiB of input
    assert!(QuantizeStep::new(&gpu, &quantize, ActFormat::Q8_K, &big, &big, 4).is_err());
    assert!(QuantizeStep::new(&gpu, &quantize, ActFormat::Q8_K, &small, &big, 8).is_err());
    assert!(QuantizeStep::new(&gpu, &quantize, ActFormat::Q8_K, &big, &big, 8).is_ok());
    assert!(NormStep::new(&gpu, &norm, &big, &small, &big, 576, 1, 1e-5).is_err());
    assert!(NormStep::new(&gpu, &norm, &small, &big, &big, 576, 1, 1e-5).is_err());
    assert!(NormStep::new(&gpu, &norm, &big, &big, &big, 0, 1, 1e-5).is_err());
}

#[test]
fn the_read_probe_reads_every_word_once() {
    // `kernels`' bandwidth ceiling is only a ceiling if the probe reads the whole buffer:
    // the workgroups' totals add up to the sum of every word (wrapping), for a buffer
    // that is not whole workgroups' shares.
    let gpu = gpu();
    let mut rng = Rng::new(61);
    let words: Vec<u32> = (0..256 * 64 * 3 + 1001)
        .map(|_| rng.next_u64() as u32)
        .collect();
    let bits: Vec<f32> = words.iter().map(|&w| f32::from_bits(w)).collect();
    let data = gpu.upload_f32("data", &bits, wgpu::BufferUsages::empty());
    let probe = ReadProbe::new(&gpu, &data).unwrap_or_else(|e| panic!("{e}"));
    run(&gpu, |pass| probe.record(pass, 2));
    let groups = (probe.totals.size() / 4) as usize;
    let got = gpu
        .read_f32(&probe.totals, groups)
        .unwrap()
        .iter()
        .fold(0u32, |acc, t| acc.wrapping_add(t.to_bits()));
    let want = words.iter().fold(0u32, |acc, &w| acc.wrapping_add(w));
    assert_eq!(
        got,
        want,
        "the read probe's {groups} workgroup totals add up to {got}, not the sum of the \
         buffer's {} words, {want}: it missed or repeated some",
        words.len()
    );
}

/// The attention's and SwiGLU's `exp_cpu` against `f32::exp` (which chapter 7's vector exp
/// equals): with f64 on the device, bit for bit on 65 536 values in [-90, 10], softmax's
/// and SiLU's range; without, within the 3 + 2·|x| units in the last place Vulkan allows
/// exp(). One exception: below about −87.3 the CPU's result is subnormal, and Vulkan lets a
/// driver flush f32 subnormals to 0 (Mesa 26's lavapipe does; WGSL cannot ask it not to).
/// No use of exp in a step can tell: a softmax weight that small is set to 0 on both sides,
/// and 1 + e^−g is 1 either way.
#[test]
fn exp_on_the_gpu_is_the_cpu_s() {
    let gpu = gpu();
    let exp = match gpu.found.shader_f64 {
        true => include_str!("../shaders/exp_f64.wgsl"),
        false => include_str!("../shaders/exp_f32.wgsl"),
    };
    let wgsl = format!(
        "{exp}\n@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n\
         @compute @workgroup_size(64)\n\
         fn main(@builtin(global_invocation_id) id: vec3<u32>) {{\n\
             if id.x < arrayLength(&x) {{ x[id.x] = exp_cpu(x[id.x]); }}\n}}"
    );
    let pipeline = gpu.pipeline("exp", &wgsl).unwrap();
    let mut rng = Rng::new(11);
    let xs: Vec<f32> = (0..65536).map(|_| rng.signed() * 50.0 - 40.0).collect();
    let buffer = gpu.upload_f32("x", &xs, wgpu::BufferUsages::COPY_SRC);
    let bind = gpu.bind(&pipeline, &[&buffer]).unwrap();
    run(&gpu, |pass| {
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &bind, &[]);
        pass.dispatch_workgroups(xs.len() as u32 / 64, 1, 1);
    });
    let got = gpu.read_f32(&buffer, xs.len()).unwrap();
    let ulps = |a: f32, b: f32| (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs();
    let allowed = |x: f32| match gpu.found.shader_f64 {
        true => 0,
        false => 3 + 2 * x.abs().ceil() as u64,
    };
    let flushed = |x: f32, g: f32| x.exp().is_subnormal() && g == 0.0;
    let n = xs
        .iter()
        .zip(&got)
        .filter(|(x, g)| flushed(**x, **g))
        .count();
    if n > 0 {
        eprintln!("{}: {n} subnormal results flushed to 0", gpu.info.name);
    }
    let worst = xs
        .iter()
        .zip(&got)
        .filter(|(x, g)| !flushed(**x, **g))
        .map(|(x, g)| (ulps(x.exp(), *g), allowed(*x)))
        .max_by_key(|(d, a)| d.saturating_sub(*a))
        .unwrap_or((0, 0));
    assert!(
        worst.0 <= worst.1,
        "exp on the GPU is {} units in the last place from f32::exp (allowed {})",
        worst.0,
        worst.1
    );
}

/// A norm that first adds the residual and afterwards quantizes its output (one dispatch,
/// as a step runs it) against the three apart: the add shader, the plain norm, the
/// quantizer; and with Gemma's post-norm of the residual, against the four apart (a plain
/// norm of it first). The same bits in `x`, in the norm's output and in every block, for
/// rows shorter and longer than the workgroup's 256, not whole chunks of 256, several rows;
/// with the f64 shader where the device has f64 and always with the f32 one.
#[test]
fn the_fused_norm_is_the_add_the_norm_and_the_quantizer_apart() {
    let mut gpu = gpu();
    let (quantize, ops) = (Quantize::new(&gpu).unwrap(), Ops::new(&gpu).unwrap());
    let mut norms = vec![("f32", false)];
    if gpu.found.shader_f64 {
        norms.push(("f64", true));
    }
    for (sums, f64) in norms {
        gpu.found.shader_f64 = f64;
        let norm = RmsNorm::new(&gpu).unwrap();
        fused_against_apart(&gpu, sums, &norm, &quantize, &ops);
    }
}

fn fused_against_apart(gpu: &Gpu, sums: &str, norm: &RmsNorm, quantize: &Quantize, ops: &Ops) {
    let mut rng = Rng::new(70);
    let read = |b: &wgpu::Buffer, n: usize| -> Vec<u32> {
        gpu.read_f32(b, n)
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect()
    };
    for (n, rows) in [(576, 1), (640, 3), (992, 2), (2048, 2)] {
        let formats: &[ActFormat] = match n % 256 {
            0 => &[ActFormat::Q8_0, ActFormat::Q8_1, ActFormat::Q8_K],
            _ => &[ActFormat::Q8_0, ActFormat::Q8_1],
        };
        let x: Vec<f32> = (0..n * rows).map(|_| 3.0 * rng.signed()).collect();
        let y: Vec<f32> = (0..n * rows).map(|_| rng.signed()).collect();
        let weight: Vec<f32> = (0..n).map(|_| 1.0 + rng.signed()).collect();
        let w = gpu.upload_f32("weight", &weight, wgpu::BufferUsages::empty());
        let yb = gpu.upload_f32("y", &y, wgpu::BufferUsages::empty());
        // Gemma's norm of the block's output before the add (a third of its values)
        let post: Vec<f32> = (0..n).map(|_| 0.3 * rng.signed()).collect();
        let post = gpu.upload_f32("post", &post, wgpu::BufferUsages::empty());
        for (&format, post) in formats.iter().flat_map(|f| [(f, None), (f, Some(&post))]) {
            let what = format!(
                "{rows}x{n}, {format:?}, sums in {sums}{}",
                if post.is_some() {
                    ", the residual post-normed"
                } else {
                    ""
                }
            );
            let blocks = n * rows / 32;
            let new = |label| {
                let x = gpu.upload_f32(label, &x, wgpu::BufferUsages::COPY_SRC);
                let out = gpu.storage("out", n * rows * 4, wgpu::BufferUsages::COPY_SRC);
                let acts = gpu.storage(
                    "acts",
                    blocks * BLOCK_WORDS * 4,
                    wgpu::BufferUsages::COPY_SRC,
                );
                (x, out, acts)
            };
            // apart: three dispatches (four with the post-norm, into `normed`)
            let (xa, outa, actsa) = new("x apart");
            let normed = gpu.storage("normed y", n * rows * 4, wgpu::BufferUsages::empty());
            let post_norm = post.map(|p| NormStep::new(gpu, norm, &yb, p, &normed, n, rows, 1e-5));
            let post_norm = post_norm.transpose().unwrap();
            let params = [(n * rows) as u32, (n * rows) as u32, 0, 0];
            let added = if post.is_some() { &normed } else { &yb };
            let add = Dispatch::new(
                gpu,
                &ops.add,
                &[&xa, added],
                &params,
                groups_of_64(n * rows),
            );
            let add = add.unwrap();
            let plain = NormStep::new(gpu, norm, &xa, &w, &outa, n, rows, 1e-5).unwrap();
            let q = QuantizeStep::new(gpu, quantize, format, &outa, &actsa, blocks).unwrap();
            run(gpu, |pass| {
                if let Some(p) = &post_norm {
                    p.record(pass);
                }
                add.record(pass);
                plain.record(pass);
                q.record(pass);
            });
            // fused: one
            let (xf, outf, actsf) = new("x fused");
            let fused = NormStep::fused(
                gpu,
                norm,
                &xf,
                Some(Residual { y: &yb, post }),
                &w,
                &outf,
                n,
                rows,
                1e-5,
                Some((format, &actsf)),
            )
            .unwrap_or_else(|e| panic!("{what}: {e}"));
            run(gpu, |pass| fused.record(pass));
            for (name, a, f, len) in [
                ("the residual x + y", &xa, &xf, n * rows),
                ("the norm's output", &outa, &outf, n * rows),
                ("the quantized blocks", &actsa, &actsf, blocks * BLOCK_WORDS),
            ] {
                let (a, f) = (read(a, len), read(f, len));
                let first = a.iter().zip(&f).position(|(a, f)| a != f);
                assert!(
                    first.is_none(),
                    "{what}: {name} from the fused norm differs from the dispatches \
                     apart, first at word {}",
                    first.unwrap_or(0)
                );
            }
        }
    }
}

/// SiLU(gate) · up computed by the quantizer of the down product's input: chapter 1's
/// `silu` times `up` (bit for bit where the device has f64, as lavapipe does; else within
/// exp's allowance), written back into `gate`, and the blocks chapter 6's of those values.
#[test]
fn the_quantizer_computes_swiglu_as_chapter_1_does() {
    let gpu = gpu();
    let quantize = Quantize::new(&gpu).unwrap();
    let mut rng = Rng::new(71);
    let n = 1536 * 3;
    let g: Vec<f32> = (0..n).map(|_| 12.0 * rng.signed()).collect();
    let u: Vec<f32> = (0..n).map(|_| 2.0 * rng.signed()).collect();
    for format in [ActFormat::Q8_0, ActFormat::Q8_1, ActFormat::Q8_K] {
        let gate = gpu.upload_f32("gate", &g, wgpu::BufferUsages::COPY_SRC);
        let up = gpu.upload_f32("up", &u, wgpu::BufferUsages::empty());
        let blocks = n / 32;
        let acts = gpu.storage(
            "acts",
            blocks * BLOCK_WORDS * 4,
            wgpu::BufferUsages::COPY_SRC,
        );
        let step = QuantizeStep::gated(
            &gpu,
            &quantize,
            Gate::Swiglu,
            format,
            &gate,
            &up,
            &acts,
            blocks,
        );
        let step = step.unwrap_or_else(|e| panic!("{e}"));
        run(&gpu, |pass| step.record(pass));
        let got = gpu.read_f32(&gate, n).unwrap();
        let ulps = |a: f32, b: f32| (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs();
        for (i, ((g, u), got)) in g.iter().zip(&u).zip(&got).enumerate() {
            let want = ch01_tensors::ops::silu(*g) * u;
            // without f64: exp's 3 + 2|x| ulp, through a division and a multiply
            let allowed = if gpu.found.shader_f64 {
                0
            } else {
                8 + 2 * g.abs().ceil() as u64
            };
            assert!(
                ulps(want, *got) <= allowed,
                "{format:?}: value {i}: SiLU({g}) · {u} on the GPU is {got}, chapter 1's {want}"
            );
        }
        let blocks_got: Vec<u32> = gpu
            .read_f32(&acts, blocks * BLOCK_WORDS)
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect();
        assert!(
            blocks_got == acts::quantize(format, &got).unwrap(),
            "{format:?}: the gate's blocks, quantized in the same dispatch, are not chapter 6's \
             blocks of its values"
        );
    }
}

/// `kernels`' dispatch floor times dispatches that each depend on the one before: the
/// counts show every dispatch ran, once, in a submission of many.
#[test]
fn the_empty_dispatch_runs_as_often_as_recorded() {
    let gpu = gpu();
    let tick = ch13_gpu::bench::Tick::new(&gpu).unwrap_or_else(|e| panic!("{e}"));
    run(&gpu, |pass| tick.record(pass, 1000));
    let counts: Vec<u32> = gpu
        .read_f32(&tick.counts, 64)
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect();
    assert!(
        counts.iter().all(|&c| c == 1000),
        "1000 empty dispatches recorded, but the invocations counted {:?}",
        &counts[..8]
    );
}
