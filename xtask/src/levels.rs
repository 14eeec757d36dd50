//! The checks whose answer could depend on the kernels, rerun with the kernels forced down.
//!
//! Every SIMD kernel equals its scalar twin bit for bit, so the tests and the book's output
//! must pass the same on any CPU. This task makes that a check rather than a hope: for every
//! level below the best this CPU has, it sets `LLM_BOOK_ISA` to that level (chapter 7's
//! `Isa` then behaves as if the CPU stopped there) and reruns the tests of the chapters that
//! dispatch on the CPU (7 and later) and their book output. On an AVX-512 machine that is an
//! AVX2 run and a scalar run; on an AVX2 machine, a scalar run; on an ARM machine with the dot
//! product, a NEON run and a scalar run; on one without, a scalar run.

use crate::exercises::chapters;
use crate::{cargo, run_visible};

/// The first chapter whose code picks kernels by the CPU (chapter 7's dispatch).
const FIRST_DISPATCHING: u32 = 7;

/// Tests left out of the forced runs: each repeats what other tests already check at the
/// forced level (the first three over hundreds more positions than the logits and greedy
/// tests of the same model, and on the scalar kernels Gemma-3's 262 144-row LM head makes
/// them the slowest minutes of CI). The ordinary run keeps them.
const SKIP_WHEN_FORCED: &[&str] = &[
    "perplexity_is_within_1_percent_of_llama_cpp_s",
    "perplexity_is_chapter_6s_within_0_1_percent",
    "the_ring_buffer_gives_the_full_cache_s_logits",
];

/// Chapters left out of the forced runs although they come after chapter 7: chapter 13's
/// tests run shaders against chapter 8's kernels and engine, so the GPU's side does not
/// depend on the CPU's level and the CPU's side is chapters 7 and 8's own tests at that
/// level; its book output is its help text.
const NOT_FORCED: &[&str] = &["ch13-gpu"];

/// The levels below the best this CPU has, slowest first, by chapter 7's names.
pub fn below_best() -> Vec<&'static str> {
    #[cfg(target_arch = "x86_64")]
    {
        let avx2 = std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c");
        let avx512 = avx2
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vl")
            && std::arch::is_x86_feature_detected!("avx512vnni");
        match (avx2, avx512) {
            (_, true) => vec!["scalar", "avx2"],
            (true, false) => vec!["scalar"],
            _ => vec![],
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        // NEON is in every AArch64 CPU; the dot product is Armv8.2-A's option.
        if std::arch::is_aarch64_feature_detected!("dotprod") {
            vec!["scalar", "neon"]
        } else {
            vec!["scalar"]
        }
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        vec![] // only the scalar kernels exist here: the ordinary run is the scalar run
    }
}

/// This architecture's levels, slowest first (chapter 7's names).
fn levels_here() -> &'static [&'static str] {
    if cfg!(target_arch = "aarch64") {
        &["scalar", "neon", "dotprod"]
    } else if cfg!(target_arch = "x86_64") {
        &["scalar", "avx2", "avx512"]
    } else {
        &["scalar"]
    }
}

/// The level this process's kernels run at: the best this CPU has, or the one
/// `LLM_BOOK_ISA` forces (chapter 7's dispatch never goes above the CPU's best).
pub fn best_level() -> &'static str {
    let below = below_best();
    let best = levels_here()[below.len().min(levels_here().len() - 1)];
    let forced = std::env::var("LLM_BOOK_ISA").ok();
    below
        .into_iter()
        .find(|level| forced.as_deref() == Some(*level))
        .unwrap_or(best)
}

/// `levels`: with `only`, that level alone (it must be below this CPU's best).
pub fn run(only: Option<&str>) -> Result<(), String> {
    let mut levels = below_best();
    if let Some(level) = only {
        if !levels.contains(&level) {
            return Err(format!(
                "{level} is not a level below this CPU's best; the levels to force here are: {}",
                if levels.is_empty() {
                    "none".to_string()
                } else {
                    levels.join(", ")
                }
            ));
        }
        levels.retain(|l| *l == level);
    }
    // On a VNNI machine, chapter 8's other prefill layout too (`LLM_BOOK_PREFILL=quads`): the
    // default takes the eight-token kernels there as everywhere, and the interleaved ones
    // must still give the same bits through the whole model.
    if only.is_none() && best_level() == "avx512" && std::env::var_os("LLM_BOOK_ISA").is_none() {
        let mut test = cargo();
        test.args(["test", "--release", "--locked", "-p", "ch08-gguf"])
            .env("LLM_BOOK_PREFILL", "quads");
        run_visible(
            &mut test,
            "LLM_BOOK_PREFILL=quads: chapter 8's tests with the interleaved prefill kernels",
        )?;
    }
    if levels.is_empty() {
        eprintln!("\n==> kernel levels: this CPU runs the scalar kernels only; nothing to force");
        return Ok(());
    }
    let dispatching: Vec<_> = chapters()
        .into_iter()
        .filter(|c| {
            c.package
                .trim_start_matches("ch")
                .get(..2)
                .and_then(|n| n.parse::<u32>().ok())
                .is_some_and(|n| n >= FIRST_DISPATCHING)
                && !NOT_FORCED.contains(&c.package.as_str())
        })
        .collect();
    for level in levels {
        // SAFETY: xtask runs no other thread; the variable is read by the children started
        // below (and by nothing in this process).
        unsafe { std::env::set_var("LLM_BOOK_ISA", level) };
        let mut test = cargo();
        test.args(["test", "--release", "--locked"]);
        for c in &dispatching {
            test.args(["-p", &c.package]);
        }
        test.arg("--");
        for name in SKIP_WHEN_FORCED {
            test.args(["--skip", name]);
        }
        let result = run_visible(
            &mut test,
            &format!("LLM_BOOK_ISA={level}: the tests of the chapters that dispatch on the CPU"),
        )
        .and_then(|()| {
            eprintln!("\n==> LLM_BOOK_ISA={level}: their book output is what the book shows");
            dispatching
                .iter()
                .try_for_each(|c| crate::output::run(true, Some(&c.package)))
        });
        // SAFETY: as above.
        unsafe { std::env::remove_var("LLM_BOOK_ISA") };
        result.map_err(|e| format!("with the kernels forced to {level}: {e}"))?;
    }
    Ok(())
}
