//! Which family a file holds, and what its metadata adds to the family's defaults: the
//! soft-caps, the window, the attention scale, the RoPE scaling.
//!
//! Each rule is llama.cpp's for that architecture (the pinned version's
//! `src/models/<arch>.cpp`, `load_arch_hparams`; the RoPE scaling in `load_hparams` of
//! `src/llama-model.cpp` and `llama_context`'s constructor): where llama.cpp ignores a key,
//! so do we, and the comment says so.

use ch04_forward::Config;

use crate::engine::{Family, LazyRope, RopeScaling, Sliding};
use crate::error::{Error, Result};
use crate::file::GgufFile;
use crate::gguf::Gguf;

// ANCHOR: table
/// The family of architecture `arch` (`general.architecture`), with the settings its file
/// gives.
pub fn family(g: &Gguf, arch: &str, cfg: &Config) -> Result<Family> {
    let dim = cfg.hidden_size;
    let mut family = match arch {
        "llama" => Family::llama(),
        "qwen2" => Family::qwen2(),
        "qwen3" => Family::qwen3(),
        "phi3" => Family::phi3(),
        "gemma2" => Family::gemma2(dim),
        "gemma3" => Family::gemma3(dim),
        _ => return Err(unsupported(arch)),
    };
    // ANCHOR_END: table
    let key = |k: &str| format!("{arch}.{k}");
    let float = |k: &str| -> Result<Option<f32>> { Ok(g.opt_f64(&key(k))?.map(|v| v as f32)) };
    if arch == "llama" {
        // Mixtral's files are `llama` with experts: not this chapter's feed-forward.
        if let Some(n) = g.opt_u64(&key("expert_count"))?
            && n > 0
        {
            return Err(Error::Unsupported(format!(
                "{arch} with {n} experts (a mixture of experts)"
            )));
        }
        // Granite-style files give the scale; Llama's and Mistral's do not. A Mistral file's
        // `llama.attention.sliding_window` is not read: llama.cpp's llama graph attends to
        // every position, so for parity so do we.
        family.attn_scale = float("attention.scale")?.filter(|&s| s != 0.0);
    }
    // Phi-3's `phi3.attention.sliding_window` is not read either: llama.cpp turns Phi's
    // window off ("Phi SWA is currently disabled").
    if arch == "gemma2" {
        family.attn_softcap = float("attn_logit_softcapping")?.or(family.attn_softcap);
    }
    if arch == "gemma2" || arch == "gemma3" {
        // a final soft-cap of 0 is none (llama.cpp's gemma3 applies one only when set)
        family.final_softcap = float("final_logit_softcapping")?
            .or(family.final_softcap)
            .filter(|&c| c != 0.0);
        // the 27B models scale queries by 1/√(dim/heads), not 1/√head_dim; llama.cpp
        // recognises them by their layer count
        let big = (arch == "gemma2" && cfg.num_layers == 46)
            || (arch == "gemma3" && cfg.num_layers == 62);
        if big {
            family.attn_scale = Some(1.0 / ((dim / cfg.n_heads) as f32).sqrt());
        }
        family.sliding = sliding(g, arch, family.sliding)?;
    }
    for cap in [family.attn_softcap, family.final_softcap]
        .into_iter()
        .flatten()
    {
        if !(cap.is_finite() && cap > 0.0) {
            return Err(Error::Metadata {
                key: key("attn_logit_softcapping / final_logit_softcapping"),
                message: format!("{cap} is not a soft-cap"),
            });
        }
    }
    Ok(family)
}

fn unsupported(arch: &str) -> Error {
    Error::Unsupported(format!(
        "architecture {arch:?} (general.architecture); this chapter runs {:?}",
        crate::config::ARCHITECTURES
    ))
}

/// Gemma's window: `{arch}.attention.sliding_window` (Gemma-2 defaults to 4 096; a Gemma-3
/// file without one, or with 0, has none) and `{arch}.attention.sliding_window_pattern`
/// (every how many layers one is global).
fn sliding(g: &Gguf, arch: &str, default: Option<Sliding>) -> Result<Option<Sliding>> {
    let key = format!("{arch}.attention.sliding_window");
    let window = match (g.opt_u64(&key)?, default) {
        (Some(0), _) | (None, None) => return Ok(None),
        (None, Some(d)) if arch == "gemma2" => d.window as u64,
        (None, _) => return Ok(None),
        (Some(w), _) => w,
    };
    let window = usize::try_from(window).map_err(|_| Error::Metadata {
        key: key.clone(),
        message: format!("{window} is not a window"),
    })?;
    let pattern_key = format!("{arch}.attention.sliding_window_pattern");
    let every = match g.opt_u64(&pattern_key)? {
        Some(n) => usize::try_from(n)
            .ok()
            .filter(|&n| n > 0)
            .ok_or(Error::Metadata {
                key: pattern_key,
                message: format!("{n} is not a pattern (every how many layers one is global)"),
            })?,
        None => default.map_or(1, |d| d.every),
    };
    Ok(Some(Sliding { window, every }))
}

