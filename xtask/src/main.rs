//! `cargo xtask <task>`: the workspace's helper commands.
//!
//! ```text
//! cargo xtask test                     everything CI checks: models, tests, exercises, book
//! cargo xtask exercises ch01           check your exercise answers for one chapter
//! cargo xtask exercises ch01 --solutions   the same against the reference solutions
//! cargo xtask exercises --verify       every chapter: all fail as shipped, all pass solved
//! cargo xtask hint ch01 2              print the hint of exercise 2
//! cargo xtask solution ch01 2          print the solution of exercise 2
//! cargo xtask book-output [--check] [chNN]  regenerate (or check) program output shown in the book
//! cargo xtask book [--check-only]      check includes, links, listings and prose, then build the book
//! cargo xtask book --words             each page's prose words against its budget
//! cargo xtask imports                  the pairs of source files that use each other (book checks: none)
//! cargo xtask levels [scalar|avx2]    rerun the kernel-dependent checks with the kernels forced down
//! cargo xtask arm                      the kernel tests cross-built for 64-bit ARM, run under QEMU
//! cargo xtask perf [--list] [--kind] [NAME|chNN]  measure the book's speed tables on this machine
//!                                      (nothing named: the reference run, at one commit)
//! cargo xtask fetch-models [which]     fetch and prepare the models (smollm2, smollm2-gguf, gemma3, llamacpp, all)
//! ```
//!
//! Only the standard library: this crate builds in a second on a fresh machine.

mod arm;
mod book;
mod cmdline;
mod exercises;
mod imports;
mod levels;
mod output;
mod perf;
mod prose;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const USAGE: &str = "\
usage: cargo xtask <task>

tasks:
  test                          models, tests, exercises (both ways), book checks: what CI runs
  exercises <chNN> [--solutions]  check one chapter's exercises and say which pass
  exercises --verify            prove every exercise fails as shipped and passes when solved
  hint <chNN> <N>               print the hint of exercise N
  solution <chNN> <N>           print the reference solution of exercise N
  book-output [--check] [chNN]  regenerate the program output shown in the book (or check it);
                                with chNN, only that chapter's
  book [--check-only]           check the book's includes, links, listing lengths and prose
                                (budgets, no notebook, every ratio from a measured file) and
                                that no two source files use each other, then
                                build it with mdbook and check the built pages
  book --words                  each page's prose words against its budget
  imports                       the pairs of source files in a chapter's crate that use each
                                other (which `book` refuses)
  levels [scalar|avx2]          rerun the tests and book output of the chapters that pick
                                kernels by CPU (7 on) with each lower level forced
                                (LLM_BOOK_ISA), or with the one named
  arm                           cross-build chapters 7 and 8's kernel tests for 64-bit ARM
                                (installing Debian's cross toolchain and QEMU, as root or
                                with sudo) and run them under QEMU on a plain-NEON CPU
                                (cortex-a53) and one with the dot product (max), with both
                                models' first greedy tokens
  perf [--list] [--kind] [NAME|chNN ...]  measure every speed table the book shows, on this
                                machine, into book/src/measured/, at one commit (or only those
                                named; run nothing else meanwhile: it takes about 40 minutes in
                                all); --kind measures the tables kept for this kind of machine
                                (marked [avx2] in perf.txt, say) into measured/<kernel level>/
  fetch-models [smollm2|smollm2-gguf|gemma3|llamacpp|all]  fetch, verify and prepare the models
                                (default: all; smollm2-gguf skips the f32 copy chapters 1-5 read)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = match args.as_slice() {
        ["test"] => test_all(),
        ["exercises", "--verify"] => exercises::verify_all(),
        ["exercises", ch] => exercises::check(ch, false),
        ["exercises", ch, "--solutions"] => exercises::check(ch, true),
        ["hint", ch, n] => exercises::show(ch, n, false),
        ["solution", ch, n] => exercises::show(ch, n, true),
        ["book-output"] => output::run(false, None),
        ["book-output", "--check"] => output::run(true, None),
        ["book-output", "--check", ch] => output::run(true, Some(ch)),
        ["book-output", ch] => output::run(false, Some(ch)),
        ["book"] => book::run(true),
        ["book", "--check-only"] => book::run(false),
        ["book", "--words"] => book::words(),
        ["imports"] => imports::report(),
        ["levels"] => levels::run(None),
        ["levels", level] => levels::run(Some(level)),
        ["arm"] => arm::run(),
        ["perf", rest @ ..] => perf::run(rest),
        ["fetch-models"] => fetch_models("all"),
        ["fetch-models", which] => fetch_models(which),
        ["help" | "--help" | "-h"] | [] => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        _ => {
            eprintln!("error: unknown task {:?}\n\n{USAGE}", args.join(" "));
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("\nerror: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root (this crate lives in `<root>/xtask`).
pub fn root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent()
        .expect("xtask sits inside the workspace")
        .to_path_buf()
}

/// `cargo` as the user invoked it (rustup's proxy honours rust-toolchain.toml).
pub fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(root());
    cmd
}

/// Runs a command with the terminal attached; an error names it if it fails.
pub fn run_visible(cmd: &mut Command, what: &str) -> Result<(), String> {
    eprintln!("\n==> {what}");
    let status = cmd
        .status()
        .map_err(|e| format!("{what}: could not start: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what}: failed ({status})"))
    }
}

