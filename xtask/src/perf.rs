//! `cargo xtask perf`: every speed table the book shows, measured again on this machine.
//!
//! A speed is a fact about one machine on one day, so the book never copies one into its
//! prose. Each chapter lists the measurements its pages show in `chapters/chNN-slug/perf.txt`,
//! one per line, in the syntax of `book-outputs.txt`:
//!
//! ```text
//! # name [kinds]: cargo run args; {out} is the file the program writes its table to
//! ch07-compare.md: -p ch07-simd-parallel -- compare --rounds 5 --markdown {out}
//! ch10-curve-smollm2.txt [avx2]: -p ch10-batching -- curve --compare
//! ```
//!
//! An entry whose arguments begin with `bash scripts/` runs that script instead, for a
//! measurement that drives several processes (chapter 11's soak: `ch11-soak.txt: bash
//! scripts/soak.sh`); the script builds what it runs and prints its report.
//!
//! `perf` runs each (`cargo run --release -q <args>`, one after another, never two at once)
//! and writes `book/src/measured/<name>`: a header naming the CPU, its kernel level, its cores,
//! the threads the program ran, the load on it when the run began, the date and the commit,
//! then the table (the file the program wrote at `{out}`, or, without `{out}`, what it
//! printed). Pages include these files, so a table and the machine it describes never part.
//! `book` checks that every listed file exists with its header and that nothing else sits in
//! `book/src/measured/` (but the kinds' folders below, `scale-16/`, which
//! `scripts/cpu-scale.sh` fills on a 16-core machine, and `gpu/`, which
//! `scripts/gpu-race.sh` fills on a lent GPU, each file with the same header);
//! `book-output --check` leaves them alone, as it does every number.
//!
//! A page that compares machine kinds takes a second copy of some tables from a machine of
//! another kind: the entries marked with that kind's kernel level (`[avx2]`). `perf --kind`
//! measures every entry marked with the best kernel level of the machine it runs on (`avx2`
//! on an AMD EPYC with AVX2 alone, say) into `book/src/measured/<level>/`, so a table measured
//! on one kind can never land in another kind's folder; a figure such an entry draws goes to
//! `book/src/images/<level>/`, beside the other kind's.
//!
//! A run without names is the book's *reference run* for the machine's kind: every table of
//! that kind, at one commit (it refuses to start with uncommitted changes to the code), each
//! file headed with that commit and the run's date. Any run stops before its next table if
//! the code or the commit changes under it, since that table's `cargo run` would build and
//! measure code its header does not name.

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
    /// The arguments after `cargo run --release -q`, `{out}` not yet replaced; or a script's
    /// command line, `bash scripts/…` (see [`Entry::script`]).
    pub args: String,
    /// The `perf.txt` and line it came from, for messages.
    pub source: String,
    /// The machine kinds (kernel levels) that also keep a copy in `measured/<kind>/`.
    pub kinds: Vec<String>,
}

impl Entry {
    /// The script an entry runs instead of a chapter's binary, with its arguments
    /// (`bash scripts/soak.sh` → `["scripts/soak.sh"]`), or `None` for a `cargo run` entry.
    fn script(&self) -> Option<Vec<String>> {
        let args = split_args(&self.args).ok()?;
        (args.first().map(String::as_str) == Some("bash")
            && args.get(1).is_some_and(|a| a.starts_with("scripts/")))
        .then(|| args[1..].to_vec())
    }

    /// The command line as a reader would type it.
    fn command(&self, args: &str) -> String {
        if self.script().is_some() {
            args.to_string()
        } else {
            format!("cargo run --release -q {args}")
        }
    }

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
            let (name, kinds) = name_and_kinds(&e.name)
                .ok_or_else(|| format!("{}: expected `<name> [kind …]: <args>`", e.source))?;
            if name.contains('/') || !(name.ends_with(".md") || name.ends_with(".txt")) {
                return Err(format!(
                    "{}: {name:?} should be a plain .md or .txt name",
                    e.source
                ));
            }
            if let Some(k) = kinds.iter().find(|k| !KINDS.contains(&k.as_str())) {
                return Err(format!(
                    "{}: {k:?} is not a kind; the kinds are the kernel levels {}",
                    e.source,
                    KINDS.join(", ")
                ));
            }
            all.push(Entry {
                name,
                args: e.args,
                source: e.source,
                kinds,
            });
        }
    }
    Ok(all)
}