// ANCHOR: ropes
/// The model's RoPE tables: `[global]`, or `[global, sliding]` when some layers slide (Gemma's
/// sliding layers rotate with `{arch}.rope.freq_base_swa`: Gemma-3's default is 10 000,
/// Gemma-2's the global base). `max_pos`: the context the model is set up for.
pub fn ropes(f: &GgufFile, arch: &str, cfg: &Config, family: &Family) -> Result<Vec<LazyRope>> {
    let g = &f.gguf;
    let (hd, max_pos) = (cfg.head_dim, cfg.max_position_embeddings);
    let scaling = rope_scaling(f, arch, cfg)?;
    let rope = |theta: f32, scaling: RopeScaling| {
        LazyRope::scaled(hd, max_pos, theta, scaling).map_err(|e| Error::Unsupported(e.to_string()))
    };
    let mut ropes = vec![rope(cfg.rope_theta, scaling.clone())?];
    if family.sliding.is_some() {
        let default = if arch == "gemma2" {
            cfg.rope_theta
        } else {
            10_000.0
        };
        let base = g.opt_f64(&format!("{arch}.rope.freq_base_swa"))?;
        let base = base.map_or(default, |b| b as f32);
        // Gemma-3's sliding layers are not stretched (llama.cpp's freq_scale_swa is 1);
        // attn_factor applies to every layer
        let swa_scaling = if arch == "gemma2" {
            scaling
        } else {
            RopeScaling {
                mscale: scaling.mscale,
                ..RopeScaling::NONE
            }
        };
        ropes.push(rope(base, swa_scaling)?);
    }
    Ok(ropes)
}
// ANCHOR_END: ropes

// ANCHOR: rope_scaling
/// `{arch}.rope.scaling.*` and the factor tensors, as llama.cpp reads them:
/// - type `none`: no stretch; `linear` (the default) and `longrope`: every angle times
///   `1/rope.scaling.factor` (when the file gives one); `yarn`: refused;
/// - `rope.scaling.attn_factor`: cos and sin times it (Phi-3's long-context files);
/// - `rope_freqs.weight` (Llama 3.1 and later): pair `i`'s frequency divided by factor `i`;
/// - `rope_factors_long` / `_short` (Phi-3): the long ones when the context the model is set
///   up for is longer than `rope.scaling.original_context_length`, else the short ones.
pub fn rope_scaling(f: &GgufFile, arch: &str, cfg: &Config) -> Result<RopeScaling> {
    let g = &f.gguf;
    let key = |k: &str| format!("{arch}.rope.scaling.{k}");
    let kind = g.opt_str(&key("type"))?.unwrap_or("linear");
    let factor = match g.opt_f64(&key("factor"))? {
        Some(x) => Some(x),
        None => g.opt_f64(&format!("{arch}.rope.scale_linear"))?,
    };
    let freq_scale = match (kind, factor) {
        ("none", _) | (_, None) => 1.0,
        (_, Some(0.0)) => 1.0,
        ("linear" | "longrope", Some(x)) => (1.0 / x) as f32,
        _ => 1.0, // refused below
    };
    if !matches!(kind, "none" | "linear" | "longrope") {
        return Err(Error::Unsupported(format!(
            "RoPE scaling {kind:?} ({}); this chapter runs none, linear, Llama 3's factors and Phi-3's longrope",
            key("type")
        )));
    }
    let mscale = g.opt_f64(&key("attn_factor"))?.map_or(1.0, |x| x as f32);
    let pairs = cfg.head_dim / 2;
    let factors = |name: &str| -> Result<Vec<f32>> {
        let t = f.info(name)?;
        crate::model::check_dims(t, &[pairs])?;
        f.f32s(t)
    };
    let factors = match factor_tensor(f, arch, cfg)? {
        Some(name) => Some(factors(name)?),
        None => None,
    };
    Ok(RopeScaling {
        freq_scale,
        factors,
        mscale,
    })
}

// ANCHOR_END: rope_scaling

