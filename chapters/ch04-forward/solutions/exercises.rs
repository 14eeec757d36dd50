//! Exercises for chapter 4. Fill in each `todo!()`, then run
//! `cargo xtask exercises ch04` (or `cargo test --release -p ch04-forward --features exercises --test exercises`).
//! Each test compares your function with the chapter's implementation, on made-up numbers
//! worked out by hand and on SmolLM2 itself.
#![allow(unused_variables)]

use ch01_tensors::ops;

use crate::Config;

/// Exercise 1: the expected shape of a weight.
///
/// Given the config and a tensor name from a Hugging Face Llama checkpoint, return the
/// shape the tensor must have, or `None` if the name is not one this chapter's model
/// uses. The names are `model.embed_tokens.weight`, `model.norm.weight`, `lm_head.weight`,
/// and, for each layer `N` below `cfg.num_layers`, `model.layers.N.` followed by
/// `input_layernorm.weight`, `post_attention_layernorm.weight`,
/// `self_attn.{q,k,v,o}_proj.weight` and `mlp.{gate,up,down}_proj.weight`. Matrices are
/// `[out_features, in_features]`: `k_proj` turns a `hidden_size` row into
/// `n_kv_heads * head_dim` numbers, so it is `[n_kv_heads * head_dim, hidden_size]`.
///
/// Hint: strip the `model.layers.N.` prefix (check that N parses and is in range), then
/// `match` on the rest. `cfg.q_dim()` and `cfg.kv_dim()` are there to help.
pub fn expected_shape(cfg: &Config, name: &str) -> Option<Vec<usize>> {
    let (dim, ffn) = (cfg.hidden_size, cfg.intermediate_size);
    match name {
        "model.embed_tokens.weight" | "lm_head.weight" => return Some(vec![cfg.vocab_size, dim]),
        "model.norm.weight" => return Some(vec![dim]),
        _ => {}
    }
    let rest = name.strip_prefix("model.layers.")?;
    let (layer, tensor) = rest.split_once('.')?;
    let layer: usize = layer.parse().ok()?;
    if layer >= cfg.num_layers {
        return None;
    }
    let shape = match tensor {
        "input_layernorm.weight" | "post_attention_layernorm.weight" => vec![dim],
        "self_attn.q_proj.weight" => vec![cfg.q_dim(), dim],
        "self_attn.k_proj.weight" | "self_attn.v_proj.weight" => vec![cfg.kv_dim(), dim],
        "self_attn.o_proj.weight" => vec![dim, cfg.q_dim()],
        "mlp.gate_proj.weight" | "mlp.up_proj.weight" => vec![ffn, dim],
        "mlp.down_proj.weight" => vec![dim, ffn],
        _ => return None,
    };
    Some(shape)
}

/// Exercise 2: the SwiGLU feed-forward network on one row.
///
/// `x` is one normalised row (`dim`); `w_gate` and `w_up` are `(ffn, dim)`, `w_down` is
/// `(dim, ffn)`, all row-major in `nn.Linear` layout (one row per output). Return
/// `w_down · (SiLU(w_gate · x) ⊙ (w_up · x))`, a row of `dim` values, where
/// `SiLU(g) = g / (1 + e^(−g))` and `⊙` multiplies element by element.
///
/// Hint: `ffn = w_gate.len() / x.len()`. Output `i` of a product `w · x` is the dot product
/// of row `i` of `w` (`w[i * cols..(i + 1) * cols]`) with `x`; `ch01_tensors::ops::matvec`
/// does exactly that, and `ops::silu` is SiLU.
pub fn swiglu_ffn(x: &[f32], w_gate: &[f32], w_up: &[f32], w_down: &[f32]) -> Vec<f32> {
    let ffn = w_gate.len() / x.len();
    let mut gate = vec![0.0f32; ffn]; // (ffn)
    let mut up = vec![0.0f32; ffn]; // (ffn)
    ops::matvec(&mut gate, w_gate, x);
    ops::matvec(&mut up, w_up, x);
    for (g, u) in gate.iter_mut().zip(&up) {
        *g = ops::silu(*g) * u;
    }
    let mut out = vec![0.0f32; x.len()]; // (dim)
    ops::matvec(&mut out, w_down, &gate);
    out
}

