//! Prose checks: the book reads as a textbook, not a lab notebook.
//!
//! On the Markdown (`cargo xtask book --check-only`, and so `cargo xtask test`):
//!
//! - **Budgets.** A page's *prose words* are the words outside fenced code blocks and outside
//!   `{{#include}}` directives (tables count). "How fast, and why" may have at most
//!   [`HOW_FAST_BUDGET`], every other page fewer than [`PAGE_LIMIT`].
//! - **No notebook.** No commit hash ([`commit_hashes`]) and none of the [`NOTEBOOK`] phrases
//!   ("this session", "a slow hour", "throwaway" …) in any page or the README: a page says
//!   what is true now, and the history of how it got there belongs in `CHANGELOG.md`.
//! - **Ratios from files.** Every ratio a page writes (`1.82×`, `1.82x`, `1.82 times`; see
//!   [`ratios`]) must stand, as a ratio, in a measured file that page includes
//!   (`book/src/measured/…`), and every ratio the README writes in one that some page
//!   includes, so that `cargo xtask perf` remakes the number a sentence quotes (a ratio that
//!   a reference run changed is not kept alive by the same figure in another page's file).
//! - **Speeds from files.** Every speed or time a page's prose writes, a number with one of
//!   the [`SPEED_UNITS`] (`51.5 GB/s`, `470 tok/s`, `15.6 ms`; see [`speeds`]), must stand,
//!   with its unit, in a measured file that page includes, as ratios must: a figure is a fact
//!   about one machine on one day, and `cargo xtask perf` remakes the file, not the sentence.
//!   Code (fenced blocks and inline code spans) is not prose.
//! - **Fences hold their output.** A fenced block that includes a file of program output
//!   (`output/…`, `measured/…`) opens with a fence longer than any run of backticks (or
//!   tildes) in that file, or the file's own fence would close the block early.
//!
//! On the HTML (`cargo xtask book`, after `mdbook build`): no fence shown as text outside a
//! code block, and each included output whole inside one code block.

use std::collections::{BTreeSet, HashSet};
use std::ops::Range;
use std::path::{Path, PathBuf};

/// The most prose words "How fast, and why" may have.
pub const HOW_FAST_BUDGET: usize = 4000;
/// Every other page has fewer prose words than this.
pub const PAGE_LIMIT: usize = 6000;
/// The most Rust listings "How fast, and why" may show: it measures the kernels, and their
/// chapters teach them.
pub const HOW_FAST_LISTINGS: usize = 6;
/// The fewest exercises chapters 7 and 8 together should have, one at least for each
/// kernel they teach.
pub const MIN_EXERCISES_CH07_CH08: usize = 15;
/// Whether too few exercises in chapters 7 and 8 fails the book check (it does: every kernel
/// section of those chapters has its exercise) or only says so.
pub const ENFORCE_EXERCISES_CH07_CH08: bool = true;

/// Phrases of a lab notebook, matched case-insensitively on whole words, across line breaks.
/// A one-word entry also matches inside a longer word ("throwaways").
pub const NOTEBOOK: &[&str] = &[
    "this session",
    "same session",
    "earlier session",
    "that session",
    "last session",
    "throwaway",
    "throw-away",
    "other jobs",
    "other job",
    "another job",
    "fastest hour",
    "fast hour",
    "faster hour",
    "slow hour",
    "slower hour",
    "slowest hour",
    "quiet hour",
    "quieter hour",
    "quietest hour",
    "noisy hour",
    "noisier hour",
    "busy hour",
    "busiest hour",
    "same hour",
    "that hour",
    "an hour later",
    "an hour earlier",
    "an hour apart",
    "hours apart",
    "an hour before",
    "an hour after",
];

/// English words spelt with the letters a to f alone, seven or more of them: not hashes.
const HEX_WORDS: &[&str] = &["acceded", "defaced", "effaced", "fabaceae"];

/// What a page's budget is: `(limit, inclusive)`, for messages and the check.
pub fn budget(page: &str) -> (usize, bool) {
    match Path::new(page).file_name().and_then(|n| n.to_str()) {
        Some("how-fast.md") => (HOW_FAST_BUDGET, true),
        _ => (PAGE_LIMIT, false),
    }
}

/// One line of a page, as the checks see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// 1-based.
    pub number: usize,
    /// The line with every `{{#…}}` directive taken out.
    pub text: String,
    /// Inside a fenced code block, or a fence itself.
    pub code: bool,
}

