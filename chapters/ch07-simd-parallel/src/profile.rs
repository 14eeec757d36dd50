//! Where a forward step's time goes, op by op.
//!
//! [`profile`] runs the same operations as chapter 6's `QEngine::layer`, in the same order,
//! with the same functions and the model's real weights, and times each kind of op over all
//! 30 layers; then it times the real `QEngine::forward` for the same step, so the table can
//! be checked against the whole (the two differ by the timers' own cost and by noise).

use std::time::Instant;

use ch01_tensors::ops;
use ch03_attention::Pairing;
use ch04_forward::layer::rmsnorm_rows;
use ch05_kv_cache::{KvCache, KvStore};
use ch06_quantization::forward::{QEngine, attend};
use ch06_quantization::{Kernels, QModel};
use rayon::prelude::*;
use serde::Serialize;

/// One kind of op: its total time over the layers and the weight bytes it read.
#[derive(Clone, Debug, Serialize)]
pub struct OpTime {
    pub op: &'static str,
    pub ms: f64,
    pub weight_bytes: usize,
}

/// A profiled step.
#[derive(Clone, Debug, Serialize)]
pub struct Profile {
    /// Tokens in the step (1 for a decode step, 512 for pp512's prefill).
    pub tokens: usize,
    /// Positions already in the cache before the step.
    pub context: usize,
    pub ops: Vec<OpTime>,
    /// The sum of the ops.
    pub total_ms: f64,
    /// The real `QEngine::forward` for the same step, timed whole.
    pub forward_ms: f64,
}