/// Exercise 3: the residual wiring of one decoder layer.
///
/// `x` is the residual stream, `(seq, dim)` row-major, updated in place. Wire the two
/// sublayers the Llama way:
///
/// ```text
/// x = x + attention(RMSNorm(x, attn_norm))
/// x = x + ffn(RMSNorm(x, ffn_norm))
/// ```
///
/// `attention` and `ffn` take a normalised `(seq, dim)` buffer and return what to add,
/// `(seq, dim)`. RMSNorm works row by row: each row `r` becomes
/// `r / sqrt(mean(r²) + eps) ⊙ weight`.
///
/// Hint: normalise into a *new* buffer (`ch01_tensors::ops::rmsnorm` does one row); the
/// residual stream itself is never normalised. The second norm reads `x` after the first
/// addition.
pub fn residual_wiring(
    x: &mut [f32],
    attn_norm: &[f32],
    ffn_norm: &[f32],
    eps: f32,
    attention: &dyn Fn(&[f32]) -> Vec<f32>,
    ffn: &dyn Fn(&[f32]) -> Vec<f32>,
) {
    let norm = |x: &[f32], weight: &[f32]| {
        let mut out = vec![0.0f32; x.len()]; // (seq, dim)
        for (o, row) in out
            .chunks_exact_mut(weight.len())
            .zip(x.chunks_exact(weight.len()))
        {
            ops::rmsnorm(o, row, weight, eps);
        }
        out
    };
    let a = attention(&norm(x, attn_norm)); // (seq, dim)
    ops::add_inplace(x, &a);
    let f = ffn(&norm(x, ffn_norm)); // (seq, dim)
    ops::add_inplace(x, &f);
}

/// Exercise 4: the final norm and the tied LM head.
///
/// `h` is the residual stream of the last position after the last layer (`dim`). Return
/// the logits (`vocab`): RMSNorm `h` with `final_norm` and `eps`, then take the dot product
/// of the result with every row of the embedding table `embed` (`(vocab, dim)`). Tied
/// embeddings: the matrix that turned token ids into vectors turns the final vector back
/// into a score per token.
///
/// Hint: `vocab = embed.len() / h.len()`; `ch01_tensors::ops::rmsnorm` and `ops::matvec`.
pub fn tied_lm_head(h: &[f32], final_norm: &[f32], embed: &[f32], eps: f32) -> Vec<f32> {
    let mut hn = vec![0.0f32; h.len()]; // (dim)
    ops::rmsnorm(&mut hn, h, final_norm, eps);
    let mut logits = vec![0.0f32; embed.len() / h.len()]; // (vocab)
    ops::matvec(&mut logits, embed, &hn);
    logits
}

/// Exercise 5: the greedy loop.
///
/// Generate `n` tokens after `prompt`. `next_logits` is the model: given the *whole*
/// sequence so far (prompt and everything generated), it returns the logits of the next
/// token (`vocab` values). Each step, append the id of the largest logit (the lowest id
/// if several are equal). Return only the generated ids.
///
/// Hint: keep one `Vec<u32>` with prompt + generated ids; return the part after the
/// prompt. Take care with ties: `Iterator::max_by` returns the *last* maximum.
pub fn greedy_loop(
    prompt: &[u32],
    n: usize,
    next_logits: &mut dyn FnMut(&[u32]) -> Vec<f32>,
) -> Vec<u32> {
    let mut ids = prompt.to_vec(); // prompt + generated so far
    for _ in 0..n {
        let logits = next_logits(&ids); // (vocab)
        let mut best = 0;
        for (i, &v) in logits.iter().enumerate() {
            if v > logits[best] {
                best = i;
            }
        }
        ids.push(best as u32);
    }
    ids[prompt.len()..].to_vec()
}
