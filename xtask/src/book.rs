//! Book checks: every include resolves to a file and an anchor, every relative link and
//! image points at a file, Rust code appears only through includes, no listing is longer
//! than a reader can hold in view; the prose checks of [`crate::prose`]; no two source files
//! using each other ([`crate::imports`]); then `mdbook build`,
//! and the built pages checked for fences shown as text.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{prose, root, run_visible};

/// The mdBook version CI installs (`cargo install mdbook --version … --locked`).
pub const MDBOOK_VERSION: &str = "0.5.4";

/// The most lines one listing (one Rust block, all its includes together) may show. A longer
/// one is split at anchors, each part introduced by its own sentence.
pub const MAX_LISTING_LINES: usize = 60;

pub fn run(build: bool) -> Result<(), String> {
    let src = root().join("book/src");
    let mut pages = Vec::new();
    collect_markdown(&src, &mut pages);
    pages.sort();
    let mut problems = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page)
            .map_err(|e| format!("cannot read {}: {e}", page.display()))?;
        check_page(page, &text, &mut problems);
    }
    crate::perf::check(&mut problems);
    crate::imports::check(&mut problems);
    let prose_pages = prose_pages()?;
    let readme = read_page(&root().join("README.md"))?;
    prose::check(&prose_pages, Some(&readme), &mut problems);
    prose::exercise_floor(&mut problems);
    fail_on(&problems)?;
    println!(
        "{} pages: includes, anchors and links resolve; prose within its budgets, no notebook, \
         every ratio from a measured file; no two source files use each other",
        pages.len()
    );
    crate::perf::note_commits();
    if build {
        let mut cmd = Command::new("mdbook");
        cmd.arg("build").arg(root().join("book"));
        run_visible(&mut cmd, "mdbook build book")?;
        prose::check_html(&prose_pages, &src, &root().join("book/book"), &mut problems);
        fail_on(&problems)?;
        println!("the built pages show every included output whole, and no fence as text");
    }
    Ok(())
}

/// `book --words`: each page's prose words against its budget.
pub fn words() -> Result<(), String> {
    let pages = prose_pages()?;
    for (name, words) in prose::word_counts(&pages) {
        let (limit, inclusive) = prose::budget(&name);
        let over = words > limit || (!inclusive && words == limit);
        println!(
            "{words:6}  {name}{}",
            if over { "  (over its budget)" } else { "" }
        );
    }
    Ok(())
}

fn fail_on(problems: &[String]) -> Result<(), String> {
    if problems.is_empty() {
        return Ok(());
    }
    Err(format!(
        "the book has {} problem(s):\n  {}",
        problems.len(),
        problems.join("\n  ")
    ))
}

/// The book's pages for the prose checks: its Markdown, less the measured tables (data,
/// whose headers name their commit).
fn prose_pages() -> Result<Vec<prose::Page>, String> {
    let src = root().join("book/src");
    let mut paths = Vec::new();
    collect_markdown(&src, &mut paths);
    paths.retain(|p| !p.starts_with(src.join(crate::perf::DIR.trim_start_matches("book/src/"))));
    paths.sort();
    paths.iter().map(|p| read_page(p)).collect()
}

fn read_page(path: &Path) -> Result<prose::Page, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(prose::Page {
        name: path
            .strip_prefix(root())
            .unwrap_or(path)
            .display()
            .to_string(),
        path: path.to_path_buf(),
        text,
    })
}

fn collect_markdown(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            collect_markdown(&path, out);
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
}

