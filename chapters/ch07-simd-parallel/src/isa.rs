//! Which instructions this CPU has, found out once, at run time.
//!
//! The workspace is compiled for the x86-64 baseline (SSE2), or on 64-bit ARM for AArch64's
//! (which always has NEON), so the binary runs on any machine of its architecture. Wider
//! instructions are used only after asking the CPU (`cpuid` through `is_x86_feature_detected!`,
//! or the kernel's `HWCAP` through `is_aarch64_feature_detected!`) whether it has them; the
//! answer picks one set of kernels for the whole run. `LLM_BOOK_ISA=scalar|avx2|avx512` (on
//! x86-64) or `scalar|neon|dotprod` (on ARM) forces a level: the process then behaves as if
//! the CPU stopped there (no level above it is used, listed or tested), so one machine can
//! check what a smaller CPU runs. Asking for a level the CPU lacks is an error, not a crash.
//!
//! Every level exists on every architecture (the names parse everywhere, and code can name
//! `Isa::Avx2` without a `cfg`); a level of the other architecture is one this CPU lacks.

use std::fmt;

// ANCHOR: isa
/// An instruction-set level, from slowest to fastest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Isa {
    /// Chapter 6's plain Rust: runs everywhere.
    Scalar,
    /// 256-bit integer SIMD with `vpmaddubsw` (x86-64, Haswell and later), plus FMA and F16C.
    Avx2,
    /// AVX-512 with VNNI's `vpdpbusd`: four byte products summed into each 32-bit lane in one
    /// instruction (x86-64, Ice Lake / Zen 4 and later).
    Avx512,
    /// 128-bit NEON, which every AArch64 CPU has: byte products widened by `smull` and summed
    /// in pairs by `sadalp` (Cortex-A53, the Raspberry Pi 3's core, and later).
    Neon,
    /// NEON with the dot-product instructions (`sdot`): four byte products summed into each
    /// 32-bit lane in one instruction, ARM's `vpdpbusd` (Armv8.2-A's option: Cortex-A55/A76,
    /// Neoverse N1, Apple M1 and later).
    Dotprod,
}
// ANCHOR_END: isa

impl Isa {
    /// Every level, slowest first within each architecture.
    pub const ALL: [Isa; 5] = [Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Neon, Isa::Dotprod];

    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
            Isa::Neon => "neon",
            Isa::Dotprod => "dotprod",
        }
    }

    /// Which architecture's level this is: 0 for scalar (every one's), 1 for x86-64, 2 for
    /// AArch64. A cap of one architecture's level never admits another's.
    fn family(self) -> u8 {
        match self {
            Isa::Scalar => 0,
            Isa::Avx2 | Isa::Avx512 => 1,
            Isa::Neon | Isa::Dotprod => 2,
        }
    }

    pub fn parse(name: &str) -> Option<Isa> {
        Isa::ALL.into_iter().find(|i| i.name() == name)
    }

    // ANCHOR: supported
    /// Whether this CPU has the instructions of the level's kernels.
    pub fn cpu_has(self) -> bool {
        match self {
            Isa::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => {
                is_x86_feature_detected!("avx2")
                    && is_x86_feature_detected!("fma")
                    && is_x86_feature_detected!("f16c")
            }
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => {
                Isa::Avx2.cpu_has()
                    && is_x86_feature_detected!("avx512f")
                    && is_x86_feature_detected!("avx512bw")
                    && is_x86_feature_detected!("avx512vl")
                    && is_x86_feature_detected!("avx512vnni")
            }
            #[cfg(target_arch = "aarch64")]
            Isa::Neon => std::arch::is_aarch64_feature_detected!("neon"),
            #[cfg(target_arch = "aarch64")]
            Isa::Dotprod => {
                Isa::Neon.cpu_has() && std::arch::is_aarch64_feature_detected!("dotprod")
            }
            #[allow(unreachable_patterns)] // on x86-64 and AArch64, the other's levels
            _ => false,
        }
    }
    // ANCHOR_END: supported

    /// Whether this process may run the level's kernels: the CPU has them, and
    /// `LLM_BOOK_ISA` does not cap the process below the level.
    pub fn supported(self) -> bool {
        self.cpu_has()
            && ceiling().is_none_or(|top| {
                self == Isa::Scalar || (self.family() == top.family() && self <= top)
            })
    }

    /// The fastest level this CPU supports.
    pub fn best() -> Isa {
        Isa::ALL
            .into_iter()
            .rev()
            .find(|i| i.supported())
            .unwrap_or(Isa::Scalar)
    }

    /// The levels this CPU supports, slowest first.
    pub fn available() -> Vec<Isa> {
        Isa::ALL.into_iter().filter(|i| i.supported()).collect()
    }

    /// `LLM_BOOK_ISA` if set (checked against the CPU), otherwise [`Isa::best`].
    pub fn from_env() -> Result<Isa, String> {
        match std::env::var("LLM_BOOK_ISA") {
            Err(std::env::VarError::NotPresent) => Ok(Isa::best()),
            Err(e) => Err(format!("LLM_BOOK_ISA: {e}")),
            Ok(name) if name.is_empty() => Ok(Isa::best()),
            Ok(name) => {
                let isa = Isa::parse(&name).ok_or_else(|| {
                    format!(
                        "LLM_BOOK_ISA={name:?}: expected one of {}",
                        names(&Isa::ALL)
                    )
                })?;
                if isa.cpu_has() {
                    Ok(isa)
                } else {
                    let has: Vec<Isa> = Isa::ALL.into_iter().filter(|i| i.cpu_has()).collect();
                    Err(format!(
                        "LLM_BOOK_ISA={name}: this CPU cannot run {name} kernels (it has: {})",
                        names(&has)
                    ))
                }
            }
        }
    }
}

/// The level `LLM_BOOK_ISA` caps this process at, read once; `None` when it is unset, empty,
/// or not a level (then [`Isa::from_env`] reports the error).
fn ceiling() -> Option<Isa> {
    static CEILING: std::sync::OnceLock<Option<Isa>> = std::sync::OnceLock::new();
    *CEILING.get_or_init(|| {
        std::env::var("LLM_BOOK_ISA")
            .ok()
            .and_then(|name| Isa::parse(&name))
    })
}

/// "scalar, avx2, …"
pub fn names(isas: &[Isa]) -> String {
    isas.iter().map(|i| i.name()).collect::<Vec<_>>().join(", ")
}

impl fmt::Display for Isa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