/// A fenced block's opening: its character (`` ` `` or `~`) and length, if `line` is one.
fn fence_of(line: &str) -> Option<(char, usize)> {
    let t = line.trim_start();
    let c = t.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let n = t.chars().take_while(|x| *x == c).count();
    // a backtick fence's info string may not hold a backtick (then it is inline code)
    (n >= 3 && !(c == '`' && t[n..].contains('`'))).then_some((c, n))
}

/// Whether `line` closes a block opened by `open`: the same character, at least as many,
/// nothing after but spaces.
fn closes(line: &str, open: (char, usize)) -> bool {
    let t = line.trim();
    let n = t.chars().take_while(|x| *x == open.0).count();
    n >= open.1 && t.chars().all(|x| x == open.0)
}

/// The page's lines, each marked code or not, directives removed.
pub fn lines(text: &str) -> Vec<Line> {
    let mut out = Vec::new();
    let mut open: Option<(char, usize)> = None;
    for (i, raw) in text.lines().enumerate() {
        let code = match open {
            Some(f) => {
                if closes(raw, f) {
                    open = None;
                }
                true
            }
            None => {
                open = fence_of(raw);
                open.is_some()
            }
        };
        out.push(Line {
            number: i + 1,
            text: without_directives(raw),
            code,
        });
    }
    out
}

/// `line` with `{{#include …}}` and every other `{{#…}}` directive taken out (an escaped
/// `\{{#…}}` is text, and stays).
fn without_directives(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find("{{#") {
        let Some(len) = rest[start..].find("}}") else {
            break;
        };
        if rest[..start].ends_with('\\') {
            out.push_str(&rest[..start + len + 2]);
        } else {
            out.push_str(&rest[..start]);
        }
        rest = &rest[start + len + 2..];
    }
    out.push_str(rest);
    out
}

/// Words of one line: runs between spaces that hold a letter or a digit (so a table's
/// `|---:|` and a lone `-` are not words).
fn words_in(line: &str) -> usize {
    line.split_whitespace()
        .filter(|w| w.chars().any(char::is_alphanumeric))
        .count()
}

/// A page's prose words: outside fenced code blocks and `{{#include}}` directives.
pub fn prose_words(text: &str) -> usize {
    lines(text)
        .iter()
        .filter(|l| !l.code)
        .map(|l| words_in(&l.text))
        .sum()
}

/// The commit hashes written in `line`: a run of 7 to 40 lowercase hex digits standing alone
/// (as a word, or in backticks), holding a digit and a letter, or letters alone when they
/// spell no English word. `1e3e08d`, `ceadefb` and `f8481f1` are hashes; `deadline`, `decade`
/// (too short), `2048000` (digits alone) and `sha256:b179c9523d0e` (a digit's name says what
/// it is) are not.
pub fn commit_hashes(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let bytes = line.as_bytes();
    let word_byte = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while i < bytes.len() {
        if !word_byte(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && word_byte(bytes[i]) {
            i += 1;
        }
        let word = &line[start..i];
        let hex = word.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        let digit = word.bytes().any(|b| b.is_ascii_digit());
        let letter = word.bytes().any(|b| b.is_ascii_lowercase());
        let digest = line[..start].to_ascii_lowercase().ends_with("sha256:");
        if (7..=40).contains(&word.len())
            && hex
            && letter
            && (digit || !HEX_WORDS.contains(&word))
            && !digest
        {
            out.push(word);
        }
    }
    out
}

/// Lowercase words of a line for phrase matching, split at anything but letters, digits,
/// hyphens and apostrophes, a possessive `'s` dropped.
fn phrase_words(line: &str) -> Vec<String> {
    line.split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '\'' || c == '’'))
        .map(|w| {
            let w = w.trim_matches(|c| c == '-' || c == '\'' || c == '’');
            let w = w
                .strip_suffix("'s")
                .or_else(|| w.strip_suffix("’s"))
                .unwrap_or(w);
            w.to_lowercase()
        })
        .filter(|w| !w.is_empty())
        .collect()
}

/// Every notebook phrase in `lines`, with the line it starts on: `(line, phrase)`.
pub fn notebook_phrases(lines: &[Line]) -> Vec<(usize, &'static str)> {
    let words: Vec<(usize, String)> = lines
        .iter()
        .flat_map(|l| {
            phrase_words(&l.text)
                .into_iter()
                .map(move |w| (l.number, w))
        })
        .collect();
    let mut out = Vec::new();
    for (i, (number, word)) in words.iter().enumerate() {
        for phrase in NOTEBOOK {
            let parts: Vec<&str> = phrase.split(' ').collect();
            let hit = if parts.len() == 1 {
                word.contains(parts[0])
            } else {
                parts.len() <= words.len() - i
                    && parts.iter().zip(&words[i..]).all(|(p, (_, w))| p == w)
            };
            if hit {
                out.push((*number, *phrase));
            }
        }
    }
    out
}