fn check_page(page: &Path, text: &str, problems: &mut Vec<String>) {
    let dir = page.parent().unwrap_or(Path::new("."));
    let name = page
        .strip_prefix(root())
        .unwrap_or(page)
        .display()
        .to_string();
    // {{#include path}} and {{#include path:anchor}}
    for (lineno, line) in text.lines().enumerate() {
        let at = format!("{name}:{}", lineno + 1);
        let mut rest = line;
        while let Some(start) = rest.find("{{#") {
            let Some(end) = rest[start..].find("}}") else {
                break;
            };
            let directive = &rest[start + 3..start + end];
            let escaped = rest[..start].ends_with('\\');
            rest = &rest[start + end + 2..];
            if escaped {
                continue; // `\{{#include …}}` is mdBook's way to show the directive as text
            }
            let mut words = directive.split_whitespace();
            let (Some(kind), Some(target)) = (words.next(), words.next()) else {
                continue;
            };
            if !matches!(kind, "include" | "rustdoc_include") {
                continue;
            }
            let (file, anchor) = match target.split_once(':') {
                Some((f, a)) => (f, Some(a)),
                None => (target, None),
            };
            let path = dir.join(file);
            let Ok(content) = std::fs::read_to_string(&path) else {
                problems.push(format!("{at}: include of missing file {file}"));
                continue;
            };
            if let Some(anchor) =
                anchor.filter(|a| !a.chars().next().is_some_and(|c| c.is_ascii_digit()))
                && !(content.contains(&format!("ANCHOR: {anchor}"))
                    && content.contains(&format!("ANCHOR_END: {anchor}")))
            {
                problems.push(format!("{at}: {file} has no anchor {anchor:?}"));
            }
        }
        for target in link_targets(line) {
            if target.contains("://") || target.starts_with('#') || target.starts_with("mailto:") {
                continue;
            }
            let file = target.split('#').next().unwrap_or("");
            if !file.is_empty() && !dir.join(file).exists() {
                problems.push(format!("{at}: link to missing file {file}"));
            }
        }
    }
    // Rust code reaches the book only through includes, so it always compiles; and every
    // listing has a caption naming the file it comes from, on the line before its fence:
    // `<span class="filename">Filename: chapters/…/file.rs (anchor)</span>`.
    let mut in_rust = false;
    let mut caption = String::new(); // the caption of the open Rust block
    let mut previous = ""; // the last non-empty line outside a block
    let mut shown = 0; // lines the open Rust block shows, its includes expanded
    let mut included = Vec::new(); // what the open Rust block includes, as `file:anchor`
    let mut opened_at = 0; // the line of the open Rust block's fence
    for (lineno, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            if in_rust {
                check_listing_length(&name, opened_at, shown, &included, problems);
            }
            in_rust = !in_rust && info.trim_start().starts_with("rust");
            shown = 0;
            included.clear();
            opened_at = lineno + 1;
            if in_rust {
                caption = previous
                    .strip_prefix("<span class=\"filename\">Filename: ")
                    .unwrap_or("")
                    .to_string();
                if caption.is_empty() {
                    problems.push(format!(
                        "{name}:{}: a listing without a caption; put <span class=\"filename\">Filename: \
                         chapters/…/file.rs (anchor)</span> on the line before it",
                        lineno + 1
                    ));
                }
            }
            continue;
        }
        if !in_rust && !trimmed.is_empty() {
            previous = trimmed;
        }
        if in_rust {
            shown += match listing_target(trimmed) {
                Some((file, anchor)) => {
                    included.push(format!("{}:{}", file.trim_start_matches("../../"), anchor));
                    std::fs::read_to_string(dir.join(file))
                        .map_or(1, |content| listing_lines(&content, anchor))
                }
                None => 1,
            };
        }
        if in_rust
            && !caption.is_empty()
            && let Some(file) = trimmed
                .strip_prefix("{{#include ")
                .and_then(|r| r.split(':').next())
                .and_then(|f| f.rsplit('/').next())
            && !caption.contains(file)
        {
            problems.push(format!(
                "{name}:{}: the caption {caption:?} does not name {file}",
                lineno + 1
            ));
        }
        if in_rust && !trimmed.is_empty() && !trimmed.starts_with("{{#") {
            problems.push(format!(
                "{name}:{}: Rust code pasted into the book; use {{{{#include …:anchor}}}}",
                lineno + 1
            ));
        }
    }
}

