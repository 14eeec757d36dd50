//! The exercise checker.
//!
//! Each chapter crate ships its exercises the same way:
//!
//! ```text
//! chapters/chNN-slug/src/exercises.rs        stubs: `todo!()`, a `// TODO`, a hint (yours to fill in)
//! chapters/chNN-slug/solutions/exercises.rs  the reference solutions (same signatures)
//! chapters/chNN-slug/tests/exercises.rs      one test per exercise, named exN_<title>
//! ```
//!
//! `--features exercises` compiles the tests against the stubs; `--features solutions` swaps
//! the stub module for the solutions file (`#[cfg_attr(feature = "solutions", path = ...)]`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::{cargo, root};

/// Chapters being written that have no exercises yet (no `src/exercises.rs`, no
/// `exercises` feature): the checks below skip them and say so. A chapter leaves this list
/// with its exercises, which are then checked like every other chapter's.
pub const NO_EXERCISES_YET: &[&str] = &[];

/// A chapter crate: its directory name is its package name (`ch01-tensors`).
pub struct Chapter {
    pub package: String,
    pub dir: PathBuf,
}

/// Every chapter crate in `chapters/`, in order.
pub fn chapters() -> Vec<Chapter> {
    let mut found: Vec<Chapter> = std::fs::read_dir(root().join("chapters"))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.path().join("Cargo.toml").exists())
                .map(|e| Chapter {
                    package: e.file_name().to_string_lossy().into_owned(),
                    dir: e.path(),
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort_by(|a, b| a.package.cmp(&b.package));
    found
}

/// `ch01`, `1`, `01` or `ch01-tensors` name the same chapter.
pub fn find_chapter(name: &str) -> Result<Chapter, String> {
    let digits: String = name
        .trim_start_matches("ch")
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    let wanted = match digits.parse::<u32>() {
        Ok(n) => format!("ch{n:02}-"),
        Err(_) => return Err(format!("{name:?} is not a chapter: try ch01, ch02, …")),
    };
    let all = chapters();
    let names: Vec<&str> = all.iter().map(|c| c.package.as_str()).collect();
    let list = names.join(", ");
    all.into_iter()
        .find(|c| c.package.starts_with(&wanted))
        .ok_or_else(|| format!("no chapter {name:?} in this workspace (there are: {list})"))
}

/// What happened to one exercise test.
struct Outcome {
    passed: bool,
    /// The panic message of a failed test, trimmed to its first lines.
    message: String,
}

/// How an exercise test begins its panic message when this CPU cannot run the exercise at
/// all (chapter 7's AVX2 exercises on an ARM machine, its arena exercise where there is no
/// Linux): neither a pass nor the reader's failure, and said as such.
const CANNOT_RUN: &str = "cannot run on this CPU";

impl Outcome {
    fn cannot_run(&self) -> bool {
        !self.passed && self.message.starts_with(CANNOT_RUN)
    }
}

/// Runs one chapter's exercise tests. `Err` means they did not even compile or run.
fn run_tests(chapter: &Chapter, solutions: bool) -> Result<BTreeMap<String, Outcome>, String> {
    let feature = if solutions { "solutions" } else { "exercises" };
    let output = cargo()
        .args(["test", "--release", "-p", &chapter.package])
        .args([
            "--features",
            feature,
            "--test",
            "exercises",
            "--",
            "--test-threads=2",
        ])
        .env("RUST_BACKTRACE", "0")
        .output()
        .map_err(|e| format!("could not run cargo: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let outcomes = parse_libtest(&stdout);
    if outcomes.is_empty() {
        return Err(format!(
            "the exercise tests of {} did not run (features {feature}). cargo said:\n{stderr}{stdout}",
            chapter.package
        ));
    }
    Ok(outcomes)
}

/// Reads libtest's plain output: `test exN_name ... ok|FAILED` lines, then the captured
/// stdout of each failure between `---- exN_name stdout ----` markers.
fn parse_libtest(stdout: &str) -> BTreeMap<String, Outcome> {
    let mut outcomes = BTreeMap::new();
    for line in stdout.lines() {
        if let Some(rest) = line.strip_prefix("test ")
            && let Some((name, verdict)) = rest.split_once(" ... ")
            && name.starts_with("ex")
        {
            let passed = verdict.trim() == "ok";
            outcomes.insert(
                name.to_string(),
                Outcome {
                    passed,
                    message: String::new(),
                },
            );
        }
    }
    let mut current: Option<String> = None;
    let mut text = String::new();
    let flush = |name: &Option<String>, text: &mut String, map: &mut BTreeMap<String, Outcome>| {
        if let Some(name) = name
            && let Some(outcome) = map.get_mut(name)
        {
            outcome.message = summarize_panic(text);
        }
        text.clear();
    };
    for line in stdout.lines() {
        if let Some(name) = line
            .strip_prefix("---- ")
            .and_then(|l| l.strip_suffix(" stdout ----"))
        {
            flush(&current, &mut text, &mut outcomes);
            current = Some(name.to_string());
        } else if line == "failures:" || line.starts_with("test result:") {
            flush(&current, &mut text, &mut outcomes);
            current = None;
        } else if current.is_some() {
            text.push_str(line);
            text.push('\n');
        }
    }
    outcomes
}

/// Keeps the message of a panic, without the `thread … panicked at` line and backtrace note.
/// An `assert_eq!` failure starts with "assertion `left == right` failed: " and puts the
/// test's own message after it; the message in the reader's terms comes first here, and
/// the two values after it.
fn summarize_panic(text: &str) -> String {
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| {
            !l.starts_with("thread '") && !l.starts_with("note: run with") && !l.trim().is_empty()
        })
        .take(6)
        .map(str::to_string)
        .collect();
    for prefix in [
        "assertion `left == right` failed",
        "assertion `left != right` failed",
    ] {
        if let Some(first) = lines.first_mut()
            && let Some(rest) = first.strip_prefix(prefix)
        {
            *first = match rest.strip_prefix(": ") {
                Some(message) => message.to_string(),
                None => "two values that should agree do not".to_string(),
            };
        }
    }
    lines.join("\n      ")
}

/// Exercise number from a test name: `ex3_rope_one_vector` -> 3.
fn number(test: &str) -> u32 {
    test.trim_start_matches("ex")
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap_or(0)
}

/// `cargo xtask exercises chNN [--solutions]`: a checklist in the reader's terms.
pub fn check(name: &str, solutions: bool) -> Result<(), String> {
    let chapter = find_chapter(name)?;
    if NO_EXERCISES_YET.contains(&chapter.package.as_str()) {
        return Err(format!(
            "{} has no exercises yet: the chapter is still being written",
            chapter.package
        ));
    }
    let source = if solutions {
        "solutions/exercises.rs"
    } else {
        "src/exercises.rs"
    };
    println!(
        "{} exercises, checking chapters/{}/{source}:\n",
        chapter.package, chapter.package,
    );
    let outcomes = run_tests(&chapter, solutions)?;
    let mut done = 0;
    let mut next = None;
    let mut sorted: Vec<(&String, &Outcome)> = outcomes.iter().collect();
    sorted.sort_by_key(|(test, _)| number(test));
    let mut unrunnable = 0;
    for (test, outcome) in &sorted {
        if outcome.passed {
            done += 1;
            println!("  [x] {test}");
        } else if outcome.cannot_run() {
            unrunnable += 1;
            println!("  [-] {test}\n      {}", outcome.message);
        } else {
            next.get_or_insert(number(test));
            println!("  [ ] {test}\n      {}", outcome.message);
        }
    }
    println!("\n{done} of {} exercises pass.", outcomes.len());
    if unrunnable > 0 {
        println!(
            "{unrunnable} cannot run on this CPU: try them on an x86-64 Linux machine with AVX2."
        );
    }
    match next {
        None if done == 0 && unrunnable > 0 => {
            Err("no exercise of this chapter can run on this CPU".into())
        }
        None => {
            println!("All done. Compare with the reference: cargo xtask solution {name} <N>");
            Ok(())
        }
        Some(n) => {
            println!("Next: exercise {n}. Stuck? cargo xtask hint {name} {n}");
            Err(format!(
                "{} of {} exercises still fail",
                outcomes.len() - done - unrunnable,
                outcomes.len()
            ))
        }
    }
}

/// The most exercises a chapter may have: six, or three a page for a chapter the book spreads
/// over more pages (chapter 7's three pages: nine; chapter 8's four: twelve), its pages being
/// `book/src/chNN-*.md`.
fn most_exercises(chapter: &Chapter) -> usize {
    let prefix = format!("{}-", chapter.package.split('-').next().unwrap_or_default());
    let pages = std::fs::read_dir(root().join("book/src"))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name.starts_with(&prefix) && name.ends_with(".md")
                })
                .count()
        })
        .unwrap_or(0);
    (3 * pages).max(6)
}