/// The ratios written in `line`, as their numbers: `N.NN×`, `N.NNx` (the `x` not starting a
/// word) and `N.NN times`, a number with exactly two decimals not inside a longer one.
/// `"2.11× and 1.79 times, 1.10x ours"` gives `["2.11", "1.79", "1.10"]`.
pub fn ratios(line: &str) -> Vec<String> {
    let chars: Vec<char> = line.chars().collect();
    // a unit word (`x`, ` times`) right after the number, not the start of a longer word
    let followed_by = |after: &str, word: &str| {
        after
            .strip_prefix(word)
            .is_some_and(|rest| !rest.chars().next().is_some_and(char::is_alphanumeric))
    };
    number_spans(&chars)
        .into_iter()
        .filter(|span| {
            let number = &chars[span.clone()];
            let dots = number.iter().filter(|&&c| c == '.').count();
            let two_decimals = dots == 1 && number.len() >= 4 && number[number.len() - 3] == '.';
            let after: String = chars[span.end..].iter().take(7).collect();
            two_decimals
                && (after.starts_with('×')
                    || followed_by(&after, "x")
                    || followed_by(&after, " times"))
        })
        .map(|span| chars[span].iter().collect())
        .collect()
}

/// The units whose numbers are speeds or times of this machine, as prose writes them.
/// Longer spellings come first, so `tokens/s` is not read as `s`.
pub const SPEED_UNITS: &[&str] = &[
    "tokens/s", "tok/s", "GFLOP/s", "GMAC/s", "GB/s", "MB/s", "ms", "µs", "ns",
];

/// The speeds and times written in `line` outside inline code, as `number unit` with one
/// space: `"at 51.5 GB/s, 470 tok/s and 0.05 ms"` gives `["51.5 GB/s", "470 tok/s",
/// "0.05 ms"]`. A number is digits with an optional decimal part (and a thin or plain space
/// between thousands, `1 678.6`, read as `1678.6`), not part of a longer word; the unit
/// follows after at most one space and is not the start of a longer word. A range's first
/// number (`57–74 GB/s`) takes the unit too.
pub fn speeds(line: &str) -> Vec<String> {
    // inline code is not prose
    let mut prose = String::new();
    for (i, piece) in line.split('`').enumerate() {
        prose.push_str(if i % 2 == 0 { piece } else { " " });
    }
    let chars: Vec<char> = prose.chars().collect();
    let mut out = Vec::new();
    let mut pending: Vec<String> = Vec::new(); // a range's numbers waiting for their unit
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_digit() || (i > 0 && is_number_part(chars[i - 1])) {
            i += 1;
            continue;
        }
        let mut number = String::new();
        while i < chars.len() {
            let c = chars[i];
            let grouped = matches!(c, ' ' | '\u{2009}' | '\u{202f}')
                && number.len() <= 3
                && !number.contains('.')
                && chars
                    .get(i + 1..i + 4)
                    .is_some_and(|d| d.iter().all(char::is_ascii_digit))
                && !chars.get(i + 4).is_some_and(|c| c.is_ascii_digit());
            if c.is_ascii_digit()
                || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit))
            {
                number.push(c);
            } else if !grouped {
                break;
            }
            i += 1;
        }
        let rest: String = chars[i..].iter().take(12).collect();
        let after_space = rest.strip_prefix(' ').unwrap_or(&rest);
        if let Some(unit) = SPEED_UNITS.iter().find(|u| {
            after_space.starts_with(**u)
                && !after_space[u.len()..]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_alphanumeric() || c == '/')
        }) {
            for n in pending.drain(..) {
                out.push(format!("{n} {unit}"));
            }
            out.push(format!("{number} {unit}"));
        } else if rest.starts_with(['–', '-']) || rest.starts_with(" to ") {
            pending.push(number);
            continue;
        } else {
            pending.clear();
        }
    }
    out
}

