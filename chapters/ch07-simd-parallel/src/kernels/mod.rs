//! The kernel sets, one per instruction-set level, and the one place that picks among them.
//!
//! ```text
//! kernels/scalar  chapter 6's plain Rust (ch06_quantization::Scalar)
//! kernels/avx2    vpmaddubsw + vpmaddwd, 32 quants per instruction
//! kernels/avx512  vpdpbusd (AVX-512 VNNI), the same in one instruction
//! ```
//!
//! Each set implements chapter 6's [`Kernels`] trait, so chapter 6's matrix product and
//! forward pass run them unchanged. A SIMD set can only be made through its `new()`, which
//! asks the CPU first; that check is what makes the `unsafe` calls below sound.

use ch06_quantization::Kernels;
use ch06_quantization::blocks::{BlockQ8_0, BlockQ8_1};

use crate::isa::Isa;

#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
pub mod avx2_eights;
#[cfg(target_arch = "x86_64")]
pub mod avx2_eights4;
#[cfg(target_arch = "x86_64")]
pub mod avx2_eights4_k;
#[cfg(target_arch = "x86_64")]
pub mod avx2_eights_q4_1;
#[cfg(target_arch = "x86_64")]
pub mod avx2_kquants;
#[cfg(target_arch = "x86_64")]
pub mod avx2_many;
#[cfg(target_arch = "x86_64")]
pub mod avx2_packed;
#[cfg(target_arch = "x86_64")]
pub mod avx2_q8_0;
#[cfg(target_arch = "x86_64")]
pub mod avx2_rows4;
#[cfg(target_arch = "x86_64")]
pub mod avx2_rows4_q5_0;
#[cfg(target_arch = "x86_64")]
pub mod avx2_rows8;
#[cfg(target_arch = "x86_64")]
pub mod avx512;
#[cfg(target_arch = "x86_64")]
pub mod avx512_q8_0;
#[cfg(target_arch = "x86_64")]
pub mod avx512_q8_0_rows8;
#[cfg(target_arch = "x86_64")]
pub mod avx512_quads;
pub mod products;
#[cfg(target_arch = "x86_64")]
pub mod x86_products;

// ANCHOR: dispatch
/// The kernels for `isa`, or `None` if this CPU cannot run them.
pub fn for_isa(isa: Isa) -> Option<&'static dyn Kernels> {
    match isa {
        Isa::Scalar => Some(&ch06_quantization::Scalar),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => isa.supported().then_some(&Avx2(()) as &'static dyn Kernels),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => isa
            .supported()
            .then_some(&Avx512(()) as &'static dyn Kernels),
        #[cfg(not(target_arch = "x86_64"))]
        _ => None,
    }
}

/// The kernels for the level `LLM_BOOK_ISA` names, or the best this CPU has.
pub fn detect() -> Result<(Isa, &'static dyn Kernels), String> {
    let isa = Isa::from_env()?;
    let k = for_isa(isa).ok_or_else(|| format!("{isa} kernels cannot run on this CPU"))?;
    Ok((isa, k))
}
// ANCHOR_END: dispatch

/// AVX2 kernels (with F16C for the scales). The private field means only [`for_isa`] makes one, after checking.
#[cfg(target_arch = "x86_64")]
pub struct Avx2(());

/// AVX-512 VNNI kernels (256-bit, AVX-512VL), made only by [`for_isa`] after checking.
#[cfg(target_arch = "x86_64")]
pub struct Avx512(());

/// Implements [`Kernels`] for a SIMD set by calling the `#[target_feature]` functions of
/// `$m`. SAFETY (for every call below): a value of `$set` exists only if [`for_isa`] found
/// the features those functions enable on this CPU.
#[cfg(target_arch = "x86_64")]
macro_rules! simd_kernels {
    ($set:ty, $name:literal, $m:ident) => {
        impl Kernels for $set {
            fn name(&self) -> &'static str {
                $name
            }
            fn dot_q8_0_q8_0(&self, w: &[u8], a: &[BlockQ8_0]) -> f32 {
                unsafe { $m::dot_q8_0_q8_0(w, a) }
            }
            fn dot_q4_0_q8_0(&self, w: &[u8], a: &[BlockQ8_0]) -> f32 {
                unsafe { $m::dot_q4_0_q8_0(w, a) }
            }
            fn dot_q4_1_q8_1(&self, w: &[u8], a: &[BlockQ8_1]) -> f32 {
                unsafe { $m::dot_q4_1_q8_1(w, a) }
            }
            fn dot_int8_q8_0(&self, w: &[u8], scale: f32, a: &[BlockQ8_0]) -> f32 {
                unsafe { $m::dot_int8_q8_0(w, scale, a) }
            }
            fn quantize_q8_0(&self, x: &[f32], out: &mut Vec<BlockQ8_0>) {
                unsafe { avx2::quantize_q8_0(x, out) }
            }
            fn quantize_q8_1(&self, x: &[f32], out: &mut Vec<BlockQ8_1>) {
                unsafe { avx2::quantize_q8_1(x, out) }
            }
            fn dot4_q4_1_q8_1(&self, w: [&[u8]; 4], a: [&[BlockQ8_1]; 4]) -> [f32; 4] {
                unsafe { avx2_rows4::dot4_q4_1_q8_1(w, a) }
            }
            fn dot4_q8_0_q8_0(&self, w: [&[u8]; 4], a: [&[BlockQ8_0]; 4]) -> [f32; 4] {
                unsafe { avx2_rows4::dot4_q8_0_q8_0(w, a) }
            }
            fn dot4_q4_0_q8_0(&self, w: [&[u8]; 4], a: [&[BlockQ8_0]; 4]) -> [f32; 4] {
                unsafe { avx2_rows4::dot4_q4_0_q8_0(w, a) }
            }
            fn dot_f32(&self, a: &[f32], b: &[f32]) -> f32 {
                unsafe { avx2::dot_f32(a, b) }
            }
            fn axpy(&self, y: &mut [f32], a: f32, x: &[f32]) {
                unsafe { avx2::axpy(y, a, x) }
            }
            fn dot_f32_rows(&self, q: &[f32], rows: &[f32], out: &mut [f32]) {
                unsafe { avx2::dot_f32_rows(q, rows, out) }
            }
            fn axpy_rows(&self, y: &mut [f32], w: &[f32], rows: &[f32]) {
                unsafe { avx2::axpy_rows(y, w, rows) }
            }
            fn dot_f32_many(&self, qs: &[&[f32]], rows: &[&[f32]], out: &mut [f32]) {
                unsafe { avx2_many::dot_f32_many(qs, rows, out) }
            }
            fn dot_f32_rows_many(&self, qs: &[f32], d: usize, rows: &[f32], out: &mut [f32]) {
                unsafe { avx2_many::dot_f32_rows_many(qs, d, rows, out) }
            }
            fn axpy_many(&self, ys: &mut [f32], w: &[f32], rows: &[&[f32]]) {
                unsafe { avx2_many::axpy_many(ys, w, rows) }
            }
            fn f16_to_f32s(&self, src: &[u16], dst: &mut [f32]) {
                unsafe { avx2::f16_to_f32s(src, dst) }
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
simd_kernels!(Avx2, "avx2", avx2);
#[cfg(target_arch = "x86_64")]
simd_kernels!(Avx512, "avx512", avx512);
