//! The shape of `src/`:
//! - `core/` is vendor-blind: no file under it reaches outside `crate::core`, so it imports
//!   nothing from `crate::vendors` (nor a vendor's item through a re-export of `lib.rs`), and
//!   speaks no vendor's words: a route with a window of its own is a route, whatever a vendor
//!   calls it (Hodoflow's webhook trigger, Modulify's method);
//! - no module imports, directly or through others, a module that imports it back;
//! - one runtime reads the time and sleeps: outside `core/runtime.rs` nothing reads
//!   `Instant::now` or `SystemTime::now`, nor calls tokio's `sleep`, `timeout` or `interval`.
//!
//! A module is a node of a graph: one file (a folder's `mod.rs` is the folder's module). An edge
//! is any `crate::…` path outside comments and outside a file's `#[cfg(test)] mod tests`, which may
//! reach anywhere (but not out of `core/`). `lib.rs` declares and re-exports everything and is left
//! out.
//!
//! There are none: any circle fails this test, with the modules and the names that tie them.
//! (The last, `error <-> key`, was cut by keeping the key as a value, `core/key/value.rs`, apart
//! from its fallible constructors: an error carries the value, the constructors make errors.)

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Circles that exist and are allowed, as sorted module lists: none.
const KNOWN: &[&[&str]] = &[];

#[test]
fn no_module_in_src_imports_one_that_imports_it_back() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    collect(&src, &mut files);
    let modules: BTreeSet<String> = files
        .iter()
        .filter_map(|file| module_of(&src, file))
        .collect();
    assert!(
        modules.len() > 20
            && modules.contains("core::engine")
            && modules.contains("core::limit::retry_budget")
            && modules.contains("vendors::hodoflow::tables"),
        "read the modules of src/: {modules:?}"
    );

    // module -> module it imports -> the names it takes, for the message.
    let mut edges: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for file in &files {
        let Some(from) = module_of(&src, file) else {
            continue;
        };
        let text = fs::read_to_string(file).expect("a source file");
        for (to, name) in crate_paths(&text, &modules) {
            if to != from && modules.contains(&to) {
                edges
                    .entry(from.clone())
                    .or_default()
                    .entry(to)
                    .or_default()
                    .insert(name);
            }
        }
    }

    let circles = circles(&modules, &edges);
    let unknown: Vec<_> = circles
        .iter()
        .filter(|circle| !KNOWN.iter().any(|known| known.iter().eq(circle.iter())))
        .collect();
    let shown: Vec<String> = unknown
        .iter()
        .map(|circle| {
            let ties: Vec<String> = circle
                .iter()
                .flat_map(|from| {
                    edges.get(from).into_iter().flat_map(move |to| {
                        to.iter()
                            .filter(|(to, _)| circle.contains(to))
                            .map(move |(to, names)| format!("{from} -> {to}: {names:?}"))
                    })
                })
                .collect();
            format!("{circle:?}\n  {}", ties.join("\n  "))
        })
        .collect();
    assert!(
        unknown.is_empty(),
        "import circles in src/:\n{}",
        shown.join("\n")
    );
    // A known circle that is gone should leave the list too.
    for known in KNOWN {
        assert!(
            circles.iter().any(|circle| known.iter().eq(circle.iter())),
            "the circle {known:?} is gone: remove it from KNOWN"
        );
    }
}

/// What reads the clock or waits on tokio's timer, as the code writes it.
const TIME: &[&str] = &[
    "Instant::now",
    "SystemTime::now",
    ".elapsed()",
    "tokio::time::sleep",
    "tokio::time::timeout",
    "tokio::time::interval",
];

/// Modules compiled for tests only, which may read the clock as they like.
const TEST_ONLY: &[&str] = &["proptests", "vendors/decided.rs", "fuzzing.rs"];