/// What the measured files `page` includes can vouch for: each `number unit` that one file
/// holds both halves of (the number anywhere in it, the unit anywhere in it: a table names
/// its unit once, in a header or a label, and a line like `GB/s: step 45.3, LM head 40.4`
/// lists several numbers after one unit).
fn measured_speeds(page: &Page) -> HashSet<String> {
    let mut held = HashSet::new();
    for text in measured_files(page) {
        let units: Vec<&str> = SPEED_UNITS
            .iter()
            .copied()
            .filter(|u| has_word(&text, u))
            .collect();
        for number in numbers(&text) {
            for unit in &units {
                held.insert(format!("{number} {unit}"));
            }
        }
    }
    held
}

/// Whether `word` stands in `text` as a word of its own (not inside `items` for `ms`).
fn has_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
    })
}

/// Every number in `text` (digits with an optional decimal part, not inside a word).
fn numbers(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    number_spans(&chars)
        .into_iter()
        .map(|span| chars[span].iter().collect())
        .collect()
}

/// Where each number of `chars` stands: digits, with `.` between digits (so `0.3.36` is one
/// number), not starting inside a word or another number. The one scanner behind
/// [`numbers`] and [`ratios`].
fn number_spans(chars: &[char]) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_digit() || (i > 0 && is_number_part(chars[i - 1])) {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len()
            && (chars[i].is_ascii_digit()
                || (chars[i] == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)))
        {
            i += 1;
        }
        out.push(start..i);
    }
    out
}

fn is_number_part(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '.' || c == '_'
}

/// The longest run of `c` in `text`.
fn longest_run(text: &str, c: char) -> usize {
    let mut best = 0;
    let mut run = 0;
    for x in text.chars() {
        run = if x == c { run + 1 } else { 0 };
        best = best.max(run);
    }
    best
}

/// The file and anchor of each `{{#include …}}` on a line.
fn includes(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(start) = rest.find("{{#include ") {
        let Some(len) = rest[start..].find("}}") else {
            break;
        };
        if !rest[..start].ends_with('\\') {
            let target = rest[start + "{{#include ".len()..start + len].trim();
            out.push(target.split(':').next().unwrap_or(target));
        }
        rest = &rest[start + len + 2..];
    }
    out
}

/// Whether `file` (as written in an include) is program output: under `output/` or
/// `measured/`.
fn is_output(file: &str) -> bool {
    file.starts_with("output/") || file.starts_with("measured/")
}

/// The text of each measured file `page` includes.
fn measured_files(page: &Page) -> Vec<String> {
    let dir = page.path.parent().unwrap_or(Path::new("."));
    let files: BTreeSet<&str> = page
        .text
        .lines()
        .flat_map(includes)
        .filter(|f| f.starts_with("measured/"))
        .collect();
    files
        .into_iter()
        .map(|f| std::fs::read_to_string(dir.join(f)).unwrap_or_default())
        .collect()
}

/// The ratios in the measured files `page` includes.
fn measured_ratios(page: &Page) -> HashSet<String> {
    measured_files(page)
        .into_iter()
        .flat_map(|text| text.lines().flat_map(ratios).collect::<Vec<_>>())
        .collect()
}

/// A page of the book (or the README), read.
pub struct Page {
    /// As messages name it: `book/src/how-fast.md`.
    pub name: String,
    pub path: PathBuf,
    pub text: String,
}