/// `cargo xtask exercises --verify`: both directions, every chapter.
pub fn verify_all() -> Result<(), String> {
    let mut problems = Vec::new();
    let all = chapters();
    if all.is_empty() {
        return Err("no chapter crates found under chapters/".into());
    }
    for chapter in &all {
        if NO_EXERCISES_YET.contains(&chapter.package.as_str()) {
            println!(
                "  {:<22} no exercises yet (being written; xtask's NO_EXERCISES_YET)",
                chapter.package
            );
            continue;
        }
        let stubs = run_tests(chapter, false)?;
        let solved = run_tests(chapter, true)?;
        let count = stubs.len();
        let most = most_exercises(chapter);
        if !(3..=most).contains(&count) {
            problems.push(format!(
                "{}: {count} exercises; this chapter has 3 to {most}",
                chapter.package
            ));
        }
        // an exercise this CPU cannot run must say so both ways; it is counted, not checked
        let unrunnable: Vec<&String> = solved
            .iter()
            .filter(|(t, o)| o.cannot_run() && stubs.get(*t).is_some_and(Outcome::cannot_run))
            .map(|(t, _)| t)
            .collect();
        for (test, outcome) in &stubs {
            if unrunnable.contains(&test) {
                continue;
            }
            if outcome.passed {
                problems.push(format!(
                    "{}: {test} passes with the stub as shipped",
                    chapter.package
                ));
            }
        }
        for test in stubs.keys().filter(|t| !solved.contains_key(*t)) {
            problems.push(format!(
                "{}: {test} did not run with the solutions",
                chapter.package
            ));
        }
        for (test, outcome) in &solved {
            if !outcome.passed && !unrunnable.contains(&test) {
                problems.push(format!(
                    "{}: {test} fails with the reference solution: {}",
                    chapter.package, outcome.message
                ));
            }
        }
        let failing = stubs
            .values()
            .filter(|o| !o.passed && !o.cannot_run())
            .count();
        let passing = solved.values().filter(|o| o.passed).count();
        println!(
            "  {:<22} {count} exercises: {failing} fail as shipped, {passing} pass with solutions{}",
            chapter.package,
            match unrunnable.len() {
                0 => String::new(),
                n => format!(", {n} cannot run on this CPU"),
            }
        );
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "exercise check failed:\n  {}",
            problems.join("\n  ")
        ))
    }
}

