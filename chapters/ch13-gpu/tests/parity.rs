//! Where the GPU's step first differs from the CPU engine's, op by op: a diagnostic run by
//! hand (`cargo test --release -p ch13-gpu --test parity -- --ignored --nocapture`).
//!
//! The products add their blocks in the CPU's order here ([`Reduction::InOrder`]), so any
//! difference left is another op's. For each number of layers L, a model cut to its first L
//! layers runs on the GPU at positions 0, 1, 2; the CPU runs chapter 8's `Engine::layer` on
//! the same tokens. The first (L, position) whose residual stream differs is taken apart:
//! this position's rotated key and value (RoPE) in the GPU's cache, and attention's output
//! recomputed on the CPU from the GPU's own queries (turned on the host, as attention turns
//! them on the GPU) and the CPU's cache. (With the products in the CPU's
//! order, none differs on lavapipe: every layer's residual at positions 0 to 2 is the
//! CPU's.) A second diagnostic asks whether the adapter fuses a multiply and an add.

use ch01_tensors::models;
use ch03_attention::Pairing;
use ch05_kv_cache::KvStore;
use ch08_gguf::engine::{Buffers, Chunk, LayerAttention, attend};
use ch13_gpu::Gpu;
use ch13_gpu::matvec::Reduction;
use ch13_gpu::model::GpuModel;
use ch13_gpu::step::{Decoder, Shaders};

/// `what` at layer `l`, position `pos`: how many values differ in their bits, and the most.
fn compare(what: &str, l: usize, pos: usize, cpu: &[f32], gpu: &[f32]) -> bool {
    let differ = cpu
        .iter()
        .zip(gpu)
        .filter(|(c, g)| c.to_bits() != g.to_bits())
        .count();
    let most = cpu
        .iter()
        .zip(gpu)
        .map(|(c, g)| (c - g).abs())
        .fold(0.0f32, f32::max);
    eprintln!(
        "layer {l} position {pos} {what}: {differ} of {} values differ, max |Δ| {most:e}",
        cpu.len()
    );
    differ == 0
}

#[test]
#[ignore = "a diagnostic, run by hand"]
fn where_the_gpu_step_first_differs_from_the_cpu_s() {
    let path = models::require(&models::smollm2_gguf()).unwrap_or_else(|e| panic!("{e}"));
    let mut m = ch08_gguf::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let gpu = Gpu::open().unwrap_or_else(|e| panic!("{e}: run bash scripts/test-deps.sh"));
    let shaders = Shaders::with(&gpu, Reduction::InOrder).unwrap();
    let tokens = m.tokenizer.tokenizer.encode("The capital of France", false);
    let tokens = &tokens[..3];
    let cfg = m.model.config.clone();
    let (dim, kv_dim, hd) = (cfg.hidden_size, cfg.kv_dim(), cfg.heads().head_dim);
    let layers = m.model.layers.len();
    // the CPU: each layer's residual, key and value at each position
    let mut cpu = vec![vec![(Vec::new(), Vec::new(), Vec::new()); layers]; tokens.len()];
    let mut cache;
    {
        let engine = m.engine().unwrap();
        cache = engine.new_cache(tokens.len()).unwrap();
        let mut b = Buffers::default();
        for (pos, &t) in tokens.iter().enumerate() {
            let mut x = engine.embed(&[t]).unwrap();
            for (l, w) in m.model.layers.iter().enumerate() {
                let mut rows = Chunk {
                    cache: &mut cache,
                    pos0: pos,
                };
                engine.layer(l, w, &mut rows, &mut x, &mut b);
                let kv = |f: &dyn Fn(usize) -> Vec<f32>| -> Vec<f32> {
                    (0..cfg.n_kv_heads).flat_map(f).collect()
                };
                let k = kv(&|h| cache.key(l, h, pos).to_vec());
                let v = kv(&|h| cache.value(l, h, pos).to_vec());
                cpu[pos][l] = (x.clone(), k, v);
            }
        }
    }
    // the model cut to its first layers, one more each round (moved back in one at a time)
    let mut rest = std::mem::take(&mut m.model.layers).into_iter();
    for cut in 1..=layers {
        m.model.layers.extend(rest.next());
        let model = GpuModel::upload(&gpu, &m.model).unwrap();
        let decoder = Decoder::new(&gpu, &shaders, &model, tokens.len()).unwrap();
        let l = cut - 1;
        for (pos, &t) in tokens.iter().enumerate() {
            decoder.step(t, pos, false).unwrap();
            let read = |b: &wgpu::Buffer, n| gpu.read_f32(b, n).unwrap();
            let (x, k, v) = &cpu[pos][l];
            if compare("residual", l, pos, x, &read(&decoder.acts.x, dim)) {
                continue;
            }
            // a decode step's keys and queries are turned by attention as it reads them: the
            // key as the cache keeps it, the query turned here as the CPU turns it
            let (k_cache, v_cache) = &decoder.caches()[l];
            let at = pos * kv_dim..(pos + 1) * kv_dim;
            compare(
                "rotated key",
                l,
                pos,
                k,
                &read(k_cache, (pos + 1) * kv_dim)[at.clone()],
            );
            compare("value", l, pos, v, &read(v_cache, (pos + 1) * kv_dim)[at]);
            // attention on the CPU from the GPU's queries and the CPU's cache (this layer's
            // keys and values at positions 0..=pos, the CPU's)
            let mut q = read(&decoder.acts.q, cfg.q_dim());
            m.model.ropes[0].apply(&mut q, cfg.n_heads, pos, Pairing::SplitHalves);
            let at = LayerAttention {
                kernels: m.engine().unwrap().kernels,
                layer: l,
                heads: cfg.heads(),
                window: None,
                scale: 1.0 / (hd as f32).sqrt(),
                softcap: None,
            };
            let mut want = vec![0.0f32; cfg.q_dim()];
            attend(&at, &mut want, &q, &cache, pos, &mut Vec::new());
            compare(
                "attention",
                l,
                pos,
                &want,
                &read(&decoder.acts.heads, cfg.q_dim()),
            );
            panic!("the first difference: layer {l}, position {pos}");
        }
    }
    eprintln!("every layer's residual at every position is the CPU's, bit for bit");
}

