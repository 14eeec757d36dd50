//! `cargo xtask perf`: every speed table the book shows, measured again on this machine.
//!
//! A speed is a fact about one machine on one day, so the book never copies one into its
//! prose. Each chapter lists the measurements its pages show in `chapters/chNN-slug/perf.txt`,
//! one per line, in the syntax of `book-outputs.txt`:
//!
//! ```text
//! # name: cargo run args; {out} is the file the program writes its table to
//! ch07-compare.md: -p ch07-simd-parallel -- compare --rounds 5 --markdown {out}
//! ch10-curve-smollm2.txt: -p ch10-batching -- curve --compare
//! ```
//!
//! `perf` runs each (`cargo run --release -q <args>`, one after another, never two at once)
//! and writes `book/src/measured/<name>`: a header naming the CPU, its kernel level, its cores,
//! the load on it when the run began, the date and the commit, then the table (the file the
//! program wrote at `{out}`, or, without `{out}`, what it printed). Pages include these files,
//! so a table and the machine it describes never part. `book` checks that every listed file
//! exists with its header and that nothing else sits in `book/src/measured/`;
//! `book-output --check` leaves them alone, as it does every number.
//!
//! A page that compares machine kinds takes a second copy of some tables from a machine of
//! another kind: `perf --kind NAME…` writes them to `book/src/measured/<level>/` instead, where
//! `<level>` is the best kernel level of the machine it runs on (`avx2` on an AMD EPYC with
//! AVX2 alone, say), so a table measured on one kind can never land in another kind's folder.

use std::path::PathBuf;
use std::time::Instant;

use crate::cmdline::{list_entries, normalise_paths, split_args};
use crate::exercises::chapters;
use crate::{cargo, root};

/// Where the measured files live, under the book's source.
pub const DIR: &str = "book/src/measured";

/// How every measured file's header begins (the book check looks for it).
pub const HEADER: &str = "Measured on ";

/// One line of a `perf.txt`.
pub struct Entry {
    /// The file's name in [`DIR`] (`ch07-compare.md`).
    pub name: String,
    /// The arguments after `cargo run --release -q`, `{out}` not yet replaced.
    pub args: String,
    /// The `perf.txt` and line it came from, for messages.
    pub source: String,
}

impl Entry {
    /// Whether `perf NAME` means this entry: its file name, that name without the
    /// extension, or its chapter (`ch07` for `ch07-compare.md`).
    fn answers_to(&self, name: &str) -> bool {
        self.name == name
            || self
                .name
                .rsplit_once('.')
                .is_some_and(|(stem, _)| stem == name)
            || self.name.starts_with(&format!("{name}-"))
    }
}

/// Every chapter's entries, in chapter order.
pub fn entries() -> Result<Vec<Entry>, String> {
    let mut all = Vec::new();
    for chapter in chapters() {
        for e in list_entries(&chapter.dir.join("perf.txt"))? {
            if e.name.contains('/') || !(e.name.ends_with(".md") || e.name.ends_with(".txt")) {
                return Err(format!(
                    "{}: {:?} should be a plain .md or .txt name",
                    e.source, e.name
                ));
            }
            all.push(Entry {
                name: e.name,
                args: e.args,
                source: e.source,
            });
        }
    }
    Ok(all)
}