/// The prose checks over `pages` (the book's pages, not its measured files) and the
/// README; each problem names the page, the line and what is wrong.
pub fn check(pages: &[Page], readme: Option<&Page>, problems: &mut Vec<String>) {
    // the ratios in the measured files each page includes; the README's may come from any
    let held_by: Vec<HashSet<String>> = pages.iter().map(measured_ratios).collect();
    let everywhere: HashSet<String> = held_by.iter().flatten().cloned().collect();
    let speeds_by: Vec<HashSet<String>> = pages.iter().map(measured_speeds).collect();
    let all_speeds: HashSet<String> = speeds_by.iter().flatten().cloned().collect();
    for (i, page) in pages.iter().chain(readme).enumerate() {
        let is_readme = readme.is_some_and(|r| std::ptr::eq(r, page));
        let held = if is_readme { &everywhere } else { &held_by[i] };
        let held_speeds = if is_readme {
            &all_speeds
        } else {
            &speeds_by[i]
        };
        let lines = lines(&page.text);
        if !is_readme {
            let words = prose_words(&page.text);
            let (limit, inclusive) = budget(&page.name);
            if words > limit || (!inclusive && words == limit) {
                problems.push(format!(
                    "{}: {words} prose words, over its budget ({} {limit}); cut it, or move a \
                     history to CHANGELOG.md",
                    page.name,
                    if inclusive { "at most" } else { "fewer than" }
                ));
            }
        }
        let listings = rust_listings(&page.text);
        if budget(&page.name) == (HOW_FAST_BUDGET, true) && listings > HOW_FAST_LISTINGS {
            problems.push(format!(
                "{}: {listings} Rust listings, more than {HOW_FAST_LISTINGS}; a kernel is taught \
                 in its chapter, and this page measures it",
                page.name
            ));
        }
        for line in lines.iter().filter(|l| !l.code) {
            for speed in speeds(&line.text) {
                if !held_speeds.contains(&speed) {
                    problems.push(format!(
                        "{}:{}: {speed} is in no measured file {} includes; quote a file \
                         `cargo xtask perf` writes, or say it without the number",
                        page.name,
                        line.number,
                        if is_readme { "the book" } else { "the page" }
                    ));
                }
            }
        }
        for line in &lines {
            for hash in commit_hashes(&line.text) {
                problems.push(format!(
                    "{}:{}: commit hash {hash} in the text; say what is true now (the history \
                     goes in CHANGELOG.md)",
                    page.name, line.number
                ));
            }
            for ratio in ratios(&line.text) {
                if !held.contains(&ratio) {
                    problems.push(format!(
                        "{}:{}: {ratio}× is in no measured file {} includes",
                        page.name,
                        line.number,
                        if is_readme { "the book" } else { "the page" }
                    ));
                }
            }
        }
        for (number, phrase) in notebook_phrases(&lines) {
            problems.push(format!(
                "{}:{number}: {phrase:?} is a lab notebook's phrase; say what is true now",
                page.name
            ));
        }
        if !is_readme {
            fence_lengths(page, problems);
        }
    }
}

/// Fenced blocks whose info string starts with `rust`: the page's listings.
pub fn rust_listings(text: &str) -> usize {
    let mut open: Option<(char, usize)> = None;
    let mut count = 0;
    for line in text.lines() {
        match open {
            Some(f) if closes(line, f) => open = None,
            Some(_) => {}
            None => {
                open = fence_of(line);
                let info = line
                    .trim_start()
                    .trim_start_matches(['`', '~'])
                    .trim_start();
                if open.is_some() && info.starts_with("rust") {
                    count += 1;
                }
            }
        }
    }
    count
}

/// The distinct exercises (`exN_…` tests) of the chapters whose package starts with one of
/// `prefixes`, from each chapter's `tests/exercises.rs`.
pub fn exercises_of(chapters: &[crate::exercises::Chapter], prefixes: &[&str]) -> usize {
    let mut count = 0;
    for c in chapters
        .iter()
        .filter(|c| prefixes.iter().any(|p| c.package.starts_with(p)))
    {
        let text = std::fs::read_to_string(c.dir.join("tests/exercises.rs")).unwrap_or_default();
        let numbers: BTreeSet<&str> = text
            .split("fn ex")
            .skip(1)
            .filter_map(|rest| rest.split('_').next())
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .collect();
        count += numbers.len();
    }
    count
}

/// Chapters 7 and 8 have at least [`MIN_EXERCISES_CH07_CH08`] exercises: a problem when
/// [`ENFORCE_EXERCISES_CH07_CH08`], a note until then.
pub fn exercise_floor(problems: &mut Vec<String>) {
    let n = exercises_of(&crate::exercises::chapters(), &["ch07-", "ch08-"]);
    if n >= MIN_EXERCISES_CH07_CH08 {
        return;
    }
    let message = format!(
        "chapters 7 and 8 have {n} exercises; they should have at least \
         {MIN_EXERCISES_CH07_CH08}, one for each kernel they teach"
    );
    if ENFORCE_EXERCISES_CH07_CH08 {
        problems.push(message);
    } else {
        println!("note: {message}");
    }
}

/// Every include of program output inside a fenced block: the fence must be longer than any
/// run of its character in the file.
fn fence_lengths(page: &Page, problems: &mut Vec<String>) {
    let dir = page.path.parent().unwrap_or(Path::new("."));
    let mut open: Option<(char, usize)> = None;
    for (i, line) in page.text.lines().enumerate() {
        match open {
            Some(f) if closes(line, f) => open = None,
            Some((c, n)) => {
                for file in includes(line).into_iter().filter(|f| is_output(f)) {
                    let text = std::fs::read_to_string(dir.join(file)).unwrap_or_default();
                    let run = longest_run(&text, c);
                    if run >= n {
                        problems.push(format!(
                            "{}:{}: {file} holds a run of {run} {c:?}, so the fence of {n} \
                             around it closes early; open the block with {} of them",
                            page.name,
                            i + 1,
                            run + 1
                        ));
                    }
                }
            }
            None => open = fence_of(line),
        }
    }
}

