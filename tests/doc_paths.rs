//! The repository's documents name only paths that exist, and no private tool.
//!
//! Every Markdown file of the repository and the comments of every `Cargo.toml` are read for the
//! repository paths they name: text starting with `src/`, `tests/`, `crates/`, `examples/`,
//! `docs/` or `fuzz/` (optionally after `./`), or a relative path starting with `../`. Each must
//! exist, relative to the repository's root, to the file's own folder, or to the crate the file
//! belongs to (so `src/main.rs` in `crates/hodoflow-send/README.md` is that crate's); a `../`
//! path is taken from the file's folder and must stay inside the repository (a clone has
//! nothing beside it).
//!
//! Only literal paths are checked. A path inside a URL or behind another path
//! (`https://…/src/lib.rs`, `reqwest/src/retry.rs`) is not this repository's, and a path
//! followed by a glob or a placeholder (`tests/*.rs`, `src/vendors/<vendor>/`, `src/…`) names
//! no one file; both are skipped.
//!
//! No Markdown file, manifest or Rust source names a private development tool.
//!
//! No text file cites an issue of the project's tracker by its number: the word "issue" or
//! "issues", then an optional space and `#`, then digits, in any case. A comment or document
//! states the fact itself (what was found, what changed), which a reader without the tracker can
//! follow. `*.jsonl` result data is not read, nor a file that is not UTF-8 text.
//!
//! Skipped: `target/`, `.git/` and other hidden folders, and the fuzzers' `corpus/` and
//! `artifacts/`.

use std::fs;
use std::path::{Component, Path, PathBuf};

/// The first folder of a path that names a place in this repository.
const ROOTS: &[&str] = &["src/", "tests/", "crates/", "examples/", "docs/", "fuzz/"];

/// Development tools contributors do not have; no file should send them looking for one. Spelled
/// in two pieces so that this file does not name them.
const PRIVATE_TOOLS: &[[&str; 2]] = &[["farm", "-studio"], ["farm", "-bench"]];

/// The word an issue citation starts with, spelled in two pieces so that this file's own
/// examples are built, not written.
const ISSUE: &str = concat!("iss", "ue");

#[test]
fn every_path_a_document_names_exists() {
    let root = repository();
    let mut documents = Vec::new();
    walk(&root, &root, &mut documents);
    let documents: Vec<PathBuf> = documents
        .into_iter()
        .filter(|file| is_markdown(file) || is_manifest(file))
        .collect();
    assert!(
        documents
            .iter()
            .any(|file| file == &root.join("Cargo.toml"))
            && documents
                .iter()
                .any(|file| file == &root.join("fuzz/README.md")),
        "found the documents: {documents:?}"
    );

    let mut missing = Vec::new();
    let mut checked = 0;
    for file in &documents {
        let text = fs::read_to_string(file).expect("a document is UTF-8 text");
        for (number, line) in text.lines().enumerate() {
            let line = if is_manifest(file) {
                toml_comment(line)
            } else {
                line
            };
            for path in paths_in(line) {
                checked += 1;
                let entry = format!("{}:{}: {path}", shown(&root, file), number + 1);
                if !exists(&root, file, &path) && !missing.contains(&entry) {
                    missing.push(entry);
                }
            }
        }
    }
    assert!(checked > 20, "read only {checked} paths in {documents:?}");
    assert!(
        missing.is_empty(),
        "{} paths named in the repository's documents do not exist:\n  {}",
        missing.len(),
        missing.join("\n  ")
    );
}

