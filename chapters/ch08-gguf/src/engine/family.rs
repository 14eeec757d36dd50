//! What each architecture does differently, as data: [`Family`], one constructor a family,
//! and the GELU the Gemma families' feed-forward uses.
//!
//! The facts are llama.cpp's (the pinned version's `src/models/<arch>.cpp`, and
//! `llama_model_rope_type` in `src/llama-model.cpp` for which RoPE each family uses); the
//! values a file can change (the soft-caps, the window) are read by `families.rs`.

use ch06_quantization::f16::{f16_to_f32_fast, f32_to_f16, round_f16};

// ANCHOR: family_kinds
/// The feed-forward network's gate activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// `x · σ(x)` (Llama).
    Silu,
    /// GELU, tanh form, computed as llama.cpp does: input rounded to f16, output rounded to
    /// f16 (its 65 536-entry table), exact beyond ±10 (Gemma).
    GeluTanhF16,
}

/// How the file's query and key rows pair up for RoPE (llama.cpp's rope types).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeRows {
    /// llama.cpp's "normal" RoPE: its converter reordered each head's Q and K rows so that
    /// adjacent coordinates pair up; we put them back at load (`model::unpermute_rows`) and
    /// rotate halves, as chapter 3 does (Llama, Mistral).
    Interleaved,
    /// "NeoX" RoPE: the rows are as trained, coordinate `i` pairs with `i + head_dim/2`
    /// (Qwen, Phi-3, Gemma).
    Halves,
}

/// Some layers see only the last `window` positions: layer `l` does when
/// `l % every != every − 1` (llama.cpp's `set_swa_pattern`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sliding {
    pub window: usize,
    pub every: usize,
}

impl Sliding {
    pub fn slides(&self, layer: usize) -> bool {
        layer % self.every != self.every - 1
    }
}

// ANCHOR_END: family_kinds

// ANCHOR: family
/// What one architecture does differently, as data.
#[derive(Clone, Debug, PartialEq)]
pub struct Family {
    pub name: &'static str,
    /// Multiply the embedding rows by this (Gemma: √dim).
    pub embed_scale: Option<f32>,
    pub activation: Activation,
    pub rope_rows: RopeRows,
    /// RMSNorm each head of Q and K (with the layer's `q_norm`, `k_norm`) before RoPE.
    pub qk_norm: bool,
    /// RMSNorm the attention output and the FFN output before adding them to the stream.
    pub post_norms: bool,
    /// Scores are `attn_scale · q·k` (`None`: `1/√head_dim`).
    pub attn_scale: Option<f32>,
    /// Scores become `cap · tanh(score / cap)` before the softmax (Gemma-2).
    pub attn_softcap: Option<f32>,
    /// Logits become `cap · tanh(logit / cap)` (Gemma-2).
    pub final_softcap: Option<f32>,
    /// Which layers slide, and how far they see.
    pub sliding: Option<Sliding>,
}

// ANCHOR_END: family

// ANCHOR: constructors
impl Family {
    pub fn llama() -> Family {
        Family {
            name: "llama",
            embed_scale: None,
            activation: Activation::Silu,
            rope_rows: RopeRows::Interleaved,
            qk_norm: false,
            post_norms: false,
            attn_scale: None,
            attn_softcap: None,
            final_softcap: None,
            sliding: None,
        }
    }

    /// Qwen2 (and 2.5): Llama's layer with biases on Q, K and V (optional tensors for
    /// every family: the loader reads them where the file has them), rotated in halves.
    pub fn qwen2() -> Family {
        Family {
            name: "qwen2",
            rope_rows: RopeRows::Halves,
            ..Family::llama()
        }
    }

    /// Qwen3: no biases; every head of Q and K RMS-normalised before RoPE.
    pub fn qwen3() -> Family {
        Family {
            name: "qwen3",
            qk_norm: true,
            ..Family::qwen2()
        }
    }

    /// Phi-3: Llama's layer from fused tensors (Q, K and V in one matrix, gate and up in
    /// another; the loader splits them), rotated in halves.
    pub fn phi3() -> Family {
        Family {
            name: "phi3",
            ..Family::qwen2()
        }
    }

    // ANCHOR_END: constructors
    // ANCHOR: constructors_gemma
    /// Gemma-2: √dim embedding, GELU, post-norms, soft-capped scores and logits, and every
    /// other layer (the even ones) sliding over 4 096 positions.
    pub fn gemma2(dim: usize) -> Family {
        Family {
            name: "gemma2",
            embed_scale: Some((dim as f32).sqrt()),
            activation: Activation::GeluTanhF16,
            rope_rows: RopeRows::Halves,
            post_norms: true,
            attn_softcap: Some(50.0),
            final_softcap: Some(30.0),
            sliding: Some(Sliding {
                window: 4096,
                every: 2,
            }),
            ..Family::llama()
        }
    }

    /// Gemma-3: Gemma-2 without the soft-caps, with QK-norm, five of six layers sliding.
    pub fn gemma3(dim: usize) -> Family {
        Family {
            name: "gemma3",
            qk_norm: true,
            attn_softcap: None,
            final_softcap: None,
            sliding: Some(Sliding {
                window: 512,
                every: 6,
            }),
            ..Family::gemma2(dim)
        }
    }
}
// ANCHOR_END: constructors_gemma

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
pub fn gelu_table() -> &'static [f32] {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// llama.cpp's `set_swa_pattern(n)`: layer `l` slides unless `l % n == n − 1`.
    #[test]
    fn which_layers_slide() {
        let slides = |f: Family| -> Vec<bool> {
            let s = f.sliding.expect("a Gemma family slides");
            (0..8).map(|l| s.slides(l)).collect()
        };
        assert_eq!(
            slides(Family::gemma2(64)),
            [true, false, true, false, true, false, true, false],
            "Gemma-2: the even layers slide, the odd ones see everything"
        );
        assert_eq!(
            slides(Family::gemma3(64)),
            [true, true, true, true, true, false, true, true],
            "Gemma-3: five layers of every six slide, the sixth is global"
        );
    }

    /// The table's rows, as the book's table has them.
    #[test]
    fn what_each_family_changes() {
        let (llama, qwen2, qwen3, phi3) = (
            Family::llama(),
            Family::qwen2(),
            Family::qwen3(),
            Family::phi3(),
        );
        assert_eq!(
            llama.rope_rows,
            RopeRows::Interleaved,
            "Llama's rows are un-permuted"
        );
        for f in [
            &qwen2,
            &qwen3,
            &phi3,
            &Family::gemma2(4),
            &Family::gemma3(4),
        ] {
            assert_eq!(
                f.rope_rows,
                RopeRows::Halves,
                "{} rotates halves as stored",
                f.name
            );
        }
        assert!(
            qwen3.qk_norm && !qwen2.qk_norm,
            "Qwen3 adds QK-norm to Qwen2"
        );
        let g2 = Family::gemma2(64);
        assert_eq!(
            g2.embed_scale,
            Some(8.0),
            "Gemma scales the embedding by √64"
        );
        assert!(
            g2.attn_softcap.is_some() && g2.final_softcap.is_some(),
            "Gemma-2 caps both"
        );
        let g3 = Family::gemma3(64);
        assert!(
            g3.attn_softcap.is_none() && g3.qk_norm,
            "Gemma-3 has QK-norm, no caps"
        );
    }
}
