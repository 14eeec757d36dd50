//! The middle level of the kernel layer: every product of every format, one kernel set per
//! instruction-set level, and the one place that picks among them.
//!
//! Every file here is named by one rule, level, then shape, then format, so that "Q4_K, eight
//! tokens a register, on AVX2" is found by its name (`avx2_eights_q32_k.rs`):
//!
//! ```text
//! <level>_<shape>_<formats>.rs  kernels: products of one shape
//! <level>_<operation>.rs        kernels that are not products: exp, quantize
//! <arch>_helpers.rs             what the kernels of an architecture share (imports no kernel)
//! <arch>_dispatch.rs            which kernel serves which shape, on each level of the arch
//! <level>_<shape>_helpers.rs    the same two for one shape's own files
//! <level>_<shape>_dispatch.rs
//!
//! level    avx2     AVX2, FMA, F16C; most also compiled with VNNI (`VNNI` picks vpdpbusd)
//!          avx512   AVX-512 VNNI only
//!          neon     NEON; each also compiled with the dot product (`DOTPROD` picks sdot)
//! arch     x86 (avx2 and avx512), arm (neon and dotprod)
//! shape    one      one row against one token (a decode step), or one query (attention)
//!          grid     R rows against T tokens, R·T small (1×1, 4×1, 1×4), a sum per pair
//!          rows4    four rows against one token (chapter 6's dot4: or one row, four tokens)
//!          rows8    eight rows, a row per 32-bit lane (one token; on AVX-512, eight tokens)
//!          eights   one row against eight tokens, a token per 32-bit lane (eights4: four rows)
//!          sixteens the same with sixteen tokens in 512 bits (sixteens4: four rows)
//!          quads    one row against four interleaved tokens, a (block, token) pair per lane
//!          packed   eight rows interleaved at load, a row per lane, one to four tokens
//!          many     several query heads at once (attention)
//! formats  one name, or several joined by _; q4 = Q4_0 and Q4_1, q8 = Q8_0 and INT8,
//!          q32 = Q4_0, Q4_1 and Q5_0 (chapter 6's `Q32`), k = Q4_K and Q6_K, all = every one
//! ```
//!
//! Two files have no level: `products.rs`, the contract by shape ([`OneToken`],
//! [`ManyTokens`]) whose default methods are the scalar reference, and this one, the sets and
//! the one place that picks a set ([`for_isa`]).
//!
//! Each set implements chapter 6's [`Kernels`](ch06_quantization::Kernels) trait, so chapter
//! 6's matrix product and forward pass run them unchanged, and chapter 8's [`ManyTokens`] on
//! top (in `x86_dispatch.rs` and `arm_dispatch.rs`). A SIMD set can only be made by
//! [`for_isa`], which asks the CPU first; that check is what makes those files' `unsafe`
//! calls sound.

use crate::isa::Isa;

pub mod products;
pub use products::{ByToken, ManyTokens, OneToken};

#[cfg(target_arch = "x86_64")]
pub mod avx2_eights4_k;
#[cfg(target_arch = "x86_64")]
pub mod avx2_eights4_q32;
#[cfg(target_arch = "x86_64")]
pub mod avx2_eights_q32_k;
#[cfg(target_arch = "x86_64")]
pub mod avx2_eights_q8_0;
#[cfg(target_arch = "x86_64")]
pub mod avx2_exp;
#[cfg(target_arch = "x86_64")]
pub mod avx2_grid_k;
#[cfg(target_arch = "x86_64")]
pub mod avx2_grid_q5_0;
#[cfg(target_arch = "x86_64")]
pub mod avx2_many_f32;
#[cfg(target_arch = "x86_64")]
pub mod avx2_one_f32;
#[cfg(target_arch = "x86_64")]
pub mod avx2_one_q4_q8;
#[cfg(target_arch = "x86_64")]
pub mod avx2_packed_dispatch;
#[cfg(target_arch = "x86_64")]
pub mod avx2_packed_helpers;
#[cfg(target_arch = "x86_64")]
pub mod avx2_packed_k;
#[cfg(target_arch = "x86_64")]
pub mod avx2_packed_q32;
#[cfg(target_arch = "x86_64")]
pub mod avx2_quantize;
#[cfg(target_arch = "x86_64")]
pub mod avx2_rows4_q4_q8;
#[cfg(target_arch = "x86_64")]
pub mod avx2_rows4_q5_0;
#[cfg(target_arch = "x86_64")]
pub mod avx2_rows8_q4_q8;
#[cfg(target_arch = "x86_64")]
pub mod avx2_unpack;
#[cfg(target_arch = "x86_64")]
pub mod avx512_attention_f32;
#[cfg(target_arch = "x86_64")]
pub mod avx512_exp;
#[cfg(target_arch = "x86_64")]
pub mod avx512_grid_q5_0;
#[cfg(target_arch = "x86_64")]
pub mod avx512_quads_q4_1_q5_0_q4_k;
#[cfg(target_arch = "x86_64")]
pub mod avx512_rows8_q8_0;
#[cfg(target_arch = "x86_64")]
pub mod avx512_sixteens4_q32_k;
#[cfg(target_arch = "x86_64")]
pub mod avx512_sixteens_q8_0;
#[cfg(target_arch = "x86_64")]
pub mod x86_dispatch;
#[cfg(target_arch = "x86_64")]
pub mod x86_helpers;