/// `ch10-curve-gemma.txt [avx2]` → the name and its kinds; `None` if a bracket is unclosed.
fn name_and_kinds(field: &str) -> Option<(String, Vec<String>)> {
    match field.split_once('[') {
        None => Some((field.trim().to_string(), Vec::new())),
        Some((name, rest)) => {
            let inside = rest.trim_end().strip_suffix(']')?;
            let kinds = inside
                .split([',', ' '])
                .filter(|k| !k.is_empty())
                .map(str::to_string)
                .collect();
            Some((name.trim().to_string(), kinds))
        }
    }
}

/// `perf [--list] [--kind] [NAME|chNN ...]`: measure every entry, or those named (an
/// entry's name without its extension, or a chapter's `chNN` for all of that chapter's);
/// with `--kind`, the entries marked with this machine's kernel level, into its folder.
pub fn run(args: &[&str]) -> Result<(), String> {
    let list_only = args.contains(&"--list");
    let by_kind = args.contains(&"--kind");
    let wanted: Vec<&str> = args
        .iter()
        .copied()
        .filter(|a| !matches!(*a, "--list" | "--kind"))
        .collect();
    if by_kind && std::env::var_os("LLM_BOOK_ISA").is_some() {
        return Err(
            "--kind measures the machine's own kernel level; unset LLM_BOOK_ISA (a forced \
             level is not another machine)"
                .into(),
        );
    }
    let level = crate::levels::best_level();
    let all = entries()?;
    if let Some(unknown) = wanted.iter().find(|w| !all.iter().any(|e| e.answers_to(w))) {
        return Err(format!(
            "no measurement is called {unknown:?}; `cargo xtask perf --list` lists them"
        ));
    }
    let chosen: Vec<&Entry> = all
        .iter()
        .filter(|e| wanted.is_empty() || wanted.iter().any(|w| e.answers_to(w)))
        // `--kind` alone: every table kept for this kind of machine
        .filter(|e| !(by_kind && wanted.is_empty()) || e.kinds.iter().any(|k| k == level))
        .collect();
    if by_kind && let Some(e) = chosen.iter().find(|e| !e.kinds.iter().any(|k| k == level)) {
        return Err(format!(
            "{} is not kept for {level} machines; mark it `{} [{level}]` in {} first",
            e.name, e.name, e.source
        ));
    }
    if chosen.is_empty() {
        return Err(format!(
            "no table is kept for {level} machines (none is marked [{level}] in a perf.txt)"
        ));
    }
    if list_only {
        for e in &chosen {
            let kinds = if e.kinds.is_empty() {
                String::new()
            } else {
                format!(" [{}]", e.kinds.join(" "))
            };
            let args = kind_args(&e.args, by_kind.then_some(level));
            println!("{:36} {}", e.name.clone() + &kinds, e.command(&args));
        }
        return Ok(());
    }
    let stamp = Stamp::now();
    if wanted.is_empty() && stamp.changed {
        return Err(
            "a reference run measures one commit: commit (or stash) the changes to chapters/ \
             first, or name the tables to measure"
                .into(),
        );
    }
    let dir = if by_kind {
        root().join(DIR).join(level)
    } else {
        root().join(DIR)
    };
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    eprintln!(
        "measuring {} table(s) on {}, {level} kernels, at commit {}; run nothing else \
         meanwhile: every other program on the CPU shows up in them",
        chosen.len(),
        machine().0,
        stamp.commit
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
    // (a script entry builds what it runs; with no package named, `cargo build` would build
    // the whole workspace)
    if !packages.is_empty() {
        crate::run_visible(&mut build, "build the measured programs")?;
    }
    let started = Instant::now();
    // one failure (llama.cpp not built, a model missing) does not cost the other tables
    let mut failed = Vec::new();
    for e in chosen {
        if code_now() != stamp.code {
            failed.push(format!("  {}: not measured", e.name));
            eprintln!(
                "the code under chapters/ (or the commit) changed during the run: the tables \
                 from {} on would measure code that is not commit {}; stopping",
                e.name, stamp.commit
            );
            break;
        }
        let t = Instant::now();
        match measure(e, &dir, by_kind.then_some(level), &stamp) {
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

/// Where a kind's copy of a figure goes: `book/src/images/x.svg` → `book/src/images/avx2/x.svg`.
fn kind_args(args: &str, kind: Option<&str>) -> String {
    match kind {
        Some(k) => args.replace(IMAGES, &format!("{IMAGES}{k}/")),
        None => args.to_string(),
    }
}

/// Where the figures the measuring programs draw live.
const IMAGES: &str = "book/src/images/";

/// Runs one entry and writes its file, header first (`kind`: into a machine kind's folder).
fn measure(
    e: &Entry,
    dir: &std::path::Path,
    kind: Option<&str>,
    stamp: &Stamp,
) -> Result<(), String> {
    let target = dir.join(&e.name);
    let load = load_average();
    // the program writes its table to a scratch file, never straight into the book: a run
    // that fails leaves the committed table as it was
    let scratch: PathBuf =
        std::env::temp_dir().join(format!("llm-book-perf-{}-{}", std::process::id(), e.name));
    let uses_out = e.args.contains("{out}");
    let entry_args = kind_args(&e.args, kind);
    if let Some(k) = kind {
        let images = root().join(IMAGES).join(k);
        std::fs::create_dir_all(&images)
            .map_err(|err| format!("cannot create {}: {err}", images.display()))?;
    }
    let args = split_args(&entry_args.replace("{out}", &scratch.display().to_string()))?;
    eprintln!(
        "  running: {}",
        e.command(&entry_args.replace("{out}", &e.name))
    );
    let mut command = match e.script() {
        Some(script) => {
            let mut bash = std::process::Command::new("bash");
            bash.args(script).current_dir(root());
            bash
        }
        None => {
            let mut run = cargo();
            run.args(["run", "--release", "-q"]).args(&args);
            run
        }
    };
    let output = command
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|err| format!("could not run `{}`: {err}", e.command(&e.args)))?;
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
    let text = format!(
        "{}\n{}",
        header(e, load.as_deref(), kind.is_some(), stamp),
        table.trim_end()
    );
    std::fs::write(&target, text + "\n")
        .map_err(|err| format!("cannot write {}: {err}", target.display()))
}

/// The commit and date a run measures, taken once at its start so that every file of one
/// run names the same.
struct Stamp {
    commit: String,
    date: String,
    /// The code under `chapters/` differs from the commit.
    changed: bool,
    /// The commit and the code's difference from it, to tell whether the code changes
    /// while the run goes on (each table's `cargo run` would build the new code).
    code: Option<String>,
}

impl Stamp {
    fn now() -> Stamp {
        let date = capture("date", &["-u", "+%Y-%m-%d"]).unwrap_or_else(|| "date unknown".into());
        let commit =
            capture("git", &["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
        let changed = capture(
            "git",
            &["status", "--porcelain", "--untracked-files=no", "chapters"],
        )
        .is_some_and(|s| !s.is_empty());
        Stamp {
            commit,
            date,
            changed,
            code: code_now(),
        }
    }
}

/// The commit and `git diff` of the code under `chapters/` (`None` without git).
fn code_now() -> Option<String> {
    let head = capture("git", &["rev-parse", "HEAD"])?;
    let diff = capture("git", &["diff", "HEAD", "--", "chapters"])?;
    Some(head + &diff)
}

/// `Measured on AMD EPYC (family 25, model 17), avx512 kernels, 2 cores, 2 threads, load 0.05
/// at the start, 2026-11-24, commit 7c96552: cargo xtask perf ch07-compare` (italic in a
/// Markdown file).
fn header(e: &Entry, load: Option<&str>, kind: bool, stamp: &Stamp) -> String {
    let (cpu, cores) = machine();
    let level = crate::levels::best_level();
    let mut commit = stamp.commit.clone();
    if stamp.changed {
        commit.push_str(" with uncommitted changes to chapters/");
    }
    let load = load
        .map(|l| format!(", load {l} at the start"))
        .unwrap_or_default();
    let threads = threads_of(&e.args);
    let threads = format!("{threads} thread{}", if threads == 1 { "" } else { "s" });
    let stem = e.name.rsplit_once('.').map_or(e.name.as_str(), |(s, _)| s);
    let kind = if kind { "--kind " } else { "" };
    let line = format!(
        "{HEADER}{cpu}, {level} kernels, {cores} cores, {threads}{load}, {}, commit {commit}: \
         `cargo xtask perf {kind}{stem}`",
        stamp.date
    );
    if e.name.ends_with(".md") {
        format!("*{line}*\n")
    } else {
        line.replace('`', "")
    }
}

/// The threads a measurement runs: its `--threads N`, or the programs' default, one per
/// physical core (chapter 7's `cores::physical_cores`).
fn threads_of(args: &str) -> usize {
    let words: Vec<&str> = args.split_whitespace().collect();
    words
        .windows(2)
        .find(|w| w[0] == "--threads")
        .and_then(|w| w[1].parse().ok())
        .unwrap_or_else(physical_cores)
}

/// Distinct (package, core) pairs among the online CPUs, at most the logical CPUs this
/// process may use: the rule chapter 7's `cores::physical_cores` follows.
fn physical_cores() -> usize {
    let logical = std::thread::available_parallelism().map_or(1, |n| n.get());
    let read = |p: String| std::fs::read_to_string(p).ok();
    let Some(online) = read("/sys/devices/system/cpu/online".into()) else {
        return logical;
    };
    let mut cores = std::collections::BTreeSet::new();
    for part in online.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.parse().unwrap_or(0), b.parse().unwrap_or(0)),
            None => {
                let n: usize = part.parse().unwrap_or(0);
                (n, n)
            }
        };
        for cpu in a..=b.min(a + 65_536) {
            let dir = format!("/sys/devices/system/cpu/cpu{cpu}/topology");
            if let (Some(core), Some(package)) = (
                read(format!("{dir}/core_id")),
                read(format!("{dir}/physical_package_id")),
            ) {
                cores.insert((package.trim().to_string(), core.trim().to_string()));
            }
        }
    }
    if cores.is_empty() {
        logical
    } else {
        cores.len().clamp(1, logical)
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
            } else if let Some(&(_, script)) = SCRIPTS.iter().find(|(d, _)| *d == name)
                && f.path().is_dir()
            {
                check_script_folder(&f.path(), script, problems);
            } else if !all.iter().any(|e| e.name == name) {
                problems.push(format!(
                    "{DIR}/{name}: no chapter's perf.txt makes it; list its command or remove it"
                ));
            }
        }
    }
}

