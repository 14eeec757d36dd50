//! No two source files of a chapter's crate use each other. A file uses another when one of
//! its paths (a `use`, or a `crate::…`, `super::…` or `child::…` path in its code) names an
//! item of the other's module: `use super::Acts` in `matrix/few.rs` uses `matrix.rs`, and
//! `prefill::q4_prefill(…)` in `matrix.rs` uses `matrix/prefill.rs`. Declaring a module
//! (`mod few;`) is not a use. The modules are those that `mod` lines declare from `lib.rs`
//! and `main.rs`; a file's `#[cfg(test)]` module at its end is left out (its `super` is the
//! file itself), and so is the crate's root, `lib.rs` or `main.rs`: its re-exports are the
//! crate's table of contents, which every file may name.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::root;

/// One module: its file, and its path from the crate's root (`["matrix", "few"]`).
struct Module {
    file: PathBuf,
    path: Vec<String>,
    children: Vec<String>,
}

/// Pairs let pass while they wait to be split: none now, so any pair at all is a problem (and
/// a pair put here that no longer uses each other is one too).
const KNOWN: [(&str, &str); 0] = [];

/// Every pair of files, in every chapter's crate, that use each other, as a problem (but
/// for the [`KNOWN`] ones).
pub fn check(problems: &mut Vec<String>) {
    let pairs = loops();
    for (a, b) in &pairs {
        if !KNOWN.contains(&(a.as_str(), b.as_str())) {
            problems.push(format!(
                "{a} and {b} use each other: move what both need into a file below them \
                 (`cargo xtask imports` lists every pair)"
            ));
        }
    }
    for (a, b) in KNOWN {
        if !pairs.iter().any(|p| (p.0.as_str(), p.1.as_str()) == (a, b)) {
            problems.push(format!(
                "{a} and {b} no longer use each other: take them off KNOWN in xtask/src/imports.rs"
            ));
        }
    }
}

/// `cargo xtask imports`: the pairs of files that use each other, one a line.
pub fn report() -> Result<(), String> {
    let pairs = loops();
    for (a, b) in &pairs {
        println!("{a} <-> {b}");
    }
    let known = pairs
        .iter()
        .filter(|(a, b)| KNOWN.contains(&(a.as_str(), b.as_str())))
        .count();
    println!(
        "{} pairs of files that use each other ({known} of them known, to be split)",
        pairs.len()
    );
    Ok(())
}