#[cfg(target_arch = "aarch64")]
pub mod arm_dispatch;
#[cfg(target_arch = "aarch64")]
pub mod arm_helpers;
#[cfg(target_arch = "aarch64")]
pub mod neon_eights_all;
#[cfg(target_arch = "aarch64")]
pub mod neon_many_f32;
#[cfg(target_arch = "aarch64")]
pub mod neon_one_f32;
#[cfg(target_arch = "aarch64")]
pub mod neon_one_q4_q8;
#[cfg(target_arch = "aarch64")]
pub mod neon_one_q5_0_k;
#[cfg(target_arch = "aarch64")]
pub mod neon_quantize;

// ANCHOR: dispatch
/// The kernels for `isa`, or `None` if this CPU cannot run them.
pub fn for_isa(isa: Isa) -> Option<&'static dyn ManyTokens> {
    match isa {
        Isa::Scalar => Some(&ch06_quantization::Scalar),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => isa.supported().then_some(&AVX2 as &'static dyn ManyTokens),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => isa
            .supported()
            .then_some(&AVX512 as &'static dyn ManyTokens),
        #[cfg(target_arch = "aarch64")]
        Isa::Neon => isa.supported().then_some(&NEON as &'static dyn ManyTokens),
        #[cfg(target_arch = "aarch64")]
        Isa::Dotprod => isa
            .supported()
            .then_some(&DOTPROD as &'static dyn ManyTokens),
        #[allow(unreachable_patterns)] // the other architecture's levels
        _ => None,
    }
}

/// The kernels for the level `LLM_BOOK_ISA` names, or the best this CPU has.
pub fn detect() -> Result<(Isa, &'static dyn ManyTokens), String> {
    let isa = Isa::from_env()?;
    let k = for_isa(isa).ok_or_else(|| format!("{isa} kernels cannot run on this CPU"))?;
    Ok((isa, k))
}
// ANCHOR_END: dispatch

// ANCHOR: x86
/// The x86 kernel sets: `X86<false>` is [`Avx2`] (with FMA and F16C); `X86<true>` is
/// [`Avx512`], the same kernels with AVX-512 VNNI's `vpdpbusd` where a kernel is written for
/// both (`VNNI` picks), and VNNI's own where it has one. The private field means only
/// [`for_isa`] makes one, after checking.
#[cfg(target_arch = "x86_64")]
pub struct X86<const VNNI: bool>(());

/// AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
pub type Avx2 = X86<false>;

/// AVX-512 F, BW, VL and VNNI (on 256-bit registers), with AVX2's.
#[cfg(target_arch = "x86_64")]
pub type Avx512 = X86<true>;
// ANCHOR_END: x86

#[cfg(target_arch = "x86_64")]
static AVX2: Avx2 = X86(());
#[cfg(target_arch = "x86_64")]
static AVX512: Avx512 = X86(());

// ANCHOR: arm
/// The 64-bit ARM kernel sets: `Arm<false>` is [`Neon`], which every AArch64 CPU has;
/// `Arm<true>` is [`Dotprod`], the same kernels with `sdot` where they multiply bytes
/// (`DOTPROD` picks, as `VNNI` does on x86). The private field means only [`for_isa`] makes
/// one, after checking.
#[cfg(target_arch = "aarch64")]
pub struct Arm<const DOTPROD: bool>(());

/// NEON (Advanced SIMD): every AArch64 CPU.
#[cfg(target_arch = "aarch64")]
pub type Neon = Arm<false>;

/// NEON with the dot-product instructions (Armv8.2-A's `dotprod`, `sdot`).
#[cfg(target_arch = "aarch64")]
pub type Dotprod = Arm<true>;
// ANCHOR_END: arm

#[cfg(target_arch = "aarch64")]
static NEON: Neon = Arm(());
#[cfg(target_arch = "aarch64")]
static DOTPROD: Dotprod = Arm(());