/// `perf [--list] [NAME|chNN ...]`: measure every entry, or those named (an entry's name
/// without its extension, or a chapter's `chNN` for all of that chapter's).
pub fn run(args: &[&str]) -> Result<(), String> {
    let list_only = args.contains(&"--list");
    let by_kind = args.contains(&"--kind");
    let wanted: Vec<&str> = args
        .iter()
        .copied()
        .filter(|a| !matches!(*a, "--list" | "--kind"))
        .collect();
    if by_kind && (wanted.is_empty() || std::env::var_os("LLM_BOOK_ISA").is_some()) {
        return Err(
            "--kind takes the names of the tables to measure, on the machine's own \
                    kernel level (without LLM_BOOK_ISA: a forced level is not another machine)"
                .into(),
        );
    }
    let all = entries()?;
    let chosen: Vec<&Entry> = all
        .iter()
        .filter(|e| wanted.is_empty() || wanted.iter().any(|w| e.answers_to(w)))
        .collect();
    if let Some(unknown) = wanted.iter().find(|w| !all.iter().any(|e| e.answers_to(w))) {
        return Err(format!(
            "no measurement is called {unknown:?}; `cargo xtask perf --list` lists them"
        ));
    }
    if list_only {
        for e in &chosen {
            println!("{:28} cargo run --release -q {}", e.name, e.args);
        }
        return Ok(());
    }
    let dir = if by_kind {
        root().join(DIR).join(crate::levels::best_level())
    } else {
        root().join(DIR)
    };
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    eprintln!(
        "measuring {} table(s) on {}; run nothing else meanwhile: every other program on the \
         CPU shows up in them",
        chosen.len(),
        machine().0
    );
    // build everything first, so no compiler shares the CPU with a measurement
    let mut build = cargo();
    build.args(["build", "--release", "-q"]);
    let mut packages: Vec<String> = Vec::new();
    for e in &chosen {
        let args = split_args(&e.args)?;
        let cargo_args = args.split(|a| a == "--").next().unwrap_or_default();
        for pair in cargo_args.windows(2) {
            if pair[0] == "-p" && !packages.contains(&pair[1]) {
                packages.push(pair[1].clone());
            }
        }
    }
    for p in &packages {
        build.args(["-p", p]);
    }
    crate::run_visible(&mut build, "build the measured programs")?;
    let started = Instant::now();
    // one failure (llama.cpp not built, a model missing) does not cost the other tables
    let mut failed = Vec::new();
    for e in chosen {
        let t = Instant::now();
        match measure(e, &dir, by_kind) {
            Ok(()) => eprintln!("  {} took {:.0} s", e.name, t.elapsed().as_secs_f64()),
            Err(err) => {
                eprintln!("  {} FAILED: {err}", e.name);
                failed.push(format!("  {}: {err}", e.name));
            }
        }
    }
    eprintln!("done in {:.1} min", started.elapsed().as_secs_f64() / 60.0);
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} table(s) could not be measured (the committed ones are unchanged):\n{}",
            failed.len(),
            failed.join("\n")
        ))
    }
}

/// Runs one entry and writes its file, header first (`kind`: into a machine kind's folder).
fn measure(e: &Entry, dir: &std::path::Path, kind: bool) -> Result<(), String> {
    let target = dir.join(&e.name);
    let load = load_average();
    // the program writes its table to a scratch file, never straight into the book: a run
    // that fails leaves the committed table as it was
    let scratch: PathBuf =
        std::env::temp_dir().join(format!("llm-book-perf-{}-{}", std::process::id(), e.name));
    let uses_out = e.args.contains("{out}");
    let args = split_args(&e.args.replace("{out}", &scratch.display().to_string()))?;
    eprintln!(
        "  running: cargo run --release -q {}",
        e.args.replace("{out}", &e.name)
    );
    let output = cargo()
        .args(["run", "--release", "-q"])
        .args(&args)
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|err| format!("could not run cargo: {err}"))?;
    if !output.status.success() {
        let _ = std::fs::remove_file(&scratch); // ours, made by this run
        return Err(format!(
            "{} ({}) failed: {}",
            e.name, e.source, output.status
        ));
    }
    let table = if uses_out {
        let t = std::fs::read_to_string(&scratch);
        let _ = std::fs::remove_file(&scratch);
        t.map_err(|err| format!("{}: the program did not write its table: {err}", e.name))?
    } else {
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let table = normalise_paths(&table, &root());
    let text = format!("{}\n{}", header(e, load.as_deref(), kind), table.trim_end());
    std::fs::write(&target, text + "\n")
        .map_err(|err| format!("cannot write {}: {err}", target.display()))
}

