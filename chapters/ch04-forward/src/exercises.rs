//! Exercises for chapter 4. Fill in each `todo!()`, then run
//! `cargo xtask exercises ch04` (or `cargo test --release -p ch04-forward --features exercises --test exercises`).
//! Each test compares your function with the chapter's implementation, on made-up numbers
//! worked out by hand and on SmolLM2 itself.
#![allow(unused_variables)]

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
    // TODO: the shape each tensor name implies, from the config's numbers.
    todo!("exercise 1: expected shape")
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
    // TODO: gate and up projections, SiLU on the gate, multiply, down projection.
    todo!("exercise 2: SwiGLU FFN")
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
    // TODO: x += attention(rmsnorm(x)); then x += ffn(rmsnorm(x)).
    todo!("exercise 3: residual wiring")
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
    // TODO: normalise, then one dot product per vocabulary row.
    todo!("exercise 4: tied LM head")
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
    // TODO: n times: logits of the whole sequence, argmax, append.
    todo!("exercise 5: greedy loop")
}