#[test]
fn no_document_manifest_or_source_names_a_private_tool() {
    let root = repository();
    let mut files = Vec::new();
    walk(&root, &root, &mut files);
    let rust = |file: &PathBuf| file.extension().is_some_and(|extension| extension == "rs");
    let mut found = Vec::new();
    for file in files
        .iter()
        .filter(|file| is_markdown(file) || is_manifest(file) || rust(file))
    {
        let text = fs::read_to_string(file).expect("a document or source file is UTF-8 text");
        for (number, line) in text.lines().enumerate() {
            for [first, second] in PRIVATE_TOOLS {
                let tool = format!("{first}{second}");
                if line.contains(&tool) {
                    found.push(format!("{}:{}: {tool}", shown(&root, file), number + 1));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "documents name a private development tool:\n  {}",
        found.join("\n  ")
    );
}

#[test]
fn no_text_file_cites_an_issue_number() {
    let root = repository();
    let mut files = Vec::new();
    walk(&root, &root, &mut files);
    let mut found = Vec::new();
    let mut read = Vec::new();
    for file in files.iter().filter(|file| {
        file.extension()
            .is_none_or(|extension| extension != "jsonl")
    }) {
        let bytes = fs::read(file).expect("a readable file");
        let Ok(text) = String::from_utf8(bytes) else {
            continue;
        };
        read.push(shown(&root, file));
        for (number, line) in text.lines().enumerate() {
            for citation in issue_citations(line) {
                found.push(format!("{}:{}: {citation}", shown(&root, file), number + 1));
            }
        }
    }
    for expected in [
        "README.md",
        "fuzz/README.md",
        "src/lib.rs",
        "tests/doc_paths.rs",
    ] {
        assert!(
            read.iter().any(|file| file == expected),
            "did not read {expected}: {read:?}"
        );
    }
    assert!(
        found.is_empty(),
        "{} issue numbers are cited; state what was found or changed instead:\n  {}",
        found.len(),
        found.join("\n  ")
    );
}

#[test]
fn the_citation_matcher_takes_every_form_of_an_issue_number_and_nothing_else() {
    let upper = ISSUE.to_uppercase();
    let capital = format!("I{}", &ISSUE[1..]);
    for (line, expected) in [
        (format!("before {ISSUE} 10."), vec![format!("{ISSUE} 10")]),
        (format!("({ISSUE} 22, item 5)"), vec![format!("{ISSUE} 22")]),
        (
            format!("{capital} 23: a token"),
            vec![format!("{capital} 23")],
        ),
        (format!("{ISSUE}s 21 and 23"), vec![format!("{ISSUE}s 21")]),
        (format!("its {ISSUE} #146"), vec![format!("{ISSUE} #146")]),
        (
            format!("{upper}#7, {ISSUE}42"),
            vec![format!("{upper}#7"), format!("{ISSUE}42")],
        ),
        (format!("t{ISSUE} 3"), vec![format!("{ISSUE} 3")]),
    ] {
        assert_eq!(issue_citations(&line), expected, "{line}");
    }
    for none in [
        format!("an open upstream {ISSUE}, the {ISSUE}s above"),
        format!("{ISSUE}: 23, {ISSUE}  23, {ISSUE} # 23, {ISSUE}s #"),
        "issuer 23, tissues, misuse 7".to_owned(),
    ] {
        assert_eq!(issue_citations(&none), Vec::<String>::new(), "{none}");
    }
}

#[test]
fn the_matcher_takes_paths_and_leaves_urls_globs_and_placeholders() {
    let found = |line: &str| paths_in(line);
    assert_eq!(
        found("see `src/core/signing.rs`, and tests/layout.rs."),
        ["src/core/signing.rs", "tests/layout.rs"]
    );
    assert_eq!(found("(src/page/): the status page"), ["src/page/"]);
    assert_eq!(
        found("[guide](./docs/guide/webhooks.md#signing)"),
        ["docs/guide/webhooks.md"]
    );
    assert_eq!(found("[outside](../outside/notes/)"), ["../outside/notes/"]);
    assert_eq!(
        found("[up](../../README.md), line src/lib.rs:12"),
        ["../../README.md", "src/lib.rs"]
    );
    for none in [
        "https://github.com/seanmonstar/reqwest/blob/master/src/retry.rs",
        "reqwest 0.13 `reqwest/src/retry.rs`",
        "every `tests/*.rs` file, `crates/*/README.md`",
        "`src/vendors/<vendor>/outbox.rs` and `src/…`",
        "a `{src,tests}/` glob, `examples/{a,b}.rs`, src/... elided",
        "docs.rs/hodoflow-retry, mydocs/x.md, my-src/lib.rs, $CARGO/src/x.rs",
        "the word src, or tests / crates alone, or `src/`",
    ] {
        assert_eq!(found(none), Vec::<String>::new(), "{none}");
    }
}

#[test]
fn a_path_exists_from_the_root_the_folder_or_the_crate_and_never_outside() {
    let root = repository();
    let sender = root.join("crates/hodoflow-send/README.md");
    assert!(exists(&root, &root.join("README.md"), "src/lib.rs"));
    assert!(exists(&root, &sender, "src/main.rs"));
    assert!(exists(&root, &sender, "tests/"));
    assert!(exists(&root, &sender, "../../Cargo.toml"));
    assert!(!exists(&root, &root.join("README.md"), "src/backoff.rs"));
    assert!(!exists(&root, &root.join("README.md"), "../outside/notes/"));
    assert!(!exists(
        &root,
        &root.join("README.md"),
        "../main/src/lib.rs"
    ));
    assert!(!exists(&root, &sender, "../../../main/Cargo.toml"));
    assert!(!exists(
        &root,
        &root.join("fuzz/README.md"),
        "src/rate_limit_field.rs"
    ));
}

#[test]
fn a_manifest_line_is_read_from_its_comment_only() {
    assert_eq!(toml_comment("backon = [\"dep:backon\"]"), "");
    assert_eq!(toml_comment("# see src/lib.rs"), "# see src/lib.rs");
    assert_eq!(toml_comment("a = \"src/#x\" # src/y.rs"), "# src/y.rs");
    assert_eq!(toml_comment("a = 'src/#x' # it"), "# it");
    assert_eq!(toml_comment("a = \"quote \\\" # in\" # out"), "# out");
}

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn is_markdown(file: &Path) -> bool {
    file.extension().is_some_and(|extension| extension == "md")
}

fn is_manifest(file: &Path) -> bool {
    file.file_name().is_some_and(|name| name == "Cargo.toml")
}

fn shown(root: &Path, file: &Path) -> String {
    file.strip_prefix(root)
        .unwrap_or(file)
        .display()
        .to_string()
}

/// Every file under `folder`, but not in build output, hidden folders or fuzzing data.
fn walk(root: &Path, folder: &Path, files: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(folder)
        .expect("a readable folder")
        .map(|entry| entry.expect("a folder entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if path.is_dir() {
            let skipped = name.starts_with('.')
                || name == "target"
                || path == root.join("fuzz/corpus")
                || path == root.join("fuzz/artifacts");
            if !skipped {
                walk(root, &path, files);
            }
        } else {
            files.push(path);
        }
    }
}

/// The comment of a `Cargo.toml` line, from its `#` (outside a string) on; empty without one.
fn toml_comment(line: &str) -> &str {
    let mut quote = None;
    let mut escaped = false;
    for (at, character) in line.char_indices() {
        match quote {
            Some('"') if escaped => escaped = false,
            Some('"') if character == '\\' => escaped = true,
            Some(open) if character == open => quote = None,
            Some(_) => {}
            None if character == '"' || character == '\'' => quote = Some(character),
            None if character == '#' => return &line[at..],
            None => {}
        }
    }
    ""
}

/// The issue citations in `line`, as written: what the case-insensitive pattern
/// `issues? ?#?[0-9]+` matches, leftmost first.
fn issue_citations(line: &str) -> Vec<String> {
    let lower = line.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(start) = lower[at..].find(ISSUE).map(|offset| at + offset) {
        let mut end = start + ISSUE.len();
        for optional in [b's', b' ', b'#'] {
            if bytes.get(end) == Some(&optional) {
                end += 1;
            }
        }
        let digits = bytes[end..]
            .iter()
            .take_while(|byte| byte.is_ascii_digit())
            .count();
        if digits > 0 {
            found.push(line[start..end + digits].to_owned());
            at = end + digits;
        } else {
            at = start + ISSUE.len();
        }
    }
    found
}

/// A character that may be part of a path, or of a URL before one.
fn in_path(character: char) -> bool {
    character.is_ascii_alphanumeric() || matches!(character, '_' | '-' | '.' | '/')
}

/// The repository paths `line` names, as written (`./` dropped).
fn paths_in(line: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let mut at = 0;
    while at < line.len() {
        let rest = &line[at..];
        let before = line[..at].chars().next_back();
        let starts = before.is_none_or(|before| {
            !in_path(before) && !matches!(before, ':' | '~' | '@' | '$' | '%' | '\\')
        });
        let length = rest
            .find(|character| !in_path(character))
            .unwrap_or(rest.len());
        if length == 0 {
            at += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        }
        if starts
            && let Some(path) = repository_path(&rest[..length], rest[length..].chars().next())
        {
            paths.push(path);
        }
        at += length;
    }
    paths
}

/// `word` as a repository path, or `None`: a run of path characters not preceded by one, and
/// `next` the character after it.
fn repository_path(word: &str, next: Option<char>) -> Option<String> {
    // A glob, a placeholder or an ellipsis after it: the path names no one file.
    if next.is_some_and(|next| matches!(next, '*' | '<' | '{' | '[' | '…' | '$')) {
        return None;
    }
    let word = word.trim_end_matches(['.', ',', ';', ':']);
    if (word.contains("..") && !word.starts_with("../")) || word.contains("//") {
        return None;
    }
    let mut path = word;
    while let Some(rest) = path.strip_prefix("./") {
        path = rest;
    }
    let named = if path.starts_with("../") {
        path.trim_start_matches("../")
            .contains(|c: char| c.is_ascii_alphanumeric())
    } else {
        ROOTS
            .iter()
            .any(|root| path.strip_prefix(root).is_some_and(|rest| !rest.is_empty()))
    };
    named.then(|| path.to_owned())
}

/// Whether `path`, named in `file`, exists: from the repository's root, the file's folder or its
/// crate's folder; a `../` path from the file's folder, inside the repository.
fn exists(root: &Path, file: &Path, path: &str) -> bool {
    let folder = file.parent().expect("a file has a folder");
    if path.starts_with("../") {
        let inside = folder.strip_prefix(root).expect("a file in the repository");
        return within(&inside.join(path)).is_some_and(|resolved| root.join(resolved).exists());
    }
    let mut bases = vec![root.to_path_buf(), folder.to_path_buf()];
    let mut crate_folder = Some(folder);
    while let Some(candidate) = crate_folder {
        if candidate.join("Cargo.toml").is_file() {
            bases.push(candidate.to_path_buf());
            break;
        }
        if candidate == root {
            break;
        }
        crate_folder = candidate.parent();
    }
    bases.iter().any(|base| base.join(path).exists())
}

/// `path`, relative to the repository's root, with its `.` and `..` folded; `None` when it
/// leaves the repository at any step.
fn within(path: &Path) -> Option<PathBuf> {
    let mut inside = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                if !inside.pop() {
                    return None;
                }
            }
            Component::CurDir => {}
            Component::Normal(name) => inside.push(name),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(inside)
}
