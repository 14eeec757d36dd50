//! `cargo xtask arm`: the kernels on 64-bit ARM, checked here, on x86-64, under an emulator.
//!
//! Chapter 7's NEON kernels must give the scalar kernels' bits as its AVX2 ones do. This task
//! cross-builds the tests of the chapters with kernels of their own (7 and 8) for
//! `aarch64-unknown-linux-gnu` with Debian's Rust (`scripts/arm-deps.sh` installs it, the
//! cross linker and QEMU) and runs them under `qemu-aarch64` on two emulated CPUs:
//!
//! - `cortex-a53`: plain NEON (the levels scalar and neon);
//! - `max`: every extension QEMU knows, the dot product among them (scalar, neon, dotprod).
//!
//! On each, the kernel equivalence tests run in full, and each model end to end for a few
//! greedy tokens (`first_tokens`), which must be the x86 run's. The model tests that run
//! hundreds of positions are left to real hardware: under QEMU they take most of an hour.
//! The later dispatching chapters (9 on), which have no kernels of their own, are
//! type-checked for ARM, tests included, and not run. What this checks is bits; QEMU's
//! timings say nothing about an ARM CPU's speed.

use std::process::Command;

use crate::exercises::chapters;
use crate::{root, run_visible};

const TARGET: &str = "aarch64-unknown-linux-gnu";

/// The emulated CPUs, with what each is for.
const CPUS: &[(&str, &str)] = &[
    (
        "cortex-a53",
        "plain NEON, no dot product: the scalar and neon levels",
    ),
    (
        "max",
        "NEON with sdot (and every other extension QEMU has): the scalar, neon and dotprod levels",
    ),
];

/// The test targets run under QEMU, by package: every kernel equivalence test, and the one
/// end-to-end test cheap enough to emulate. Left out: chapter 7's `smollm2` and chapter 8's
/// `smollm2`, `gemma3` and `threads` (whole-model logits over many positions: minutes each
/// under QEMU, and what they check per level the kernel tests check kernel by kernel),
/// `exercises` (no kernels), and the crates' `cli`, `corpus` and parsing tests (no
/// kernels, the same on every architecture).
const TESTS: &[(&str, &[&str])] = &[
    ("ch07-simd-parallel", &["kernels", "eights"]),
    (
        "ch08-gguf",
        &[
            "kernels",
            "rows4",
            "rows8",
            "q8_0_eights",
            "packed",
            "products",
            "first_tokens",
        ],
    ),
];

/// Debian's cargo, with Debian's rustc (rustup's proxies may come first on the PATH, and
/// the pinned toolchain has no aarch64 standard library here), the cross linker, static
/// linking (a dynamically linked aarch64 program hangs under qemu-user at its first
/// `pthread_create`; a static one runs threads), and QEMU as the runner. Its own target
/// folder: the x86 build's stays as it is.
fn cross_cargo() -> Command {
    let mut cmd = Command::new("/usr/bin/cargo");
    let upper = TARGET.to_uppercase().replace('-', "_");
    cmd.current_dir(root())
        .env("RUSTC", "/usr/bin/rustc")
        .env("RUSTDOC", "/usr/bin/rustdoc")
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("RUSTFLAGS")
        .env("CARGO_TARGET_DIR", root().join("target/arm"))
        .env(
            format!("CARGO_TARGET_{upper}_LINKER"),
            "aarch64-linux-gnu-gcc",
        )
        .env(
            format!("CARGO_TARGET_{upper}_RUSTFLAGS"),
            "-C target-feature=+crt-static",
        )
        .env(format!("CARGO_TARGET_{upper}_RUNNER"), "qemu-aarch64");
    cmd
}

/// `cargo test` of [`TESTS`] for the target, with `extra` before the `--`.
fn tests(extra: &[&str]) -> Command {
    let mut cmd = cross_cargo();
    cmd.args(["test", "--release", "--locked", "--target", TARGET]);
    for (package, targets) in TESTS {
        cmd.args(["-p", package]);
        for t in *targets {
            cmd.args(["--test", t]);
        }
    }
    cmd.arg("--lib").args(extra);
    cmd
}

/// The packages of chapters 9 and later: they pick kernels through chapter 8's engine and
/// have none of their own, so they are only type-checked for ARM.
fn later_chapters() -> Vec<String> {
    chapters()
        .into_iter()
        .map(|c| c.package)
        .filter(|p| {
            p.trim_start_matches("ch")
                .get(..2)
                .and_then(|n| n.parse::<u32>().ok())
                .is_some_and(|n| n >= 9)
        })
        .collect()
}

/// `arm`: install, cross-build, then the tests on each emulated CPU.
pub fn run() -> Result<(), String> {
    let started = std::time::Instant::now();
    let mut deps = Command::new("bash");
    deps.current_dir(root()).arg("scripts/arm-deps.sh");
    run_visible(
        &mut deps,
        "the ARM cross toolchain and QEMU (scripts/arm-deps.sh)",
    )?;
    run_visible(
        &mut tests(&["--no-run"]),
        &format!("build chapter 7's and 8's kernel tests for {TARGET} (Debian's Rust)"),
    )?;
    let later = later_chapters();
    let mut check = cross_cargo();
    check.args([
        "check",
        "--release",
        "--locked",
        "--target",
        TARGET,
        "--tests",
    ]);
    for p in &later {
        check.args(["-p", p]);
    }
    run_visible(
        &mut check,
        &format!(
            "type-check {} and their tests for {TARGET} (no kernels of their own: not run)",
            later.join(", ")
        ),
    )?;
    for (cpu, what) in CPUS {
        let cpu_started = std::time::Instant::now();
        let mut cmd = tests(&[]);
        cmd.env("QEMU_CPU", cpu);
        run_visible(
            &mut cmd,
            &format!("QEMU_CPU={cpu} ({what}): the kernel tests and both models' first tokens"),
        )
        .map_err(|e| format!("under QEMU on {cpu}: {e}"))?;
        eprintln!(
            "==> QEMU_CPU={cpu}: passed in {:.0} s",
            cpu_started.elapsed().as_secs_f64()
        );
    }
    eprintln!(
        "\n==> ARM: the kernel tests and both models' first greedy tokens pass on {} ({:.0} s in all)",
        CPUS.iter()
            .map(|(c, _)| *c)
            .collect::<Vec<_>>()
            .join(" and "),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