/// Each page's prose words, for the table `book --words` prints.
pub fn word_counts(pages: &[Page]) -> Vec<(String, usize)> {
    pages
        .iter()
        .map(|p| (p.name.clone(), prose_words(&p.text)))
        .collect()
}

/// Text of the HTML between `<main>` and `</main>` (the page's own content).
fn main_of(html: &str) -> &str {
    let start = html.find("<main>").map_or(0, |i| i + "<main>".len());
    let end = html[start..]
        .find("</main>")
        .map_or(html.len(), |i| start + i);
    &html[start..end]
}

/// `html`'s code elements' text (entities decoded), and its text outside them.
fn split_code(html: &str) -> (Vec<String>, String) {
    let mut code = Vec::new();
    let mut outside = String::new();
    let mut rest = html;
    loop {
        let pre = rest.find("<pre");
        let inline = rest.find("<code");
        let Some(start) = [pre, inline].into_iter().flatten().min() else {
            outside.push_str(rest);
            break;
        };
        outside.push_str(&rest[..start]);
        let close = if Some(start) == pre {
            "</pre>"
        } else {
            "</code>"
        };
        let end = rest[start..]
            .find(close)
            .map_or(rest.len(), |i| start + i + close.len());
        let element = &rest[start..end];
        // the text of a <pre><code …>…</code></pre>: after the first tag that opens <code
        let body = element
            .find("<code")
            .and_then(|i| element[i..].find('>').map(|j| i + j + 1))
            .map_or("", |b| &element[b..]);
        let body = body.split("</code>").next().unwrap_or(body);
        code.push(unescape(&strip_tags(body)));
        rest = &rest[end..];
    }
    (code, unescape(&strip_tags(&outside)))
}

fn strip_tags(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&#x27;", "'")
        .replace("&amp;", "&")
}