/// `Measured on AMD EPYC (family 25, model 17), avx512 kernels, 2 cores, load 0.05 at the start, 2026-11-24,
/// commit 7c96552: cargo xtask perf ch07-compare` (italic in a Markdown file).
fn header(e: &Entry, load: Option<&str>, kind: bool) -> String {
    let (cpu, cores) = machine();
    let level = crate::levels::best_level();
    let date = capture("date", &["-u", "+%Y-%m-%d"]).unwrap_or_else(|| "date unknown".into());
    let mut commit =
        capture("git", &["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let changed = capture(
        "git",
        &["status", "--porcelain", "--untracked-files=no", "chapters"],
    )
    .is_some_and(|s| !s.is_empty());
    if changed {
        commit.push_str(" with uncommitted changes to chapters/");
    }
    let load = load
        .map(|l| format!(", load {l} at the start"))
        .unwrap_or_default();
    let stem = e.name.rsplit_once('.').map_or(e.name.as_str(), |(s, _)| s);
    let kind = if kind { "--kind " } else { "" };
    let line = format!(
        "{HEADER}{cpu}, {level} kernels, {cores} cores{load}, {date}, commit {commit}: \
         `cargo xtask perf {kind}{stem}`"
    );
    if e.name.ends_with(".md") {
        format!("*{line}*\n")
    } else {
        line.replace('`', "")
    }
}

/// The CPU's model name (with its family and model numbers, which tell one generation of
/// "AMD EPYC" from another) and how many cores the program may use.
fn machine() -> (String, usize) {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |key: &str| {
        info.lines()
            .find(|l| l.split(':').next().is_some_and(|k| k.trim() == key))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.split_whitespace().collect::<Vec<_>>().join(" "))
    };
    let cpu = match (field("model name"), field("cpu family"), field("model")) {
        (Some(name), Some(family), Some(model)) => {
            format!("{name} (family {family}, model {model})")
        }
        (Some(name), _, _) => name,
        _ => std::env::consts::ARCH.to_string(),
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cpu, cores)
}

/// The one-minute load average, as the kernel reports it (Linux only).
fn load_average() -> Option<String> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().next().map(str::to_string)
}

fn capture(program: &str, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new(program)
        .args(args)
        .current_dir(root())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The kernel levels a machine kind's folder of tables can be named after.
const KINDS: [&str; 3] = ["avx512", "avx2", "scalar"];

/// For `book`: every listed file exists and starts with its header, and the directory holds
/// nothing else (a table no command makes would be a number no reader can reproduce); a
/// machine kind's folder holds only listed tables, each measured on that kernel level.
pub fn check(problems: &mut Vec<String>) {
    let all = match entries() {
        Ok(all) => all,
        Err(e) => return problems.push(e),
    };
    let dir = root().join(DIR);
    for e in &all {
        let path = dir.join(&e.name);
        match std::fs::read_to_string(&path) {
            Ok(text) if text.trim_start_matches('*').starts_with(HEADER) => {}
            Ok(_) => problems.push(format!(
                "{DIR}/{}: does not begin with its header; regenerate it with `cargo xtask perf {}`",
                e.name, e.name
            )),
            Err(_) => problems.push(format!(
                "{DIR}/{} ({}) is missing; make it with `cargo xtask perf {}`",
                e.name, e.source, e.name
            )),
        }
    }
    if let Ok(files) = std::fs::read_dir(&dir) {
        for f in files.filter_map(Result::ok) {
            let name = f.file_name().to_string_lossy().into_owned();
            if KINDS.contains(&name.as_str()) && f.path().is_dir() {
                check_kind(&all, &name, &f.path(), problems);
            } else if !all.iter().any(|e| e.name == name) {
                problems.push(format!(
                    "{DIR}/{name}: no chapter's perf.txt makes it; list its command or remove it"
                ));
            }
        }
    }
}

/// `measured/<level>/`: each file a listed table whose header names that kernel level.
fn check_kind(all: &[Entry], level: &str, dir: &std::path::Path, problems: &mut Vec<String>) {
    let Ok(files) = std::fs::read_dir(dir) else {
        return problems.push(format!("{DIR}/{level}: cannot be read"));
    };
    for f in files.filter_map(Result::ok) {
        let name = f.file_name().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(f.path()).unwrap_or_default();
        let head = text.lines().next().unwrap_or_default();
        if !all.iter().any(|e| e.name == name) {
            problems.push(format!(
                "{DIR}/{level}/{name}: no chapter's perf.txt makes it; list its command or remove it"
            ));
        } else if !head.trim_start_matches('*').starts_with(HEADER)
            || !head.contains(&format!(", {level} kernels,"))
        {
            problems.push(format!(
                "{DIR}/{level}/{name}: its header does not say it was measured with {level} \
                 kernels; regenerate it with `cargo xtask perf --kind {name}` on such a machine"
            ));
        }
    }
}