/// The file and anchor (or line range, or nothing) of an include directive on its own line.
fn listing_target(line: &str) -> Option<(&str, &str)> {
    let target = line
        .strip_prefix("{{#include ")
        .or_else(|| line.strip_prefix("{{#rustdoc_include "))?
        .split("}}")
        .next()?
        .trim();
    Some(target.split_once(':').unwrap_or((target, "")))
}

/// How many lines mdBook shows for an include of `content` with `anchor`: the lines between
/// `ANCHOR: name` and `ANCHOR_END: name` less any other anchor's marker lines, or a range
/// `from:to` of line numbers, or the whole file.
fn listing_lines(content: &str, anchor: &str) -> usize {
    let lines: Vec<&str> = content.lines().collect();
    if anchor.is_empty() {
        return lines.len();
    }
    if anchor.starts_with(|c: char| c.is_ascii_digit()) {
        let mut range = anchor.split(':');
        let from = range.next().and_then(|n| n.parse().ok()).unwrap_or(1usize);
        let to = range
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(lines.len());
        return to.min(lines.len()).saturating_sub(from.max(1) - 1);
    }
    let names = |line: &str, marker: &str| {
        line.split(marker)
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .is_some_and(|n| n == anchor)
    };
    let mut inside = false;
    let mut count = 0;
    for line in lines {
        if line.contains("ANCHOR_END:") {
            if names(line, "ANCHOR_END:") {
                inside = false;
            }
        } else if line.contains("ANCHOR:") {
            inside |= names(line, "ANCHOR:");
        } else if inside {
            count += 1;
        }
    }
    count
}

fn check_listing_length(
    page: &str,
    lineno: usize,
    shown: usize,
    included: &[String],
    problems: &mut Vec<String>,
) {
    if shown > MAX_LISTING_LINES {
        problems.push(format!(
            "{page}:{lineno}: a listing of {shown} lines ({}); split it at anchors into parts of \
             at most {MAX_LISTING_LINES}, each with its own sentence",
            included.join(", ")
        ));
    }
}

/// Targets of `[text](target)` links and `src="target"` attributes on one line.
fn link_targets(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        let Some(end) = after.find(')') else { break };
        out.push(
            after[..end]
                .split_whitespace()
                .next()
                .unwrap_or("")
                .to_string(),
        );
        rest = &after[end..];
    }
    let mut rest = line;
    while let Some(i) = rest.find("src=\"") {
        let after = &rest[i + 5..];
        let Some(end) = after.find('"') else { break };
        out.push(after[..end].to_string());
        rest = &after[end..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_lines_an_include_shows() {
        let file = "a\n// ANCHOR: one\nb\n// ANCHOR: inner\nc\n// ANCHOR_END: inner\nd\n\
                    // ANCHOR_END: one\n// ANCHOR: one_more\ne\n// ANCHOR_END: one_more\n";
        assert_eq!(listing_lines(file, "one"), 3, "b, c and d; markers dropped");
        assert_eq!(listing_lines(file, "inner"), 1);
        assert_eq!(
            listing_lines(file, "one_more"),
            1,
            "a name that starts like another"
        );
        assert_eq!(listing_lines(file, "2:4"), 3);
        assert_eq!(listing_lines(file, ""), 11);
        assert_eq!(
            listing_target("{{#include ../../chapters/x/src/a.rs:one}}"),
            Some(("../../chapters/x/src/a.rs", "one"))
        );
    }

    #[test]
    fn finds_links_and_images() {
        let got = link_targets(
            r#"see [ch1](ch01-tensors.md#views) and <img src="images/a.svg"> [web](https://x.y)"#,
        );
        assert_eq!(
            got,
            ["ch01-tensors.md#views", "https://x.y", "images/a.svg"]
        );
    }
}
