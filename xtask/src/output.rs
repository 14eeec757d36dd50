//! Program output shown in the book, regenerated from the real binaries.
//!
//! Each chapter lists its outputs in `chapters/chNN-slug/book-outputs.txt`, one per line:
//!
//! ```text
//! # comment
//! ch01-demo.txt: -p ch01-tensors -- --sizes 128,256
//! ```
//!
//! Arguments are split on spaces; a double-quoted argument may hold spaces
//! (`-p "The capital of France is"`). Everything after ` <<< ` is fed to the program's
//! standard input, with `\n` standing for a line break (`chat <<< Hi\nBye\n`).
//!
//! `cargo xtask book-output` runs `cargo run --release -q <args>` from the workspace root and
//! writes its stdout, with the workspace path replaced by `.`, to `book/src/output/<name>`.
//! `--check` compares instead of writing, with what depends on the machine masked (see
//! [`mask_timings`]): timings, thread counts and the names of the kernel levels the CPU runs.
//! So the committed files keep the real numbers of the run that made them, the check passes
//! on any CPU, and CI still notices when a program's output has changed shape, word or token.

use std::path::Path;

use crate::cmdline::{list_entries, normalise_paths, split_args};
use crate::exercises::{chapters, find_chapter};
use crate::{cargo, root};

/// Units after which a number is a measurement that changes from run to run, or from machine
/// to machine (a thread count follows the machine's cores).
const UNITS: &[&str] = &[
    "GFLOP/s", "GMAC/s", "GB/s", "MB/s", "tok/s", "tokens/s", "ns", "µs", "us", "ms", "s", "x",
    "×", "threads",
];

/// The kernel levels of chapter 7 (`Isa::name`): which of them a CPU runs, and which one a
/// program picks, depend on the machine. Every bit of every output does not (the kernels
/// equal the scalar ones bit for bit), so the rest of a line still has to match.
const LEVELS: &[&str] = &["scalar", "avx2", "avx512"];

/// Every chapter's outputs, or with `only` (`ch09`) one chapter's.
pub fn run(check: bool, only: Option<&str>) -> Result<(), String> {
    let only = only.map(find_chapter).transpose()?.map(|c| c.package);
    let out_dir = root().join("book/src/output");
    std::fs::create_dir_all(&out_dir)
        .map_err(|e| format!("cannot create {}: {e}", out_dir.display()))?;
    let mut stale = Vec::new();
    let mut count = 0;
    for chapter in chapters() {
        if only.as_ref().is_some_and(|p| *p != chapter.package) {
            continue;
        }
        for entry in list_entries(&chapter.dir.join("book-outputs.txt"))? {
            let (name, args) = (entry.name.as_str(), entry.args.as_str());
            count += 1;
            let (fresh, figure) = produce(args, check)?;
            if let Some(stale_figure) = figure {
                stale.push(stale_figure);
            }
            let path = out_dir.join(name.trim());
            if check {
                let committed = std::fs::read_to_string(&path).unwrap_or_default();
                if mask_timings(&committed) != mask_timings(&fresh) {
                    stale.push(describe_difference(&path, &committed, &fresh));
                }
            } else {
                std::fs::write(&path, &fresh)
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                println!(
                    "wrote {}",
                    path.strip_prefix(root()).unwrap_or(&path).display()
                );
            }
        }
    }
    if stale.is_empty() {
        println!(
            "{count} book outputs {}",
            if check { "up to date" } else { "regenerated" }
        );
        Ok(())
    } else {
        Err(format!(
            "{} book output(s) are stale; regenerate with `cargo xtask book-output` and commit:\n{}",
            stale.len(),
            stale.join("\n")
        ))
    }
}

