//! The choices a product makes that are policy, not kernels: which prefill layout a level
//! with both uses, and whether matrices are packed at load. Read once, from the environment
//! where a reader can override them, and from the kernels' capabilities.

use ch07_simd_parallel::kernels::ManyTokens;

/// The two layouts a multi-token prefill can use on a CPU with AVX-512 VNNI: eight tokens to
/// a register, one per 32-bit lane ([`ch07_simd_parallel::layout::eights`], the layout every SIMD level has), or
/// four tokens' blocks interleaved so that a lane follows one (block, token) pair
/// ([`ch07_simd_parallel::layout::quads::ActQuads`], VNNI only). Both give the same bits.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PrefillLayout {
    Eights,
    Quads,
}

/// The layout `LLM_BOOK_PREFILL=eights|quads` names, read once; eights unless told: on the
/// VNNI machines the book was measured on the eights were the faster prefill, so VNNI
/// machines take them too, and the quads stay for comparison (`LLM_BOOK_PREFILL=quads`).
pub fn prefill_layout() -> PrefillLayout {
    static LAYOUT: std::sync::OnceLock<PrefillLayout> = std::sync::OnceLock::new();
    *LAYOUT.get_or_init(|| match std::env::var("LLM_BOOK_PREFILL").as_deref() {
        Ok("quads") => PrefillLayout::Quads,
        Ok("eights") | Err(_) => PrefillLayout::Eights,
        Ok(other) => {
            eprintln!(
                "warning: LLM_BOOK_PREFILL={other:?} is neither eights nor quads; using eights"
            );
            PrefillLayout::Eights
        }
    })
}

// ANCHOR: packs
/// Whether the model's Q4_0, Q4_1, Q5_0, Q4_K and Q6_K matrices are interleaved eight rows at a time
/// when they load ([`ch07_simd_parallel::layout::packed::Packed`]): on both x86 SIMD levels,
/// whose one-token kernels read eight interleaved rows faster than eight rows of the file's
/// layout (the AVX-512 level runs the AVX2 packed kernels, so its decode is never below the
/// level under it); not on the scalar level. `LLM_BOOK_PACK=1` or `0` decides instead, to
/// compare the two layouts on one machine. Read once.
pub fn packs() -> bool {
    static PACKS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PACKS.get_or_init(|| match std::env::var("LLM_BOOK_PACK").as_deref() {
        Ok("1") => true,
        Ok("0") => false,
        other => {
            if let Ok(v) = other {
                eprintln!("warning: LLM_BOOK_PACK={v:?} is neither 1 nor 0; deciding by the CPU");
            }
            ch07_simd_parallel::Isa::from_env().is_ok_and(|isa| {
                matches!(
                    isa,
                    ch07_simd_parallel::Isa::Avx2 | ch07_simd_parallel::Isa::Avx512
                )
            })
        }
    })
}
// ANCHOR_END: packs

/// Whether a prefill on `kk` takes VNNI's interleaved four-token kernels.
pub fn use_quads(kk: &dyn ManyTokens) -> bool {
    kk.has_quads() && prefill_layout() == PrefillLayout::Quads
}

/// Whether a prefill on `kk` takes the eight-token kernels (every SIMD level, unless the
/// quads were asked for).
pub fn use_eights(kk: &dyn ManyTokens) -> bool {
    kk.has_eights() && !use_quads(kk)
}
