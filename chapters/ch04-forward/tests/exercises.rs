#![cfg(feature = "exercises")]
//! Tests for the chapter 4 exercises: `cargo xtask exercises ch04`, or
//! `cargo test --release -p ch04-forward --features exercises --test exercises`.
//! Each one checks your function against the chapter's implementation, on numbers worked
//! out by hand and on SmolLM2 (fetch it with `cargo xtask fetch-models smollm2`).

use std::sync::OnceLock;

use ch01_tensors::models;
use ch01_tensors::safetensors::SafeTensors;
use ch04_forward::attention::{NoCache, attention_block};
use ch04_forward::exercises;
use ch04_forward::ffn::ffn;
use ch04_forward::layer::layer_forward;
use ch04_forward::model::argmax;
use ch04_forward::{Config, Model};

/// SmolLM2, loaded once for all tests; a missing model fails with how to fetch it.
fn smollm2() -> &'static Model {
    static MODEL: OnceLock<Model> = OnceLock::new();
    MODEL.get_or_init(|| {
        let dir = models::require(&models::smollm2_hf_dir().join("model.safetensors"))
            .map(|p| p.parent().unwrap().to_path_buf())
            .unwrap_or_else(|e| panic!("{e}"));
        Model::load(&dir).expect("load SmolLM2")
    })
}

/// "The capital of France is", as SmolLM2's tokenizer and llama.cpp encode it.
const CAPITAL: [u32; 5] = [504, 3575, 282, 4649, 314];
/// " Paris".
const PARIS: u32 = 7042;

fn max_diff(a: &[f32], b: &[f32]) -> (f32, usize) {
    assert_eq!(
        a.len(),
        b.len(),
        "your result has {} values, the chapter's has {}",
        a.len(),
        b.len()
    );
    a.iter()
        .zip(b)
        .enumerate()
        .fold((0.0, 0), |(m, at), (i, (x, y))| {
            let d = (x - y).abs();
            if d > m || d.is_nan() { (d, i) } else { (m, at) }
        })
}

#[test]
fn ex1_expected_shape() {
    let cfg = smollm2().config.clone();
    let shape = |name: &str| exercises::expected_shape(&cfg, name);
    assert_eq!(
        shape("model.layers.0.self_attn.k_proj.weight"),
        Some(vec![192, 576]),
        "k_proj is (n_kv_heads * head_dim, hidden) = (3 * 64, 576)"
    );
    assert_eq!(
        shape("model.layers.29.self_attn.o_proj.weight"),
        Some(vec![576, 576]),
        "o_proj maps the 9 heads × 64 back to hidden: (576, 576)"
    );
    assert_eq!(
        shape("model.layers.7.mlp.down_proj.weight"),
        Some(vec![576, 1536]),
        "down_proj is (hidden, intermediate) = (576, 1536)"
    );
    assert_eq!(
        shape("model.embed_tokens.weight"),
        Some(vec![49152, 576]),
        "the embedding table is (vocab, hidden)"
    );
    assert_eq!(
        shape("model.norm.weight"),
        Some(vec![576]),
        "the final norm's gain is one number per hidden coordinate"
    );
    assert_eq!(
        shape("model.layers.30.mlp.up_proj.weight"),
        None,
        "SmolLM2 has layers 0..=29: layer 30 does not exist"
    );
    assert_eq!(
        shape("model.layers.x.mlp.up_proj.weight"),
        None,
        "\"x\" is not a layer number"
    );
    assert_eq!(
        shape("model.layers.3.self_attn.rotary_emb.inv_freq"),
        None,
        "not a tensor this model uses"
    );

    // A made-up config where every number differs, so no two can be confused.
    let odd = Config {
        hidden_size: 10,
        num_layers: 2,
        n_heads: 4,
        n_kv_heads: 2,
        head_dim: 6,
        intermediate_size: 14,
        vocab_size: 50,
        ..cfg.clone()
    };
    for (name, want) in [
        ("model.layers.1.self_attn.q_proj.weight", vec![24, 10]),
        ("model.layers.1.self_attn.v_proj.weight", vec![12, 10]),
        ("model.layers.0.self_attn.o_proj.weight", vec![10, 24]),
        ("model.layers.0.mlp.gate_proj.weight", vec![14, 10]),
        ("model.layers.1.post_attention_layernorm.weight", vec![10]),
        ("lm_head.weight", vec![50, 10]),
    ] {
        assert_eq!(
            exercises::expected_shape(&odd, name),
            Some(want.clone()),
            "{name} with hidden 10, 4 heads × 6, 2 KV heads, ffn 14, vocab 50"
        );
    }

    // Every tensor in the real file must have exactly the shape you predict.
    let st = SafeTensors::open(models::smollm2_hf_dir().join("model.safetensors"))
        .expect("open model.safetensors");
    for name in st.names() {
        let found = &st.info(name).unwrap().shape;
        assert_eq!(
            shape(name).as_ref(),
            Some(found),
            "{name}: the file has shape {found:?}"
        );
    }
}