/// After `mdbook build`: in each page's HTML (`html_dir/<page>.html`), no fence shown as
/// text, and each output a fenced block includes whole inside one code block.
pub fn check_html(pages: &[Page], src: &Path, html_dir: &Path, problems: &mut Vec<String>) {
    for page in pages {
        let Ok(rel) = page.path.strip_prefix(src) else {
            continue;
        };
        if rel.file_name().is_some_and(|n| n == "SUMMARY.md") {
            continue;
        }
        let html_path = html_dir.join(rel).with_extension("html");
        let Ok(html) = std::fs::read_to_string(&html_path) else {
            problems.push(format!(
                "{}: no {} after the build",
                page.name,
                html_path.display()
            ));
            continue;
        };
        let (code, outside) = split_code(main_of(&html));
        for text_line in outside.lines().filter(|l| l.contains("```")) {
            problems.push(format!(
                "{}: the built page shows a code fence as text: {:?}; an included file's fence \
                 closed a block early",
                page.name,
                text_line.trim()
            ));
        }
        let dir = page.path.parent().unwrap_or(Path::new("."));
        let mut open: Option<(char, usize)> = None;
        for (i, line) in page.text.lines().enumerate() {
            match open {
                Some(f) if closes(line, f) => open = None,
                Some(_) => {
                    for file in includes(line).into_iter().filter(|f| is_output(f)) {
                        let text = std::fs::read_to_string(dir.join(file)).unwrap_or_default();
                        let text = text.trim();
                        if !code.iter().any(|c| c.contains(text)) {
                            problems.push(format!(
                                "{}:{}: the built page does not show {file} whole in one code \
                                 block; part of it is set as text",
                                page.name,
                                i + 1
                            ));
                        }
                    }
                }
                None => open = fence_of(line),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_found_and_words_are_not() {
        assert_eq!(
            commit_hashes("at commit 1e3e08d, the `f8481f1` run and ceadefb's"),
            ["1e3e08d", "f8481f1", "ceadefb"]
        );
        assert_eq!(
            commit_hashes("7c96552: the head; (0d89e7c)"),
            ["7c96552", "0d89e7c"]
        );
        let forty = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(commit_hashes(forty), [forty]);
        for text in [
            "a decade of deadlines, effaced and defaced, acceded",
            "2048000 bytes, 1 048 576 and 0x1e3e08d",
            "f16, bf16, e5m2, ab12c and the Q4_K_M file",
            "`sha256:b179c9523d0e` pins the file",
            "a sha256 of 64: b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            "ABCDEF12 is upper case; 1e3e08dx is not hex",
            "gemma-3-270m-q4_k_m.gguf and SmolLM2-135M",
        ] {
            assert_eq!(commit_hashes(text), Vec::<&str>::new(), "{text}");
        }
    }

    #[test]
    fn words_are_counted_outside_code_and_includes() {
        let page = "# A title\n\nOne two three.\n\n```rust\nlet a = 1; // four five\n```\n\n\
                    {{#include measured/x.md}}\n\n| a | b |\n|---|---:|\n| 1 | two |\n\n\
                    ````text\n```\nstill code\n````\nlast - word\n";
        // A title (2) + One two three (3) + a b (2) + 1 two (2) + last word (2)
        assert_eq!(prose_words(page), 11);
        let marked = lines("x\n~~~\n```\n~~~\ny");
        let code: Vec<bool> = marked.iter().map(|l| l.code).collect();
        assert_eq!(code, [false, true, true, true, false]);
        assert_eq!(
            lines("see {{#include a.md}} here")[0].text,
            "see  here",
            "a directive is not prose"
        );
    }

    #[test]
    fn speeds_are_read_with_their_units() {
        assert_eq!(
            speeds("at 51.5 GB/s, 470 tok/s and 0.05 ms; 1 678.6 tokens/s"),
            ["51.5 GB/s", "470 tok/s", "0.05 ms", "1678.6 tokens/s"]
        );
        assert_eq!(speeds("57–74 GB/s"), ["57 GB/s", "74 GB/s"]);
        assert_eq!(speeds("from 3 to 5 µs"), ["3 µs", "5 µs"]);
        for text in [
            "`470 tok/s` in code",
            "30 layers",
            "8 msgs",
            "12 ms/token",
            "ch09 2 GB",
        ] {
            assert_eq!(speeds(text), Vec::<String>::new(), "{text}");
        }
    }

    #[test]
    fn ratios_are_read_as_their_numbers() {
        assert_eq!(
            ratios("2.11× and 1.79 times, 1.10x ours/theirs, (0.47x pp512)"),
            ["2.11", "1.79", "1.10", "0.47"]
        );
        for text in [
            "1.5× one decimal",
            "1.234× three",
            "version 0.3.36x",
            "a 2.11 GB file, 1.10xyz",
            "1.82 on the Zen 3",
            "v1.10x",
            "12.34timesheet",
        ] {
            assert_eq!(ratios(text), Vec::<String>::new(), "{text}");
        }
        assert_eq!(ratios("ratio 12.34×"), ["12.34"]);
        // the same scanner finds every number, ratio or not
        assert_eq!(
            numbers("version 0.3.36, 2.11×, v1.10x and 7"),
            ["0.3.36", "2.11", "7"]
        );
    }

    #[test]
    fn notebook_phrases_are_found_across_lines() {
        let found = notebook_phrases(&lines(
            "It came in a slow\nhour. A Throwaway program; the fastest hour this host gave.\n\
             In this session, other jobs ran.\nAn hour\nlater: a session, an hour, a job.",
        ));
        let phrases: Vec<(usize, &str)> = found;
        assert_eq!(
            phrases,
            [
                (1, "slow hour"),
                (2, "throwaway"),
                (2, "fastest hour"),
                (3, "this session"),
                (3, "other jobs"),
                (4, "an hour later"),
            ]
        );
        assert!(notebook_phrases(&lines("Sessions keep their cache for an hour.")).is_empty());
    }

    #[test]
    fn fences_and_runs() {
        assert_eq!(fence_of("```text"), Some(('`', 3)));
        assert_eq!(fence_of("  ````"), Some(('`', 4)));
        assert_eq!(fence_of("``` `a` ```"), None, "inline code, not a fence");
        assert!(closes("````", ('`', 3)));
        assert!(!closes("```text", ('`', 3)));
        assert!(!closes("```", ('`', 4)));
        assert_eq!(longest_run("a ``` b `````", '`'), 5);
        assert_eq!(
            includes("{{#include output/a.txt}} and {{#include ../x.rs:anchor}}"),
            ["output/a.txt", "../x.rs"]
        );
    }

    #[test]
    fn html_code_and_text_are_told_apart() {
        let html = "<p>Run <code>a</code>:</p><pre><code class=\"language-text\">1 &lt; 2\n```\n\
                    </code></pre><p>then ```text</p>";
        let (code, outside) = split_code(html);
        assert_eq!(code, ["a", "1 < 2\n```\n"]);
        assert!(outside.contains("then ```text"));
        assert!(!outside.contains("1 < 2"));
    }

    #[test]
    fn listings_and_exercises_are_counted() {
        let page = "```rust,ignore\n{{#include a.rs:x}}\n```\n\n```console\n$ x\n```\n\
                    ````rust\n```\n````\n";
        assert_eq!(rust_listings(page), 2);
        let chapters = crate::exercises::chapters();
        assert!(
            exercises_of(&chapters, &["ch07-"]) >= 6,
            "chapter 7 ships six exercises, each tested once for the stub and once solved"
        );
    }

    #[test]
    fn budgets_by_page() {
        assert_eq!(budget("book/src/how-fast.md"), (HOW_FAST_BUDGET, true));
        assert_eq!(
            budget("book/src/ch07-simd-parallel.md"),
            (PAGE_LIMIT, false)
        );
    }

    #[test]
    fn a_page_quotes_ratios_from_its_own_measured_files() {
        let dir = std::env::temp_dir().join(format!("xtask-ratios-{}", std::process::id()));
        let src = dir.join("src");
        std::fs::create_dir_all(src.join("measured")).unwrap();
        std::fs::write(src.join("measured/a.md"), "| pp512 | 1.50× |\n").unwrap();
        std::fs::write(src.join("measured/b.md"), "| tg128 | 2.25× |\n").unwrap();
        let page = |name: &str, text: &str| Page {
            name: format!("book/src/{name}"),
            path: src.join(name),
            text: text.into(),
        };
        let pages = [
            page(
                "a.md",
                "{{#include measured/a.md}}\n\nPrefill 1.50×, decode 2.25×.\n",
            ),
            page("b.md", "{{#include measured/b.md}}\n\nDecode 2.25×.\n"),
        ];
        let readme = Page {
            name: "README.md".into(),
            path: dir.join("README.md"),
            text: "Prefill 1.50×, decode 2.25×.\n".into(),
        };
        let mut problems = Vec::new();
        check(&pages, Some(&readme), &mut problems);
        // b.md's figure, quoted on a.md, which does not include b.md; the README may quote both
        assert_eq!(
            problems,
            ["book/src/a.md:3: 2.25× is in no measured file the page includes"],
        );
        let _ = std::fs::remove_dir_all(&dir); // ours, made above
    }

    #[test]
    fn the_built_page_must_show_an_output_whole() {
        let dir = std::env::temp_dir().join(format!("xtask-prose-{}", std::process::id()));
        let (src, html) = (dir.join("src"), dir.join("book"));
        std::fs::create_dir_all(src.join("output")).unwrap();
        std::fs::create_dir_all(&html).unwrap();
        std::fs::write(src.join("output/run.txt"), "a\n```\nb\n").unwrap();
        let text = "# Page\n```text\n{{#include output/run.txt}}\n```\n";
        let page = Page {
            name: "book/src/page.md".into(),
            path: src.join("page.md"),
            text: text.into(),
        };
        // the source check: three backticks in the file, so the fence needs four
        let mut problems = Vec::new();
        fence_lengths(&page, &mut problems);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].starts_with("book/src/page.md:3: output/run.txt"));
        // what mdBook makes of it: the file's fence closes the block, the rest is a paragraph
        let broken = "<main><h1>Page</h1><pre><code class=\"language-text\">a\n</code></pre>\n\
                      <p>b</p>\n<pre><code>\n</code></pre></main>";
        std::fs::write(html.join("page.html"), broken).unwrap();
        let mut problems = Vec::new();
        check_html(std::slice::from_ref(&page), &src, &html, &mut problems);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("page.md:3: the built page does not show output/run.txt"));
        // a fence shown as text outside any code block
        let text_fence = "<main><pre><code>a\n```\nb\n</code></pre><p>then ```text</p></main>";
        std::fs::write(html.join("page.html"), text_fence).unwrap();
        let mut problems = Vec::new();
        check_html(std::slice::from_ref(&page), &src, &html, &mut problems);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("shows a code fence as text"));
        // a fence long enough: the whole file in one block, nothing as text
        let good = "<main><pre><code class=\"language-text\">a\n```\nb\n</code></pre></main>";
        std::fs::write(html.join("page.html"), good).unwrap();
        let mut problems = Vec::new();
        check_html(std::slice::from_ref(&page), &src, &html, &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        let _ = std::fs::remove_dir_all(&dir); // ours, made above
    }
}