/// `cargo xtask hint|solution chNN N`: prints the exercise's doc comment (with its hint),
/// or the whole solved function.
pub fn show(name: &str, n: &str, solution: bool) -> Result<(), String> {
    let chapter = find_chapter(name)?;
    let n: u32 = n
        .parse()
        .map_err(|_| format!("{n:?} is not an exercise number"))?;
    let file = chapter.dir.join(if solution {
        "solutions/exercises.rs"
    } else {
        "src/exercises.rs"
    });
    let text = std::fs::read_to_string(&file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let lines: Vec<&str> = text.lines().collect();
    let marker = format!("Exercise {n}:");
    let at = lines
        .iter()
        .position(|l| l.trim_start().starts_with("///") && l.contains(&marker))
        .ok_or_else(|| format!("{} has no exercise {n}", chapter.package))?;
    let start = (0..=at)
        .rev()
        .take_while(|&i| lines[i].trim_start().starts_with("///"))
        .last()
        .unwrap_or(at);
    let doc_end = (at..lines.len())
        .find(|&i| !lines[i].trim_start().starts_with("///"))
        .unwrap_or(lines.len());
    let end = if solution {
        (doc_end..lines.len())
            .find(|&i| lines[i] == "}")
            .map_or(lines.len(), |i| i + 1)
    } else {
        doc_end
    };
    println!(
        "{}:{}\n",
        file.strip_prefix(root()).unwrap_or(&file).display(),
        start + 1
    );
    for line in &lines[start..end] {
        println!("{line}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_libtest_output_with_messages() {
        let out = "\nrunning 2 tests\ntest ex2_softmax ... ok\ntest ex1_transpose ... FAILED\n\n\
            failures:\n\n---- ex1_transpose stdout ----\n\nthread 'ex1_transpose' panicked at x.rs:1:1:\n\
            not yet implemented: exercise 1\nnote: run with `RUST_BACKTRACE=1`\n\nfailures:\n    ex1_transpose\n\n\
            test result: FAILED. 1 passed; 1 failed\n";
        let map = parse_libtest(out);
        assert!(map["ex2_softmax"].passed);
        assert!(!map["ex1_transpose"].passed);
        assert_eq!(
            map["ex1_transpose"].message,
            "not yet implemented: exercise 1"
        );
        let out = "test ex3_x ... FAILED\n\nfailures:\n\n---- ex3_x stdout ----\n\nthread 'ex3_x' panicked at x.rs:1:1:\n\
            assertion `left == right` failed: row 2 lets token 2 see token 3\n  left: 1\n right: 0\n\nfailures:\n";
        assert_eq!(
            parse_libtest(out)["ex3_x"].message,
            "row 2 lets token 2 see token 3\n        left: 1\n       right: 0"
        );
        assert_eq!(number("ex12_x"), 12);
        let out = "test ex1_simd ... FAILED\ntest ex2_plain ... FAILED\n\nfailures:\n\n---- ex1_simd stdout ----\n\n\
            thread 'ex1_simd' panicked at x.rs:1:1:\ncannot run on this CPU: exercise 1 is AVX2 code\n\n\
            ---- ex2_plain stdout ----\n\nthread 'ex2_plain' panicked at x.rs:1:1:\nnot yet implemented\n\nfailures:\n";
        let map = parse_libtest(out);
        assert!(map["ex1_simd"].cannot_run());
        assert!(
            !map["ex2_plain"].cannot_run(),
            "an unsolved exercise is the reader's to do"
        );
    }
}