#[test]
fn only_the_runtime_reads_the_clock_or_sleeps() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    collect(&src, &mut files);
    let mut found = Vec::new();
    for file in &files {
        let relative = file
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if relative == "core/runtime.rs" || TEST_ONLY.iter().any(|test| relative.starts_with(test))
        {
            continue;
        }
        let text = fs::read_to_string(file).expect("a source file");
        let code = match text.find("#[cfg(test)]\nmod tests") {
            Some(tests) => &text[..tests],
            None => &text,
        };
        for (number, line) in code.lines().enumerate() {
            let line = line.trim();
            if line.starts_with("//") {
                continue;
            }
            // An import of tokio's time functions would hide them from the paths above.
            let imported = line.starts_with("use tokio::time::")
                && !matches!(line, "use tokio::time::Instant;");
            if imported || TIME.iter().any(|reader| line.contains(reader)) {
                found.push(format!("src/{relative}:{}: {line}", number + 1));
            }
        }
    }
    assert!(files.len() > 20, "read src/: {} files", files.len());
    assert!(
        found.is_empty(),
        "read the time or sleep through core/runtime.rs:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_time_check_finds_what_it_looks_for() {
    let caught = [
        "let at = tokio::time::Instant::now();",
        "x.elapsed() > y",
        "tokio::time::sleep_until(at).await",
    ];
    for line in caught {
        assert!(TIME.iter().any(|reader| line.contains(reader)), "{line}");
    }
    for line in ["runtime::now()", "runtime::sleep_until(at).await"] {
        assert!(!TIME.iter().any(|reader| line.contains(reader)), "{line}");
    }
}

/// Every `.rs` file under `dir`.
fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            collect(&path, files);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
}

/// The module of `file`: its path under `src/` as a Rust path (`core::fleet::gate`), a folder's
/// `mod.rs` named by its folder (`core::fleet`); `None` for `lib.rs`.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).ok()?;
    let mut parts: Vec<&str> = relative
        .components()
        .map(|part| part.as_os_str().to_str().unwrap_or_default())
        .collect();
    let last = parts.pop()?;
    match last {
        "lib.rs" if parts.is_empty() => return None,
        "mod.rs" => {}
        file => parts.push(file.strip_suffix(".rs").unwrap_or(file)),
    }
    Some(parts.join("::"))
}

/// `(module, name)` for every `crate::…` path in `text`, outside comments and the file's test
/// module: `module` is the longest of `modules` the path starts with (`core::fleet::gate`), or
/// its first segment when it names none.
fn crate_paths(text: &str, modules: &BTreeSet<String>) -> Vec<(String, String)> {
    let code = match text.find("#[cfg(test)]\nmod tests") {
        Some(tests) => &text[..tests],
        None => text,
    };
    let mut found = Vec::new();
    for path in paths_after_crate(code) {
        let segments: Vec<&str> = path.split("::").collect();
        let known = (1..=segments.len())
            .rev()
            .find(|&length| modules.contains(&segments[..length].join("::")));
        let length = known.unwrap_or(1);
        let module = segments[..length].join("::");
        let name = segments.get(length).copied().unwrap_or_default();
        if !module.is_empty() {
            found.push((module, name.to_owned()));
        }
    }
    found
}

/// Every path after `crate::` in `code` (up to the first character that is not part of a
/// path), outside comments: `core::engine::Engine`, `vendors::{`.
fn paths_after_crate(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in code.lines() {
        let line = line.trim_start();
        if line.starts_with("//") {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            let before = rest[..at].chars().next_back();
            let link = rest[..at].ends_with("](");
            rest = &rest[at + "crate::".len()..];
            // `$crate::` in a macro is the crate too; `hodoflow_retry::` is not `crate::`; a doc
            // link's target, `](crate::Budget)`, in a `#[doc]` string a macro writes, points a
            // reader to a public item and imports nothing.
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') || link {
                continue;
            }
            let path: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || matches!(c, '_' | ':' | '{'))
                .collect();
            found.push(path);
        }
    }
    found
}

/// The paths in `code` (a file under `src/core/`, its tests included) that leave `crate::core`:
/// into a vendor, or to anything `lib.rs` re-exports, which may be a vendor's.
fn leaving_core(code: &str) -> Vec<String> {
    let mut leaving: Vec<String> = paths_after_crate(code)
        .into_iter()
        .filter(|path| !path.starts_with("core::"))
        .collect();
    for line in code.lines() {
        let line = line.trim_start();
        if !line.starts_with("//") && line.contains("vendors::") && !line.contains("crate::") {
            leaving.push(line.to_owned());
        }
    }
    leaving
}

/// Every file under `src/core/`.
fn core_files() -> Vec<PathBuf> {
    let core = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src")
        .join("core");
    let mut files = Vec::new();
    collect(&core, &mut files);
    assert!(files.len() > 20, "read src/core/: {files:?}");
    files
}