/// Whether this adapter's shader compiler fuses `a * b + c` into one rounding (an FMA),
/// which the CPU never does (Rust does not contract): WGSL cannot forbid it, so a driver
/// may. Lavapipe does not: all 4 096 random triples come back rounded twice.
#[test]
#[ignore = "a diagnostic, run by hand"]
fn the_shader_compiler_rounds_a_multiply_and_an_add_twice() {
    let gpu = Gpu::open().unwrap_or_else(|e| panic!("{e}: run bash scripts/test-deps.sh"));
    let wgsl = "@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n\
         @compute @workgroup_size(64)\n\
         fn main(@builtin(global_invocation_id) id: vec3<u32>) {\n\
             let i = id.x * 4u;\n\
             if i < arrayLength(&x) { x[i + 3u] = x[i] * x[i + 1u] + x[i + 2u]; }\n}";
    let pipeline = gpu.pipeline("a * b + c", wgsl).unwrap();
    let mut rng = ch13_gpu::random::Rng::new(3);
    let n = 4096;
    let xs: Vec<f32> = (0..n * 4).map(|_| rng.signed()).collect();
    let buffer = gpu.upload_f32("x", &xs, wgpu::BufferUsages::COPY_SRC);
    let bind = gpu.bind(&pipeline, &[&buffer]).unwrap();
    gpu.submit_pass("a * b + c", |pass| {
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &bind, &[]);
        pass.dispatch_workgroups(n as u32 / 64, 1, 1);
    })
    .unwrap();
    let got = gpu.read_f32(&buffer, xs.len()).unwrap();
    let (mut twice, mut fused_differs) = (0, 0);
    for (x, g) in xs.chunks_exact(4).zip(got.chunks_exact(4)) {
        let (a, b, c) = (x[0], x[1], x[2]);
        twice += usize::from(g[3].to_bits() == (a * b + c).to_bits());
        fused_differs += usize::from(a.mul_add(b, c).to_bits() != (a * b + c).to_bits());
    }
    eprintln!(
        "{}: {twice} of {n} rounded twice; a fused multiply-add would have changed \
         {fused_differs}",
        gpu.info.name
    );
    assert_eq!(twice, n, "this adapter fuses a multiply and an add");
}