// ANCHOR: factor_tensor
/// Which factor tensor the model's RoPE divides by, if any: `rope_freqs` for Llama 3;
/// for Phi-3 (and a `longrope` Llama), the long factors when the context the model is set
/// up for is longer than `rope.scaling.original_context_length` (the file's context length
/// when absent), else the short ones: llama.cpp's `get_rope_factors`, with our context
/// (`config::MAX_CONTEXT` at most) as its `n_ctx`.
pub fn factor_tensor(f: &GgufFile, arch: &str, cfg: &Config) -> Result<Option<&'static str>> {
    let g = &f.gguf;
    let kind = g.opt_str(&format!("{arch}.rope.scaling.type"))?;
    let longrope = kind == Some("longrope");
    if arch == "llama" && !longrope {
        return Ok(g.tensor(FREQS).map(|_| FREQS));
    }
    if !(arch == "phi3" || (arch == "llama" && longrope)) || g.tensor(LONG).is_none() {
        return Ok(None);
    }
    let orig = match g.opt_u64(&format!("{arch}.rope.scaling.original_context_length"))? {
        Some(n) => n,
        None => g.u64(&format!("{arch}.context_length"))?,
    };
    Ok(Some(if cfg.max_position_embeddings as u64 > orig {
        LONG
    } else {
        SHORT
    }))
}

/// The factor tensors' names (one for every layer, as llama.cpp's converter writes them).
pub const FREQS: &str = "rope_freqs.weight";
pub const LONG: &str = "rope_factors_long.weight";
pub const SHORT: &str = "rope_factors_short.weight";
// ANCHOR_END: factor_tensor

// ANCHOR: describe
/// What `inspect` says about the file's family: its name and what it does beyond Llama's
/// layer, from the metadata and the tensor names alone (no weights read); or why this
/// chapter cannot run it.
pub fn describe(f: &GgufFile) -> Result<(String, Vec<String>)> {
    let g = &f.gguf;
    let cfg = crate::config::config(g)?;
    let arch = g.str("general.architecture")?;
    let family = family(g, arch, &cfg)?;
    let scaling = rope_scaling(f, arch, &cfg)?;
    let has = |t: &str| g.tensor(&format!("blk.0.{t}")).is_some();
    let mut adds = vec![match family.rope_rows {
        crate::engine::RopeRows::Interleaved => {
            "RoPE on pairs the converter interleaved (rows un-permuted at load)".to_string()
        }
        crate::engine::RopeRows::Halves => {
            "RoPE in halves (NeoX order, rows as stored)".to_string()
        }
    }];
    if has("attn_q.bias") || has("attn_qkv.bias") {
        adds.push("biases on Q, K and V".into());
    }
    if family.qk_norm {
        adds.push("QK-norm: RMSNorm on every head of Q and K".into());
    }
    if family.post_norms {
        adds.push("post-norms after attention and feed-forward".into());
    }
    if has("attn_qkv.weight") {
        adds.push("fused Q/K/V matrix (attn_qkv, cut in three at load)".into());
    }
    if !has("ffn_gate.weight") {
        adds.push("fused gate and up (ffn_up holds both, gate first)".into());
    }
    if let Some(s) = family.embed_scale {
        adds.push(format!("embedding × {s:.2} (√dim)"));
    }
    if family.activation == crate::engine::Activation::GeluTanhF16 {
        adds.push("GELU feed-forward".into());
    }
    if let Some(s) = family.attn_scale {
        adds.push(format!("attention scale {s:.5}"));
    }
    if let Some(c) = family.attn_softcap {
        adds.push(format!("attention scores soft-capped at {c}"));
    }
    if let Some(c) = family.final_softcap {
        adds.push(format!("logits soft-capped at {c}"));
    }
    if let Some(s) = family.sliding {
        adds.push(format!(
            "sliding window of {} positions on {} of every {} layers",
            s.window,
            s.every - 1,
            s.every
        ));
    }
    if scaling.freq_scale != 1.0 {
        adds.push(format!(
            "RoPE angles × {} (linear scaling)",
            scaling.freq_scale
        ));
    }
    if scaling.factors.is_some() {
        let which = [FREQS, LONG, SHORT]
            .into_iter()
            .filter(|n| g.tensor(n).is_some())
            .collect::<Vec<_>>()
            .join(", ");
        adds.push(format!(
            "RoPE frequencies divided by per-pair factors ({which})"
        ));
    }
    if scaling.mscale != 1.0 {
        adds.push(format!(
            "RoPE cos and sin × {} (attn_factor)",
            scaling.mscale
        ));
    }
    let window_key = format!("{arch}.attention.sliding_window");
    if family.sliding.is_none() && g.get(&window_key).is_some() {
        adds.push(format!(
            "{window_key} not applied (llama.cpp does not either)"
        ));
    }
    Ok((family.name.to_string(), adds))
}
// ANCHOR_END: describe