/// For `book`, a note that fails nothing: the tables of each kind kept for a reference run
/// that are not there yet, and how many commits the files of each folder come from (one
/// reference run per kind of machine makes that one).
pub fn note_commits() {
    let Ok(all) = entries() else {
        return;
    };
    let base = root().join(DIR);
    let mut folders = vec![(String::new(), base.clone())];
    folders.extend(KINDS.iter().map(|k| (format!("{k}/"), base.join(k))));
    for (prefix, dir) in folders {
        let level = prefix.trim_end_matches('/');
        let mut commits = std::collections::BTreeSet::new();
        let mut missing = Vec::new();
        let mut no_threads = 0;
        for e in all
            .iter()
            .filter(|e| level.is_empty() || e.kinds.iter().any(|k| k == level))
        {
            match std::fs::read_to_string(dir.join(&e.name)) {
                Ok(text) => {
                    let head = text.lines().next().unwrap_or_default();
                    no_threads += usize::from(!head.contains(" thread"));
                    if let Some(c) = head
                        .split(", commit ")
                        .nth(1)
                        .and_then(|r| r.split([':', ' ']).next())
                    {
                        commits.insert(c.to_string());
                    }
                }
                Err(_) => missing.push(e.name.as_str()),
            }
        }
        if !missing.is_empty() && !level.is_empty() {
            println!(
                "note: {} table(s) kept for {level} machines are not measured yet ({}): \
                 `cargo xtask perf --kind` on such a machine makes them",
                missing.len(),
                missing.join(", ")
            );
        }
        if commits.len() > 1 || no_threads > 0 {
            println!(
                "note: the tables in {DIR}/{prefix} come from {} commit(s), {no_threads} with \
                 no thread count in the header; a reference run (`cargo xtask perf{}` with \
                 nothing named) remakes them at one commit, each naming its threads",
                commits.len(),
                if level.is_empty() { "" } else { " --kind" }
            );
        }
    }
}