fn fetch_models(which: &str) -> Result<(), String> {
    if !matches!(
        which,
        "smollm2" | "smollm2-gguf" | "gemma3" | "llamacpp" | "all"
    ) {
        return Err(format!(
            "unknown model {which:?}: expected smollm2, smollm2-gguf, gemma3, llamacpp or all"
        ));
    }
    let mut cmd = Command::new("bash");
    cmd.current_dir(root()).arg("scripts/models.sh").arg(which);
    run_visible(&mut cmd, &format!("fetch and prepare models ({which})"))
}

/// The README's test command. Each step stops the run when it fails.
fn test_all() -> Result<(), String> {
    let ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false");
    let have_mdbook = Command::new("mdbook").arg("--version").output().is_ok();
    if ci && !have_mdbook {
        // said now, not after an hour of tests
        return Err(format!(
            "mdbook is not installed, and with CI set the HTML build is required (install it \
             as .ci/run does: cargo install mdbook --version {} --locked \
             --no-default-features --features search)",
            book::MDBOOK_VERSION
        ));
    }
    if ci {
        // the project's code as rustfmt writes it (a reader's exercise need not be)
        run_visible(
            cargo().args(["fmt", "--all", "--check"]),
            "formatting (cargo fmt --all --check)",
        )?;
        // every doc comment's links resolve (a reader's `cargo doc` shows them), about a minute
        run_visible(
            cargo()
                .args(["doc", "--workspace", "--no-deps", "--locked", "-q"])
                .env("RUSTDOCFLAGS", "-D warnings"),
            "API docs without warnings (cargo doc --workspace --no-deps, -D warnings)",
        )?;
    }
    fetch_models("all")?;
    // chapter 11's real clients: the openai package (into the venv) and Debian's chromium;
    // chapter 13's Vulkan driver on the CPU, lavapipe (Debian's mesa-vulkan-drivers)
    let mut deps = Command::new("bash");
    deps.current_dir(root()).arg("scripts/test-deps.sh");
    run_visible(
        &mut deps,
        "install chapter 11's test clients and chapter 13's lavapipe (scripts/test-deps.sh)",
    )?;
    run_visible(
        cargo().args(["test", "--workspace", "--release", "--locked"]),
        "unit, equivalence and model tests (cargo test --workspace --release)",
    )?;
    eprintln!("\n==> exercises: every one fails as shipped and passes with its solution");
    exercises::verify_all()?;
    eprintln!("\n==> book: program output is up to date");
    output::run(true, None)?;
    eprintln!("\n==> book: includes, anchors and links");
    if have_mdbook {
        book::run(true)?;
    } else {
        book::run(false)?;
        eprintln!(
            "note: mdbook is not installed, so the HTML build was not tried \
             (install it with: cargo install mdbook --version {} --locked)",
            book::MDBOOK_VERSION
        );
    }
    eprintln!("\nall checks passed");
    Ok(())
}