#[test]
fn ex2_swiglu_ffn() {
    // By hand: dim 2, ffn 2, x = [1, 2]. gate = [x0, -x1] = [1, -2]; up = [x0 + x1, x1] = [3, 2];
    // SiLU(1) = 0.7310586, SiLU(-2) = -0.2384058; products [2.1931758, -0.4768117];
    // down rows [1, 0] and [1, 1] → [2.1931758, 1.7163641].
    let got = exercises::swiglu_ffn(
        &[1.0, 2.0],
        &[1.0, 0.0, 0.0, -1.0],
        &[1.0, 1.0, 0.0, 1.0],
        &[1.0, 0.0, 1.0, 1.0],
    );
    let want = [2.193_175_8, 1.716_364];
    assert!(
        max_diff(&got, &want).0 < 1e-6,
        "SwiGLU of x = [1, 2] by hand is {want:?}, you returned {got:?}"
    );

    // SmolLM2 layer 0's FFN on two different rows, against the chapter's batched ffn().
    let m = smollm2();
    let w = &m.weights.layers[0];
    let dim = m.config.hidden_size;
    let rows: Vec<f32> = m.embed(&[504, 3575]).unwrap(); // (2, dim)
    let want = ffn(w, &m.config, &rows); // (2, dim)
    for r in 0..2 {
        let got =
            exercises::swiglu_ffn(&rows[r * dim..(r + 1) * dim], &w.w_gate, &w.w_up, &w.w_down);
        let (d, at) = max_diff(&got, &want[r * dim..(r + 1) * dim]);
        assert!(
            d < 1e-4,
            "SmolLM2 layer 0's FFN on row {r}: coordinate {at} is off by {d}"
        );
    }
}

#[test]
fn ex3_residual_wiring() {
    // By hand, dim 2, gains 1, eps 0: x = [3, 4] has RMS sqrt(12.5), so RMSNorm(x) =
    // [0.8485, 1.1314]. An "attention" that returns its input adds that; then the FFN
    // (also the identity) sees RMSNorm([3.8485, 5.1314]) = [0.8485, 1.1314] again.
    let mut x = vec![3.0f32, 4.0];
    let id = |v: &[f32]| v.to_vec();
    exercises::residual_wiring(&mut x, &[1.0, 1.0], &[1.0, 1.0], 0.0, &id, &id);
    let want = [3.0 + 2.0 * 0.848_528_1, 4.0 + 2.0 * 1.131_370_9];
    assert!(
        max_diff(&x, &want).0 < 1e-5,
        "with identity sublayers x = [3, 4] becomes {want:?}, you made {x:?} (each sublayer adds RMSNorm(x) to x)"
    );

    // The FFN must see x *after* the attention's addition, and the stream is never
    // normalised in place: attention adds [10, 0]; the FFN returns zeros.
    let mut x = vec![3.0f32, 4.0];
    exercises::residual_wiring(
        &mut x,
        &[1.0, 1.0],
        &[1.0, 1.0],
        0.0,
        &|_| vec![10.0, 0.0],
        &|v| vec![0.0; v.len()],
    );
    assert_eq!(
        x,
        vec![13.0, 4.0],
        "attention adding [10, 0] and an FFN adding zeros leave [13, 4]"
    );
    let seen = std::cell::RefCell::new(Vec::new());
    let mut x = vec![3.0f32, 4.0];
    exercises::residual_wiring(
        &mut x,
        &[1.0, 1.0],
        &[2.0, 2.0],
        0.0,
        &|_| vec![1.0, -4.0],
        &|v| {
            seen.borrow_mut().extend_from_slice(v);
            vec![0.0; v.len()]
        },
    );
    assert!(
        max_diff(&seen.borrow(), &[2.0 * 2.0_f32.sqrt(), 0.0]).0 < 1e-5,
        "the FFN must see RMSNorm(x + attention) = RMSNorm([4, 0]) × gain 2 = [2.83, 0], it saw {:?}",
        seen.borrow()
    );

    // SmolLM2 layer 0 with the chapter's attention and FFN: must equal layer_forward.
    let m = smollm2();
    let (w, cfg) = (&m.weights.layers[0], &m.config);
    let mut ours = m.embed(&CAPITAL).unwrap(); // (5, dim)
    let mut want = ours.clone();
    layer_forward(w, cfg, &m.rope, &mut want, 0, &mut NoCache::default());
    let attn = |xn: &[f32]| attention_block(w, cfg, &m.rope, xn, 0, &mut NoCache::default());
    let f = |xn: &[f32]| ffn(w, cfg, xn);
    exercises::residual_wiring(
        &mut ours,
        &w.input_norm,
        &w.post_norm,
        cfg.rms_norm_eps,
        &attn,
        &f,
    );
    let (d, at) = max_diff(&ours, &want);
    assert!(
        d < 1e-5,
        "SmolLM2 layer 0 on \"The capital of France is\": position {} coordinate {} is off by {d}",
        at / cfg.hidden_size,
        at % cfg.hidden_size
    );
}