/// The folders that scripts fill on machines this one is not, and their scripts:
/// `scripts/cpu-scale.sh` on a machine with more cores (one table per shape: `smollm2.md`,
/// `1b.md`, `7b.md`), `scripts/gpu-race.sh` on a lent GPU (`kernels.md`, `decode.md`).
/// Their files are made by the script, not by `perf`.
const SCRIPTS: [(&str, &str); 2] = [
    ("scale-16", "scripts/cpu-scale.sh"),
    ("gpu", "scripts/gpu-race.sh"),
];

/// A script's folder: each file a Markdown table that begins with the header and is not a
/// dry run's (whose numbers mean nothing).
fn check_script_folder(dir: &std::path::Path, script: &str, problems: &mut Vec<String>) {
    let folder = dir.file_name().unwrap_or_default().to_string_lossy();
    let Ok(files) = std::fs::read_dir(dir) else {
        return problems.push(format!("{DIR}/{folder}: cannot be read"));
    };
    for f in files.filter_map(Result::ok) {
        let name = f.file_name().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(f.path()).unwrap_or_default();
        if !name.ends_with(".md") || !text.trim_start_matches('*').starts_with(HEADER) {
            problems.push(format!(
                "{DIR}/{folder}/{name}: not a table `bash {script}` wrote (a .md file \
                 beginning with its header); remake it with the script or remove it"
            ));
        } else if text.contains("Dry run") {
            problems.push(format!(
                "{DIR}/{folder}/{name}: a dry run's table, whose numbers mean nothing; remove it"
            ));
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
        let Some(entry) = all.iter().find(|e| e.name == name) else {
            problems.push(format!(
                "{DIR}/{level}/{name}: no chapter's perf.txt makes it; list its command or remove it"
            ));
            continue;
        };
        if !entry.kinds.iter().any(|k| k == level) {
            problems.push(format!(
                "{DIR}/{level}/{name}: {} does not keep it for {level} machines; mark it \
                 `{name} [{level}]` there, so that `cargo xtask perf --kind` remakes it",
                entry.source
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_their_kinds() {
        assert_eq!(
            name_and_kinds("ch10-curve-gemma.txt [avx2]"),
            Some(("ch10-curve-gemma.txt".into(), vec!["avx2".into()]))
        );
        assert_eq!(
            name_and_kinds("a.md [avx2, avx512]").map(|(_, k)| k),
            Some(vec!["avx2".to_string(), "avx512".to_string()])
        );
        assert_eq!(name_and_kinds("a.md"), Some(("a.md".into(), vec![])));
        assert_eq!(name_and_kinds("a.md [avx2"), None);
    }

    #[test]
    fn a_kind_draws_its_own_figures() {
        let args = "-p ch10-batching -- curve --svg book/src/images/ch10-decode-curve.svg";
        assert_eq!(
            kind_args(args, Some("avx2")),
            "-p ch10-batching -- curve --svg book/src/images/avx2/ch10-decode-curve.svg"
        );
        assert_eq!(kind_args(args, None), args);
        assert_eq!(threads_of("-p x -- compare --threads 1 --rounds 3"), 1);
        assert!(threads_of("-p x -- compare") >= 1);
    }

    #[test]
    fn a_script_entry_runs_bash_not_cargo() {
        let entry = |args: &str| Entry {
            name: "ch11-soak.txt".into(),
            args: args.into(),
            source: "perf.txt:1".into(),
            kinds: Vec::new(),
        };
        let soak = entry("bash scripts/soak.sh");
        assert_eq!(soak.script(), Some(vec!["scripts/soak.sh".to_string()]));
        assert_eq!(soak.command(&soak.args), "bash scripts/soak.sh");
        let run = entry("-p ch11-server -- loadtest --compare");
        assert_eq!(run.script(), None);
        assert_eq!(
            run.command(&run.args),
            "cargo run --release -q -p ch11-server -- loadtest --compare"
        );
        // only the workspace's own scripts
        assert_eq!(entry("bash /tmp/x.sh").script(), None);
    }

    #[test]
    fn scale_tables_need_the_header_and_no_dry_run() {
        let dir = std::env::temp_dir().join(format!("llm-book-scale-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let head = "*Measured on X (family 6, model 207), avx512 kernels, 16 cores, 2 and 16 \
                    threads, load 0.1 at the start, 2026-11-28, commit abc: `bash scripts/cpu-scale.sh`*\n";
        let cases = [
            ("7b.md", head.to_string(), 0),
            (
                "1b.md",
                format!("{head}\n**Dry run on a shared machine.**\n"),
                1,
            ),
            ("smollm2.md", "| threads |\n".to_string(), 1),
            ("notes.txt", head.to_string(), 1),
        ];
        for (name, text, want) in cases {
            std::fs::write(dir.join(name), text).unwrap();
            let mut problems = Vec::new();
            check_script_folder(&dir, "scripts/cpu-scale.sh", &mut problems);
            std::fs::remove_file(dir.join(name)).unwrap();
            assert_eq!(problems.len(), want, "{name}: {problems:?}");
        }
        std::fs::remove_dir(&dir).unwrap();
    }
}