/// Runs `cargo run --release -q <args>` and returns its stdout, paths normalised. Arguments
/// are split as [`split_args`] says; everything after ` <<< ` is fed to the program's
/// standard input (for commands that read stdin, like `ch02-tokenizer encode`), each `\n`
/// in it a line break.
///
/// With `check`, a figure the command writes (`--svg PATH`) goes to a scratch file instead,
/// which is compared with the committed one and removed: checking never writes into the
/// book. The second value describes the figure if it is stale.
fn produce(line: &str, check: bool) -> Result<(String, Option<String>), String> {
    use std::io::Write;
    let (args, input) = match line.split_once(" <<< ") {
        Some((args, input)) => (args, Some(input.replace("\\n", "\n"))),
        None => (line, None),
    };
    let mut args = split_args(args)?;
    // (the figure as the command names it, the scratch file written instead)
    let mut figure = None;
    if check
        && let Some(i) = args.iter().position(|a| a == "--svg")
        && let Some(path) = args.get_mut(i + 1)
    {
        let scratch =
            std::env::temp_dir().join(format!("llm-book-check-{}-{i}.svg", std::process::id()));
        figure = Some((path.clone(), scratch.clone()));
        *path = scratch.display().to_string();
    }
    // the command as a shell would take it, for the messages
    let shown = args
        .iter()
        .map(|a| {
            if a.contains(' ') {
                format!("\"{a}\"")
            } else {
                a.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ");
    eprintln!("  running: cargo run --release -q {shown}");
    let mut child = cargo()
        .args(["run", "--release", "-q"])
        .args(&args)
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("could not run cargo: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(input.unwrap_or_default().as_bytes())
            .map_err(|e| format!("could not write the input: {e}"))?;
    } // dropped here: the program sees the end of its input
    let output = child
        .wait_with_output()
        .map_err(|e| format!("could not run cargo: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "`cargo run --release -q {shown}` failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    let stale_figure = match figure {
        Some((named, scratch)) => {
            let fresh = std::fs::read_to_string(&scratch);
            let _ = std::fs::remove_file(&scratch); // ours, written by this run
            let fresh = fresh.map_err(|e| format!("{shown} did not write its figure: {e}"))?;
            text = text.replace(&scratch.display().to_string(), &named); // as the book shows it
            let committed = root().join(&named);
            let same = std::fs::read_to_string(&committed).is_ok_and(|c| c == fresh);
            (!same).then(|| {
                format!(
                    "  {} differs from what the program draws today",
                    committed.display()
                )
            })
        }
        None => None,
    };
    Ok((normalise_paths(&text, &root()), stale_figure))
}

/// Masks what changes from run to run or machine to machine:
/// - every number directly followed by a unit of [`UNITS`] (`12.5 GFLOP/s`, `3ms`, `4.2x`,
///   `2 threads`) becomes `#`;
/// - every kernel level name of [`LEVELS`] becomes `LEVEL`, and a list of them
///   (`scalar, avx2, avx512`, `scalar|avx2`) one `LEVEL`;
/// - runs of spaces fold to one, so a column padded to a timing's width still compares;
/// - a line repeated right after itself folds into one: a table with one row per level the
///   CPU runs has as many rows as the CPU has levels, each the same once masked.
pub fn mask_timings(text: &str) -> String {
    let masked = mask_levels(&mask_numbers(text));
    let mut lines: Vec<String> = Vec::new();
    for l in masked.lines() {
        let l = l
            .split(' ')
            .filter(|w| !w.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        if !(l.contains("LEVEL") && lines.last() == Some(&l)) {
            lines.push(l);
        }
    }
    lines.join("\n")
}

/// Level names to `LEVEL`, lists of them to one.
fn mask_levels(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let level_at = |i: usize| {
            (i == 0 || !is_word(chars[i - 1]))
                .then(|| {
                    LEVELS.iter().map(|l| l.chars().count()).find(|&n| {
                        let word: String = chars[i..chars.len().min(i + n)].iter().collect();
                        LEVELS.contains(&word.as_str())
                            && chars.get(i + n).is_none_or(|&c| !is_word(c))
                    })
                })
                .flatten()
        };
        let Some(n) = level_at(i) else {
            out.push(chars[i]);
            i += 1;
            continue;
        };
        out.push_str("LEVEL");
        i += n;
        // the rest of a list: `, avx2`, `|avx512`
        loop {
            let sep = match chars.get(i..i + 2) {
                Some([',', ' ']) => 2,
                _ if chars.get(i) == Some(&'|') => 1,
                _ => break,
            };
            match level_at(i + sep) {
                Some(n) => i += sep + n,
                None => break,
            }
        }
    }
    out
}

fn mask_numbers(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let starts_number = chars[i].is_ascii_digit() && (i == 0 || !is_word(chars[i - 1]));
        if starts_number {
            let mut j = i;
            while j < chars.len()
                && (chars[j].is_ascii_digit() || chars[j] == '.' || chars[j] == ',')
            {
                j += 1;
            }
            let mut k = j;
            if k < chars.len() && chars[k] == ' ' {
                k += 1;
            }
            let rest: String = chars[k..chars.len().min(k + 8)].iter().collect();
            let unit = UNITS.iter().find(|u| {
                rest.starts_with(**u) && rest[u.len()..].chars().next().is_none_or(|c| !is_word(c))
            });
            if unit.is_some() {
                out.push('#');
                i = j;
                continue;
            }
            out.extend(&chars[i..j]);
            i = j;
            continue;
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn describe_difference(path: &Path, committed: &str, fresh: &str) -> String {
    let (a, b) = (mask_timings(committed), mask_timings(fresh));
    let line = a
        .lines()
        .zip(b.lines())
        .position(|(x, y)| x != y)
        .unwrap_or(a.lines().count().min(b.lines().count()));
    format!(
        "  {} differs at line {}:\n    committed: {}\n    fresh:     {}",
        path.display(),
        line + 1,
        committed.lines().nth(line).unwrap_or("<end of file>"),
        fresh.lines().nth(line).unwrap_or("<end of file>")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_only_measurements() {
        assert_eq!(
            mask_timings("naive 1.25 GFLOP/s, blocked 9.8 GFLOP/s (7.8x)"),
            "naive # GFLOP/s, blocked # GFLOP/s (#x)"
        );
        assert_eq!(mask_timings("took 12ms and 3 s"), "took #ms and # s");
        assert_eq!(
            mask_timings("layer 12 shape (576, 64) 30 layers"),
            "layer 12 shape (576, 64) 30 layers"
        );
        assert_eq!(mask_timings("ids 3x3 matrix"), "ids 3x3 matrix");
        assert_eq!(mask_timings("h2s 10 seconds"), "h2s 10 seconds");
        assert_eq!(
            mask_timings("  naive    9.7x\nblocked 14.1x"),
            "naive #x\nblocked #x"
        );
    }

    #[test]
    fn masks_what_depends_on_the_cpu() {
        // an AVX-512 machine and an AVX2-only one print these; they must compare equal
        let xeon = "this CPU runs: scalar, avx2, avx512\n\
                    chosen: avx512 (set LLM_BOOK_ISA=scalar|avx2|avx512 to force one)\n\
                    \x20 scalar  1536/1536 outputs equal   677.9 µs   1.31 GMAC/s\n\
                    \x20 avx2    1536/1536 outputs equal    71.0 µs  12.46 GMAC/s\n\
                    \x20 avx512  1536/1536 outputs equal    67.6 µs  13.09 GMAC/s\n\
                    decode 142.5 tok/s (avx512 kernels, 2 threads)";
        let epyc = "this CPU runs: scalar, avx2\n\
                    chosen: avx2 (set LLM_BOOK_ISA=scalar|avx2|avx512 to force one)\n\
                    \x20 scalar  1536/1536 outputs equal   700.1 µs   1.27 GMAC/s\n\
                    \x20 avx2    1536/1536 outputs equal    80.0 µs  11.06 GMAC/s\n\
                    decode 118.6 tok/s (avx2 kernels, 4 threads)";
        assert_eq!(mask_timings(xeon), mask_timings(epyc));
        assert_eq!(
            mask_timings("this CPU runs: scalar, avx2, avx512"),
            "this CPU runs: LEVEL"
        );
        // everything else still counts: a changed word, token or count is stale
        for changed in [
            "this CPU runs: scalar, avx2\nchosen: avx2 (set LLM_BOOK_ISA=scalar|avx2|avx512 to force one)\n  scalar  1535/1536 outputs equal 1 µs 1 GMAC/s",
            "decode 118.6 tok/s (avx2 kernels, 2 threads, 8 layers)",
        ] {
            assert_ne!(mask_timings(xeon), mask_timings(changed), "{changed}");
        }
        // a repeated line folds only when it names a level; other repeats are content
        assert_eq!(mask_timings("the\nthe"), "the\nthe");
        // words that merely contain a level's name are words
        assert_eq!(mask_timings("scalars avx2x"), "scalars avx2x");
    }
}