#[test]
fn core_imports_no_vendor() {
    let files = core_files();
    let mut found = Vec::new();
    for file in &files {
        let text = fs::read_to_string(file).expect("a source file");
        for path in leaving_core(&text) {
            found.push(format!("{}: {path}", file.display()));
        }
    }
    assert!(
        found.is_empty(),
        "core/ names no vendor and reaches nothing outside crate::core:\n{}",
        found.join("\n")
    );
}

/// Words that belong to one vendor: Hodoflow's name for its routes with a window of their own.
const VENDOR_WORDS: &[&str] = &["trigger"];

#[test]
fn core_speaks_no_vendor_s_words() {
    let files = core_files();
    let mut found = BTreeMap::<&str, Vec<String>>::new();
    for file in &files {
        let text = fs::read_to_string(file)
            .expect("a source file")
            .to_lowercase();
        for word in VENDOR_WORDS {
            let count = text.matches(word).count();
            if count > 0 {
                found
                    .entry(word)
                    .or_default()
                    .push(format!("{} ({count})", file.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "core/ speaks a vendor's words (a route with a window of its own is a route): {found:?}"
    );
}

#[test]
fn the_core_check_sees_a_vendor_import_and_a_re_export() {
    let vendor = "use crate::vendors::hodoflow::tables::WEBHOOKS_PREFIX;";
    let re_exported = "    let surface = crate::Surface::Webhook;";
    let relative = "use super::super::vendors::Surface;";
    let fine = "use crate::core::error::{Error, Result};\n// crate::vendors in a comment\n\
                \"see [`Budget`](crate::Budget)\"";
    assert_eq!(
        leaving_core(vendor),
        ["vendors::hodoflow::tables::WEBHOOKS_PREFIX"]
    );
    assert_eq!(leaving_core(re_exported), ["Surface::Webhook"]);
    assert_eq!(leaving_core(relative).len(), 1);
    assert!(leaving_core(fine).is_empty());
}

/// The strongly connected components of more than one module (Tarjan's algorithm), each sorted.
fn circles(
    modules: &BTreeSet<String>,
    edges: &BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
) -> Vec<Vec<String>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }

    impl<'a> Walk<'a> {
        fn visit(&mut self, module: &'a str) {
            let number = self.index.len();
            self.index.insert(module, number);
            self.low.insert(module, number);
            self.stack.push(module);
            self.on_stack.insert(module);
            if let Some(targets) = self.edges.get(module) {
                for target in targets.keys() {
                    let target = target.as_str();
                    if !self.index.contains_key(target) {
                        self.visit(target);
                        let low = self.low[module].min(self.low[target]);
                        self.low.insert(module, low);
                    } else if self.on_stack.contains(target) {
                        let low = self.low[module].min(self.index[target]);
                        self.low.insert(module, low);
                    }
                }
            }
            if self.low[module] == self.index[module] {
                let mut component = Vec::new();
                while let Some(top) = self.stack.pop() {
                    self.on_stack.remove(top);
                    component.push(top.to_owned());
                    if top == module {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }

    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for module in modules {
        if !walk.index.contains_key(module.as_str()) {
            walk.visit(module);
        }
    }
    walk.found
}

/// The public API of the SDK and the outbox, one path a line: `docs/public-api.txt`. Every
/// change to what either crate exports (`pub use` and `pub` items of `lib.rs` and of its public
/// modules) changes this test's
/// answer, so it is made on purpose, with the listing, in the same change.
#[test]
fn the_public_api_is_the_checked_in_listing() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut exported = BTreeSet::new();
    public_items(&root.join("src"), "lib.rs", "hodoflow_retry", &mut exported);
    let outbox = root.join("crates/hodoflow-outbox/src");
    public_items(&outbox, "lib.rs", "hodoflow_outbox", &mut exported);
    assert!(
        exported.contains("hodoflow_retry::HodoflowClient")
            && exported.contains("hodoflow_outbox::Outbox")
            && exported.contains("hodoflow_retry::metrics::Metrics"),
        "read the exports of src/ and the outbox's: {exported:?}"
    );
    let listing = root.join("docs/public-api.txt");
    let text = fs::read_to_string(&listing).unwrap_or_default();
    let listed: BTreeSet<String> = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(str::to_owned)
        .collect();
    let added: Vec<_> = exported.difference(&listed).collect();
    let removed: Vec<_> = listed.difference(&exported).collect();
    let at_root = exported
        .iter()
        .filter(|path| path.matches("::").count() == 1)
        .count();
    println!(
        "{} public paths, {at_root} at the crate root",
        exported.len()
    );
    assert!(
        added.is_empty() && removed.is_empty(),
        "the public API changed: exported but not in docs/public-api.txt: {added:?}; listed but \
         no longer exported: {removed:?}. If that is meant, update the listing in the same change."
    );
}

/// The public items of the module in `file` (relative to `src`), as `prefix::Name`, and those
/// of its public submodules, recursively; a `#[doc(hidden)]` module is left out.
fn public_items(src: &Path, file: &str, prefix: &str, out: &mut BTreeSet<String>) {
    let path = src.join(file);
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let code = without_tests(&text);
    let dir = Path::new(file).parent().unwrap_or(Path::new(""));
    let mut hidden = false;
    let mut statement = String::new();
    // Inside an inline `pub mod name { … }`: its path; its items are read one level in.
    let mut inline: Option<String> = None;
    for line in code.lines() {
        let (line, prefix) = match &inline {
            Some(_) if line == "}" => {
                inline = None;
                continue;
            }
            Some(module) => (line.strip_prefix("    ").unwrap_or(line), module.as_str()),
            None => (line, prefix),
        };
        let trimmed = line.trim_start();
        if line.starts_with("#[doc(hidden)]") {
            hidden = true;
            continue;
        }
        if !statement.is_empty() {
            statement.push(' ');
            statement.push_str(trimmed);
            if trimmed.contains(';') {
                exported_names(&statement, prefix, out);
                statement.clear();
            }
            continue;
        }
        // Top level only: an item of the module itself, not of a block or an impl.
        if line.starts_with("pub use ") {
            if line.contains(';') {
                exported_names(line, prefix, out);
            } else {
                statement = line.to_owned();
            }
        } else if let Some(rest) = line.strip_prefix("pub mod ") {
            let name = rest.trim_end_matches(';').trim();
            if let Some(name) = rest.strip_suffix(" {").filter(|_| !hidden) {
                out.insert(format!("{prefix}::{name}"));
                inline = Some(format!("{prefix}::{name}"));
            } else if !hidden && rest.ends_with(';') {
                out.insert(format!("{prefix}::{name}"));
                let own = dir.join(format!("{name}.rs"));
                let folder = dir.join(name).join("mod.rs");
                let next = if src.join(&own).exists() { own } else { folder };
                public_items(
                    src,
                    &next.display().to_string(),
                    &format!("{prefix}::{name}"),
                    out,
                );
            }
        } else if let Some(rest) = line.strip_prefix("pub ") {
            for kind in [
                "struct ",
                "enum ",
                "trait ",
                "fn ",
                "const ",
                "static ",
                "type ",
                "async fn ",
            ] {
                if let Some(item) = rest.strip_prefix(kind) {
                    let name: String = item
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    out.insert(format!("{prefix}::{name}"));
                }
            }
        }
        if !trimmed.starts_with("#[") {
            hidden = false;
        }
    }
}

/// The names a `pub use …;` statement exports: the last segment of each path, or its alias.
fn exported_names(statement: &str, prefix: &str, out: &mut BTreeSet<String>) {
    let body = statement
        .trim()
        .trim_start_matches("pub use ")
        .trim_end_matches(';');
    assert!(
        !body.contains('*'),
        "a glob export hides what is public: {statement}"
    );
    let names = match (body.find('{'), body.rfind('}')) {
        (Some(open), Some(close)) => body[open + 1..close].to_owned(),
        _ => body.to_owned(),
    };
    for name in names
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
    {
        let name = match name.split_once(" as ") {
            Some((_, alias)) => alias.trim(),
            None => name.rsplit("::").next().unwrap_or(name),
        };
        out.insert(format!("{prefix}::{name}"));
    }
}

/// `text` up to its `#[cfg(test)] mod tests`, which exports nothing.
fn without_tests(text: &str) -> &str {
    text.find("#[cfg(test)]\nmod tests")
        .map_or(text, |at| &text[..at])
}

#[test]
fn the_api_reader_sees_uses_aliases_modules_and_items() {
    let mut out = BTreeSet::new();
    exported_names("pub use a::b::{C, D as E, f::G};", "x", &mut out);
    exported_names("pub use a::H;", "x", &mut out);
    assert_eq!(
        out.into_iter().collect::<Vec<_>>(),
        ["x::C", "x::E", "x::G", "x::H"]
    );
}