// ANCHOR: profile
/// Profiles a step of `tokens` new tokens after `context` cached ones: the best of `runs`
/// for each op (noise only ever adds time).
pub fn profile(
    model: &QModel,
    k: &dyn Kernels,
    tokens: usize,
    context: usize,
    runs: usize,
) -> Result<Profile, String> {
    let cfg = &model.config;
    let (dim, q_dim, kv_dim, ffn) = (
        cfg.hidden_size,
        cfg.q_dim(),
        cfg.kv_dim(),
        cfg.intermediate_size,
    );
    let engine = QEngine::with_kernels(model, k);
    let err = |e: ch06_quantization::Error| e.to_string();
    let vocab = cfg.vocab_size as u64;
    let ids: Vec<u32> = (0..(context + tokens) as u64)
        .map(|i| ((i * 7919 + 13) % vocab) as u32)
        .collect();
    let names = [
        "rmsnorm",
        "q/k/v projections",
        "rope",
        "kv write",
        "attention",
        "o projection",
        "residual adds",
        "gate/up projections",
        "silu*up",
        "down projection",
        "final norm + lm head",
    ];
    let mut best = vec![f64::MAX; names.len()];
    let mut forward_best = f64::MAX;
    for _ in 0..runs {
        let mut t = vec![0.0f64; names.len()];
        let mut cache = KvCache::new(engine.layout(), context + tokens);
        if context > 0 {
            engine
                .forward(&mut cache, &ids[..context], 0)
                .map_err(err)?;
        }
        let mut x = model.embed(&ids[context..]).map_err(err)?; // (tokens, dim)
        let mut clock = Instant::now();
        let mut lap = |i: usize, clock: &mut Instant| {
            t[i] += clock.elapsed().as_secs_f64();
            *clock = Instant::now();
        };
        for (l, w) in model.layers.iter().enumerate() {
            let seq = tokens;
            let xn = rmsnorm_rows(&x, &w.input_norm, cfg.rms_norm_eps);
            lap(0, &mut clock);
            let (mut q, mut kk, mut v) = (
                vec![0.0f32; seq * q_dim],
                vec![0.0f32; seq * kv_dim],
                vec![0.0f32; seq * kv_dim],
            );
            w.wq.matmul_with(k, &mut q, &xn, seq);
            w.wk.matmul_with(k, &mut kk, &xn, seq);
            w.wv.matmul_with(k, &mut v, &xn, seq);
            lap(1, &mut clock);
            model
                .rope
                .apply(&mut q, cfg.n_heads, context, Pairing::SplitHalves);
            model
                .rope
                .apply(&mut kk, cfg.n_kv_heads, context, Pairing::SplitHalves);
            lap(2, &mut clock);
            for tk in 0..seq {
                cache.write(
                    l,
                    context + tk,
                    &kk[tk * kv_dim..(tk + 1) * kv_dim],
                    &v[tk * kv_dim..(tk + 1) * kv_dim],
                );
            }
            lap(3, &mut clock);
            let mut heads_out = vec![0.0f32; seq * q_dim];
            let store = &cache;
            heads_out.par_chunks_mut(q_dim).enumerate().for_each_init(
                Vec::new,
                |scores, (tk, out)| {
                    attend(
                        k,
                        out,
                        &q[tk * q_dim..(tk + 1) * q_dim],
                        store,
                        l,
                        cfg.heads(),
                        context + tk,
                        scores,
                    );
                },
            );
            lap(4, &mut clock);
            let mut o = vec![0.0f32; seq * dim];
            w.wo.matmul_with(k, &mut o, &heads_out, seq);
            lap(5, &mut clock);
            ops::add_inplace(&mut x, &o);
            lap(6, &mut clock);
            let xn = rmsnorm_rows(&x, &w.post_norm, cfg.rms_norm_eps);
            lap(0, &mut clock);
            let (mut gate, mut up) = (vec![0.0f32; seq * ffn], vec![0.0f32; seq * ffn]);
            w.w_gate.matmul_with(k, &mut gate, &xn, seq);
            w.w_up.matmul_with(k, &mut up, &xn, seq);
            lap(7, &mut clock);
            k.silu(&mut gate);
            ops::mul_inplace(&mut gate, &up);
            lap(8, &mut clock);
            let mut down = vec![0.0f32; seq * dim];
            w.w_down.matmul_with(k, &mut down, &gate, seq);
            lap(9, &mut clock);
            ops::add_inplace(&mut x, &down);
            lap(6, &mut clock);
        }
        std::hint::black_box(engine.head(&x[x.len() - dim..]));
        lap(10, &mut clock);
        for (b, t) in best.iter_mut().zip(&t) {
            *b = b.min(*t);
        }
        // The real thing, for the same step.
        let mut cache = KvCache::new(engine.layout(), context + tokens);
        if context > 0 {
            engine
                .forward(&mut cache, &ids[..context], 0)
                .map_err(err)?;
        }
        let start = Instant::now();
        engine
            .forward(&mut cache, &ids[context..], context)
            .map_err(err)?;
        forward_best = forward_best.min(start.elapsed().as_secs_f64());
    }
    let layer_bytes = |f: &dyn Fn(&ch06_quantization::model::QLayer) -> usize| {
        model.layers.iter().map(f).sum::<usize>()
    };
    let bytes = [
        0,
        layer_bytes(&|l| l.wq.bytes() + l.wk.bytes() + l.wv.bytes()),
        0,
        0,
        0,
        layer_bytes(&|l| l.wo.bytes()),
        0,
        layer_bytes(&|l| l.w_gate.bytes() + l.w_up.bytes()),
        0,
        layer_bytes(&|l| l.w_down.bytes()),
        model.lm_head().bytes(),
    ];
    let ops: Vec<OpTime> = names
        .iter()
        .zip(&best)
        .zip(bytes)
        .map(|((&op, &s), b)| OpTime {
            op,
            ms: s * 1e3,
            weight_bytes: b,
        })
        .collect();
    let total_ms = ops.iter().map(|o| o.ms).sum();
    Ok(Profile {
        tokens,
        context,
        ops,
        total_ms,
        forward_ms: forward_best * 1e3,
    })
}
// ANCHOR_END: profile