#[test]
fn ex4_tied_lm_head() {
    // By hand: h = [3, 4] normalises to [0.8485, 1.1314]; embedding rows [1, 0], [0, 1], [1, 1].
    let got = exercises::tied_lm_head(
        &[3.0, 4.0],
        &[1.0, 1.0],
        &[1.0, 0.0, 0.0, 1.0, 1.0, 1.0],
        0.0,
    );
    let want = [0.848_528_1, 1.131_370_9, 1.979_899];
    assert!(
        max_diff(&got, &want).0 < 1e-5,
        "logits of h = [3, 4] by hand are {want:?}, you returned {got:?}"
    );

    // SmolLM2: the last hidden state of "The capital of France is" must give " Paris".
    let m = smollm2();
    let hidden = m.forward_hidden(&CAPITAL, &mut |_, _| {}).unwrap(); // (5, dim)
    let last = &hidden[4 * m.config.hidden_size..];
    let got = exercises::tied_lm_head(
        last,
        &m.weights.final_norm,
        &m.weights.embed,
        m.config.rms_norm_eps,
    );
    let want = m.head(last);
    let (d, at) = max_diff(&got, &want);
    assert!(
        d < 1e-3,
        "the logit of token {at} is off by {d} from the chapter's head()"
    );
    assert_eq!(
        argmax(&got) as u32,
        PARIS,
        "after \"The capital of France is\" the top token must be \" Paris\" (7042)"
    );
}

#[test]
fn ex5_greedy_loop() {
    // A fake model over 5 tokens: it favours (last id + 1) mod 5, and ties 0 and 4 when
    // the sequence is 3 long, where the lower id must win.
    let mut calls = Vec::new();
    let mut fake = |ids: &[u32]| {
        calls.push(ids.len());
        let mut logits = vec![0.0f32; 5];
        if ids.len() == 3 {
            logits[4] = 1.0;
            logits[0] = 1.0;
        } else {
            logits[((ids[ids.len() - 1] + 1) % 5) as usize] = 1.0;
        }
        logits
    };
    let got = exercises::greedy_loop(&[2], 4, &mut fake);
    assert_eq!(
        got,
        vec![3, 4, 0, 1],
        "after [2]: 3, 4, then a tie between 0 and 4 (take 0), then 1"
    );
    assert_eq!(
        calls,
        vec![1, 2, 3, 4],
        "each step passes the whole sequence so far to the model"
    );
    assert!(
        exercises::greedy_loop(&[1, 2], 0, &mut |_| vec![0.0]).is_empty(),
        "n = 0 generates nothing"
    );

    // SmolLM2: three greedy tokens after "The capital of France is", like generate::greedy.
    let m = smollm2();
    let got = exercises::greedy_loop(&CAPITAL, 3, &mut |ids| m.next_token_logits(ids).unwrap());
    let want = ch04_forward::generate::greedy(
        m,
        &CAPITAL,
        3,
        ch04_forward::generate::Stop::Never,
        &mut |_| Ok(()),
    )
    .unwrap()
    .ids;
    assert_eq!(
        got, want,
        "SmolLM2's greedy continuation of \"The capital of France is\""
    );
    assert_eq!(got[0], PARIS, "the first token must be \" Paris\"");
}