fn loops() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Ok(dirs) = std::fs::read_dir(root().join("chapters")) else {
        return out;
    };
    let mut crates: Vec<PathBuf> = dirs.flatten().map(|d| d.path().join("src")).collect();
    crates.sort();
    for src in crates {
        for top in ["lib.rs", "main.rs"] {
            let mut modules = Vec::new();
            collect(&src.join(top), Vec::new(), &mut modules);
            let edges = edges(&modules);
            let name = |i: usize| {
                let f = &modules[i].file;
                f.strip_prefix(root()).unwrap_or(f).display().to_string()
            };
            for &(a, b) in &edges {
                let root = modules[a].path.is_empty() || modules[b].path.is_empty();
                if a < b && !root && edges.contains(&(b, a)) {
                    out.push((name(a), name(b)));
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The module in `file` and, depth first, every module its `mod name;` lines declare.
fn collect(file: &Path, path: Vec<String>, out: &mut Vec<Module>) {
    let Ok(text) = std::fs::read_to_string(file) else {
        return;
    };
    let text = code(&text);
    let dir = match file.file_name().and_then(|n| n.to_str()) {
        Some("lib.rs" | "main.rs" | "mod.rs") => file.parent().map(Path::to_path_buf),
        _ => Some(file.with_extension("")),
    };
    let children: Vec<String> = text
        .lines()
        .filter_map(|l| {
            let l = l
                .trim()
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub ");
            let name = l.strip_prefix("mod ")?.strip_suffix(';')?;
            Some(name.trim().to_string())
        })
        .collect();
    out.push(Module {
        file: file.to_path_buf(),
        path: path.clone(),
        children: children.clone(),
    });
    let Some(dir) = dir else { return };
    for c in children {
        let mut p = path.clone();
        p.push(c.clone());
        let flat = dir.join(format!("{c}.rs"));
        let file = if flat.exists() {
            flat
        } else {
            dir.join(&c).join("mod.rs")
        };
        collect(&file, p, out);
    }
}

/// The text without comments, and cut at a `#[cfg(test)]` module.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]\nmod ").next().unwrap_or(text);
    let lines = text.lines().map(|l| match l.find("//") {
        Some(i) if !l[..i].contains('"') => &l[..i],
        _ => l,
    });
    lines.collect::<Vec<_>>().join("\n")
}

/// (user, used) for every module that names an item of another.
fn edges(modules: &[Module]) -> BTreeSet<(usize, usize)> {
    let by_path: BTreeMap<&[String], usize> = modules
        .iter()
        .enumerate()
        .map(|(i, m)| (m.path.as_slice(), i))
        .collect();
    let mut edges = BTreeSet::new();
    for (i, m) in modules.iter().enumerate() {
        let text = std::fs::read_to_string(&m.file)
            .map(|t| code(&t))
            .unwrap_or_default();
        for path in paths(&text, m) {
            // the longest prefix of the path that is a module is the file that holds the item
            let used = (0..=path.len())
                .rev()
                .find_map(|n| by_path.get(&path[..n]).copied());
            if let Some(j) = used.filter(|&j| j != i) {
                edges.insert((i, j));
            }
        }
    }
    edges
}

/// Every path `text` names inside its crate, from the crate's root.
fn paths(text: &str, m: &Module) -> Vec<Vec<String>> {
    let mut raw = Vec::new();
    let mut rest = String::new();
    // `use` trees (a line that starts one), expanded
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        let t = t
            .strip_prefix("pub ")
            .or(t.strip_prefix("pub(crate) "))
            .unwrap_or(t);
        let t = t.strip_prefix("pub(super) ").unwrap_or(t);
        let Some(tree) = t.strip_prefix("use ") else {
            rest.push_str(line);
            rest.push('\n');
            continue;
        };
        let mut tree = tree.to_string();
        while !tree.contains(';') {
            let Some(next) = lines.next() else { break };
            tree.push_str(next);
        }
        expand(
            tree.split(';').next().unwrap_or(""),
            &mut Vec::new(),
            &mut raw,
        );
    }
    // paths in the code: crate::…, super::…, and a child module's name followed by ::
    let starts: Vec<&str> = ["crate", "super", "self"]
        .into_iter()
        .chain(m.children.iter().map(String::as_str))
        .collect();
    for start in starts {
        let mut s = rest.as_str();
        while let Some(at) = find_word(s, start) {
            let chain: String = s[at..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            if chain.starts_with(&format!("{start}::")) && !s[..at].ends_with("::") {
                raw.push(
                    chain
                        .split("::")
                        .filter(|x| !x.is_empty())
                        .map(String::from)
                        .collect(),
                );
            }
            s = &s[at + start.len()..];
        }
    }
    raw.into_iter().filter_map(|p| absolute(p, m)).collect()
}

/// `p` from the crate's root, if it starts inside the crate.
fn absolute(p: Vec<String>, m: &Module) -> Option<Vec<String>> {
    let mut base = m.path.clone();
    let mut segs = p.into_iter().peekable();
    match segs.peek().map(String::as_str) {
        Some("crate") => {
            base.clear();
            segs.next();
        }
        Some("self") => {
            segs.next();
        }
        Some("super") => {
            while segs.peek().map(String::as_str) == Some("super") {
                base.pop()?;
                segs.next();
            }
        }
        Some(c) if m.children.iter().any(|x| x == c) => {}
        _ => return None, // another crate's
    }
    base.extend(segs);
    Some(base)
}

/// Where `word` next stands alone in `s` (not inside a longer name).
fn find_word(s: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = s[from..].find(word).map(|i| from + i) {
        let before = s[..i].chars().next_back();
        let after = s[i + word.len()..].chars().next();
        let part = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        if !part(before) && !part(after) {
            return Some(i);
        }
        from = i + word.len();
    }
    None
}

/// The paths of a `use` tree (`a::{b, c::{d, self}}`), each appended to `prefix`.
fn expand(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let head: Vec<String> = segments(&tree[..open]);
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let n = prefix.len();
        prefix.extend(head);
        let (mut depth, mut start) = (0, 0);
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&inner[start..i], prefix, out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        expand(&inner[start..], prefix, out);
        prefix.truncate(n);
    } else if !tree.is_empty() {
        let mut p = prefix.clone();
        let tree = tree.split(" as ").next().unwrap_or(tree);
        let empty = p.is_empty();
        p.extend(segments(tree).into_iter().filter(|s| s != "self" || empty));
        out.push(p);
    }
}

fn segments(s: &str) -> Vec<String> {
    s.split("::")
        .map(str::trim)
        .filter(|x| !x.is_empty() && *x != "*")
        .map(String::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(path: &[&str], children: &[&str]) -> Module {
        Module {
            file: PathBuf::from("x.rs"),
            path: path.iter().map(|s| s.to_string()).collect(),
            children: children.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn use_trees_expand_to_one_path_per_leaf() {
        let mut out = Vec::new();
        expand(
            "super::{a, b::{c, self}, d as e}",
            &mut Vec::new(),
            &mut out,
        );
        let got: Vec<String> = out.iter().map(|p| p.join("::")).collect();
        assert_eq!(got, ["super::a", "super::b::c", "super::b", "super::d"]);
    }

    #[test]
    fn paths_resolve_from_the_crate_root_and_skip_other_crates() {
        let m = module(&["matrix", "few"], &[]);
        let text = "use super::types::Matrix;\nuse rayon::prelude::*;\n\
                    fn f() { crate::matrix::policy::use_eights(kk); }\n";
        let got: Vec<String> = paths(text, &m).iter().map(|p| p.join("::")).collect();
        assert_eq!(got, ["matrix::types::Matrix", "matrix::policy::use_eights"]);
        // a parent's path into its child, written without `self::`
        let parent = module(&["matrix"], &["prefill"]);
        let got = paths("fn g() { prefill::q4_prefill(m); }", &parent);
        assert_eq!(got, [["matrix", "prefill", "q4_prefill"]]);
    }
}
