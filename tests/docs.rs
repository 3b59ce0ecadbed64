//! The docs hold together: every relative link and anchor resolves, the README's capture of the
//! control room is the one the test suite draws from the current code, and the docs describe
//! the software, not the history of the work on it.

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;

/// The Markdown files a reader is sent to.
fn docs() -> Vec<PathBuf> {
    let repo = common::repo();
    let mut v = vec![repo.join("README.md"), repo.join("CHANGELOG.md")];
    let mut d: Vec<PathBuf> = std::fs::read_dir(repo.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    d.sort();
    v.extend(d);
    v
}

/// GitHub's anchor for a heading: lower case, spaces to '-', everything but letters, digits,
/// '-' and '_' dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// A Markdown file's lines outside its fenced code blocks (the fences left out too).
fn prose_lines(text: &str) -> impl Iterator<Item = &str> {
    let mut fenced = false;
    text.lines().filter(move |line| {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            return false;
        }
        !fenced
    })
}

/// The anchors of a Markdown file's headings (outside code blocks), duplicates numbered as
/// GitHub numbers them.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for line in prose_lines(text).filter(|l| l.starts_with('#')) {
        let base = slug(line.trim_start_matches('#'));
        let mut a = base.clone();
        let mut n = 1;
        while seen.contains(&a) {
            a = format!("{base}-{n}");
            n += 1;
        }
        seen.insert(a);
    }
    seen
}

/// The targets of a Markdown file's inline links `[text](target)`, outside code blocks and spans.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose_lines(text) {
        // code spans may hold brackets and parentheses that are not links
        let plain: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = plain.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(j) = after.find(')') else { break };
            out.push(after[..j].to_string());
            rest = &after[j..];
        }
    }
    out
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let mut broken = Vec::new();
    for file in docs() {
        let text = std::fs::read_to_string(&file).unwrap();
        for target in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = target.split_once('#').map_or((target.as_str(), None), |(p, a)| (p, Some(a)));
            let dest = if path.is_empty() { file.clone() } else { file.parent().unwrap().join(path) };
            if !dest.exists() {
                broken.push(format!("{}: {target}: no such file", file.display()));
                continue;
            }
            if let Some(a) = anchor {
                let dest_text = std::fs::read_to_string(&dest).unwrap_or_default();
                if !anchors(&dest_text).contains(a) {
                    broken.push(format!("{}: {target}: no heading with that anchor", file.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_checker_finds_what_it_should() {
    assert_eq!(slug(" The gate: what its figures mean"), "the-gate-what-its-figures-mean");
    assert_eq!(
        slug("Builds: what the watcher submits, and re-encoding"),
        "builds-what-the-watcher-submits-and-re-encoding"
    );
    let a = anchors("# A\n```\n# not a heading\n```\n## A\n### `x` y\n");
    assert_eq!(a, ["a", "a-1", "x-y"].map(String::from).into_iter().collect());
    assert_eq!(links("see [g](docs/GUIDE.md#commands) and `[x](y)` [z](#a)"), ["docs/GUIDE.md#commands", "#a"]);
}

/// Every picture of the control room in the docs (a text block that starts with its header) is
/// one of the snapshots the TUI tests draw from the current code, verbatim; the README's is the
/// 80 × 24 zoo.
#[test]
fn the_captures_are_the_current_snapshots() {
    let repo = common::repo();
    let snaps: Vec<(String, String)> = std::fs::read_dir(repo.join("tests/snapshots"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read_to_string(&p).unwrap()))
        .collect();
    let mut seen = 0;
    for rel in ["README.md", "docs/GUIDE.md"] {
        let text = std::fs::read_to_string(repo.join(rel)).unwrap();
        for block in text.split("```text\n").skip(1).filter_map(|b| b.split("\n```").next()) {
            if !block.starts_with(" kaiju-tui │") {
                continue;
            }
            seen += 1;
            let same = snaps.iter().find(|(_, s)| s.trim_end() == block.trim_end());
            assert!(same.is_some(), "{rel}: a capture that is no snapshot of tests/snapshots/:\n{block}");
            if rel == "README.md" {
                assert_eq!(same.unwrap().0, "zoo_80x24.txt", "the README shows the 80 × 24 zoo");
            }
        }
    }
    assert!(seen >= 4, "{seen} captures found");
}

/// The README, the changelog and every document under docs/ describe the software: no word of
/// the sessions or issues that built it (tmux's sessions and llama.cpp's `*_session` types
/// excepted).
#[test]
fn the_docs_describe_the_software_not_its_history() {
    let repo = common::repo();
    let mut found = Vec::new();
    for path in docs() {
        let rel = path.strip_prefix(&repo).unwrap_or(&path).display().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        for (n, line) in text.lines().enumerate() {
            let l = line.to_lowercase();
            let issue = l.match_indices("issue ").any(|(i, _)| l[i + 6..].starts_with(|c: char| c.is_ascii_digit()));
            if issue || (l.contains("session") && !l.contains("tmux") && !l.contains("_session")) {
                found.push(format!("{rel}:{}: {line}", n + 1));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
    let readme = std::fs::read_to_string(repo.join("README.md")).unwrap();
    assert!(readme.lines().count() <= 200, "README.md is {} lines", readme.lines().count());
}
