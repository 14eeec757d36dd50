//! Where Gemma-3 differs from Llama, as data: [`Family`], and the GELU its feed-forward uses.

use ch06_quantization::f16::{f16_to_f32_fast, f32_to_f16, round_f16};

// ANCHOR: family
/// The feed-forward network's gate activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// `x · σ(x)` (Llama).
    Silu,
    /// GELU, tanh form, computed as llama.cpp does: input rounded to f16, output rounded to
    /// f16 (its 65 536-entry table), exact beyond ±10 (Gemma).
    GeluTanhF16,
}

/// What one architecture does differently, as data.
#[derive(Clone, Debug, PartialEq)]
pub struct Family {
    pub name: &'static str,
    /// Multiply the embedding rows by this (Gemma: √dim).
    pub embed_scale: Option<f32>,
    pub activation: Activation,
    /// RMSNorm each head of Q and K (with the layer's `q_norm`, `k_norm`) before RoPE.
    pub qk_norm: bool,
    /// RMSNorm the attention output and the FFN output before adding them to the stream.
    pub post_norms: bool,
}

impl Family {
    pub fn llama() -> Family {
        Family {
            name: "llama",
            embed_scale: None,
            activation: Activation::Silu,
            qk_norm: false,
            post_norms: false,
        }
    }

    pub fn gemma3(dim: usize) -> Family {
        Family {
            name: "gemma3",
            embed_scale: Some((dim as f32).sqrt()),
            activation: Activation::GeluTanhF16,
            qk_norm: true,
            post_norms: true,
        }
    }
}
// ANCHOR_END: family

// ANCHOR: gelu
/// llama.cpp's GELU: `0.5·x·(1 + tanh(√(2/π)·x·(1 + 0.044715·x²)))`, looked up in a table
/// indexed by `x` rounded to f16 and holding f16 results; 0 below −10 and `x` above 10.
pub fn gelu_f16(x: f32) -> f32 {
    if x <= -10.0 {
        0.0
    } else if x >= 10.0 {
        x
    } else {
        gelu_table()[usize::from(f32_to_f16(x))]
    }
}

/// GELU of every f16 value, rounded to f16 (and stored as the f32 it rounds to): 256 kB,
/// made once.
pub(super) fn gelu_table() -> &'static [f32] {
    static TABLE: std::sync::OnceLock<Vec<f32>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        (0..=u16::MAX)
            .map(|bits| {
                let x = f16_to_f32_fast(bits);
                round_f16(0.5 * x * (1.0 + (0.797_884_6_f32 * x * (1.0 + 0.044715 * x * x)).tanh()))
            })
            .collect()
    })
}
// ANCHOR_END: gelu
