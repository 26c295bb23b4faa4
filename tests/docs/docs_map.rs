//! docs/development.md against the tree: its code map, and every other
//! repository path it names.
//!
//! The map is the code block under "Project layout". Every line of it that
//! starts at the first column names a path as its first word; the rest of
//! the line, and indented lines, are description. A path ending in `/` is a
//! directory and covers everything below it. Every file under `src/`,
//! `tests/` and each top-level directory holding a `Cargo.toml` (a
//! workspace crate) must be covered, and every path the map names must
//! exist.
//!
//! Anywhere on the page, a word in code (an inline code span or a fenced
//! block, the map's descriptions among them) that starts with one of the
//! repository's top-level directories (`PATH_ROOTS`) names a path, which
//! must exist: a directory when it ends in `/`, a file or a directory
//! otherwise. A word with a wildcard or a placeholder (`bench/*.sh`,
//! `<name>`) names the directory before it.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

const MAP_FILE: &str = "docs/development.md";
const MAP_HEADING: &str = "## Project layout";

/// The top-level directories whose paths the page names.
const PATH_ROOTS: &[&str] = &[
    ".ci/",
    "bench/",
    "benches/",
    "certs/",
    "charts/",
    "docs/",
    "envtest/",
    "image/",
    "manifests/",
    "src/",
    "test-builders/",
    "tests/",
    "xtask/",
];

/// Characters that end a path inside a word of code.
const NOT_IN_A_PATH: &[char] = &[
    '`', '(', ')', ',', ';', ':', '"', '\'', '=', '|', '#', '[', ']',
];

/// Characters that make a word a pattern or a placeholder, not one path.
const WILDCARDS: &[char] = &['*', '?', '<', '>', '{', '}'];

/// The paths the map names, in its order.
fn map_entries(markdown: &str) -> Result<Vec<String>, String> {
    let mut lines = markdown.lines();
    lines
        .by_ref()
        .find(|line| line.trim_end() == MAP_HEADING)
        .ok_or_else(|| format!("{MAP_FILE} has no `{MAP_HEADING}` heading"))?;
    let mut entries = Vec::new();
    let mut inside = false;
    for line in lines {
        if line.starts_with("## ") && !inside {
            break;
        }
        if line.trim_start().starts_with("```") {
            if inside {
                return Ok(entries);
            }
            inside = true;
            continue;
        }
        if !inside || line.starts_with(char::is_whitespace) {
            continue;
        }
        if let Some(path) = line.split_whitespace().next() {
            entries.push(path.to_string());
        }
    }
    Err(format!(
        "no complete code block under `{MAP_HEADING}` in {MAP_FILE}"
    ))
}

/// The roots whose every file the map must cover: `src/`, `tests/`, and
/// each top-level directory with a `Cargo.toml`.
fn covered_roots(root: &Path) -> Vec<String> {
    let mut roots = vec!["src".to_string(), "tests".to_string()];
    let mut crates: Vec<String> = fs::read_dir(root)
        .expect("read the repository root")
        .filter_map(Result::ok)
        .filter(|entry| entry.path().join("Cargo.toml").is_file())
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| name != "target" && !roots.contains(name))
        .collect();
    crates.sort();
    roots.extend(crates);
    roots
}

/// Every file below `dir` (relative to `root`, `/`-separated), leaving out
/// `target/` directories.
fn files_below(root: &Path, dir: &str, out: &mut BTreeSet<String>) {
    let Ok(entries) = fs::read_dir(root.join(dir)) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let path = format!("{dir}/{name}");
        match entry.file_type() {
            Ok(kind) if kind.is_dir() => {
                if name != "target" {
                    files_below(root, &path, out);
                }
            }
            Ok(_) => {
                out.insert(path);
            }
            Err(_) => {}
        }
    }
}

/// What is wrong with the map: files it does not cover, and paths it names
/// that do not exist (`exists(path, is_dir)`).
fn problems(
    entries: &[String],
    files: &BTreeSet<String>,
    exists: impl Fn(&str, bool) -> bool,
) -> (Vec<String>, Vec<String>) {
    let covered = |file: &str| {
        entries.iter().any(|entry| match entry.strip_suffix('/') {
            Some(_) => file.starts_with(entry.as_str()),
            None => file == entry,
        })
    };
    let missing = files.iter().filter(|f| !covered(f)).cloned().collect();
    let gone = entries
        .iter()
        .filter(|entry| match entry.strip_suffix('/') {
            Some(dir) => !exists(dir, true),
            None => !exists(entry, false),
        })
        .cloned()
        .collect();
    (missing, gone)
}

/// The code of `markdown` with the line each piece starts on: every line of
/// a fenced block, and every inline code span (one that runs over a line
/// break is joined with a space; an unclosed one is not code).
fn code_pieces(markdown: &str) -> Vec<(usize, String)> {
    let mut pieces = Vec::new();
    let mut fence: Option<&str> = None;
    // An open inline span: its backtick count, first line and text so far.
    let mut open: Option<(usize, usize, String)> = None;
    for (index, line) in markdown.lines().enumerate() {
        let number = index + 1;
        let trimmed = line.trim_start();
        if let Some(marker) = fence {
            if trimmed.starts_with(marker) {
                fence = None;
            } else {
                pieces.push((number, line.to_string()));
            }
            continue;
        }
        if let Some(marker) = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m)) {
            fence = Some(marker);
            open = None;
            continue;
        }
        if trimmed.is_empty() {
            open = None;
            continue;
        }
        if let Some((_, _, text)) = open.as_mut() {
            text.push(' ');
        }
        let mut rest = line;
        while let Some(at) = rest.find('`') {
            let ticks = rest[at..].len() - rest[at..].trim_start_matches('`').len();
            let before = &rest[..at];
            rest = &rest[at + ticks..];
            match open.take() {
                Some((n, start, mut text)) if n == ticks => {
                    text.push_str(before);
                    pieces.push((start, text));
                }
                Some((n, start, mut text)) => {
                    text.push_str(before);
                    text.push_str(&"`".repeat(ticks));
                    open = Some((n, start, text));
                }
                None => open = Some((ticks, number, String::new())),
            }
        }
        if let Some((_, _, text)) = open.as_mut() {
            text.push_str(rest);
        }
    }
    pieces
}

/// Every repository path `markdown` names in code, with its line: the
/// words that start with one of `PATH_ROOTS`, cut at a wildcard or a
/// placeholder to the directory before it.
fn named_paths(markdown: &str) -> Vec<(usize, String)> {
    let mut paths = Vec::new();
    for (line, code) in code_pieces(markdown) {
        let words = code.split(|c: char| c.is_whitespace() || NOT_IN_A_PATH.contains(&c));
        for word in words {
            let word = word.trim_start_matches("./").trim_end_matches('.');
            if !PATH_ROOTS.iter().any(|root| word.starts_with(root)) {
                continue;
            }
            let path = match word.find(WILDCARDS) {
                Some(at) => match word[..at].rfind('/') {
                    Some(slash) => &word[..=slash],
                    None => continue,
                },
                None => word,
            };
            paths.push((line, path.to_string()));
        }
    }
    paths
}

/// The named paths that do not exist (`exists(path, is_dir)`): a path
/// ending in `/` must be a directory.
fn stale_paths(
    named: &[(usize, String)],
    exists: impl Fn(&str, bool) -> bool,
) -> Vec<(usize, String)> {
    named
        .iter()
        .filter(|(_, path)| match path.strip_suffix('/') {
            Some(dir) => !exists(dir, true),
            None => !exists(path, false),
        })
        .cloned()
        .collect()
}

#[test]
fn project_layout_in_docs_matches_the_tree() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let markdown = fs::read_to_string(root.join(MAP_FILE)).expect("read docs/development.md");
    let entries = map_entries(&markdown).unwrap_or_else(|e| panic!("{e}"));
    let roots = covered_roots(root);
    let mut files = BTreeSet::new();
    for dir in &roots {
        files_below(root, dir, &mut files);
    }
    assert!(
        files.iter().any(|f| f.starts_with("src/")),
        "no files found under src/: is {} the repository root?",
        root.display()
    );
    let (missing, gone) = problems(&entries, &files, |path, dir| {
        let path = root.join(path);
        if dir { path.is_dir() } else { path.exists() }
    });
    if missing.is_empty() && gone.is_empty() {
        return;
    }
    let mut message = format!(
        "the `{MAP_HEADING}` block in {MAP_FILE} does not match the tree; update it \
         (one line per path, then its description; a path ending in / covers everything below it).\n"
    );
    if !missing.is_empty() {
        message += &format!(
            "\nFiles under {} that the map does not cover ({}):\n",
            roots.join("/, ") + "/",
            missing.len()
        );
        for path in &missing {
            message += &format!("  {path}\n");
        }
    }
    if !gone.is_empty() {
        message += &format!("\nPaths in the map that do not exist ({}):\n", gone.len());
        for path in &gone {
            message += &format!("  {path}\n");
        }
    }
    panic!("{message}");
}

#[test]
fn the_check_reports_every_missing_file_and_every_stale_entry() {
    let markdown = "# Development\n\n## Project layout\n\nText.\n\n```\n\
        src/lib.rs      the library\n\
        \x20               wrapped description, not a path\n\
        src/gone.rs     deleted since\n\
        tests/fixtures/ captured requests\n\
        crate/          a workspace crate\n\
        ```\n\n## Tests\n\n```\nsrc/not_in_the_map.rs\n```\n";
    let entries = map_entries(markdown).unwrap();
    assert_eq!(
        entries,
        ["src/lib.rs", "src/gone.rs", "tests/fixtures/", "crate/"]
    );
    let files: BTreeSet<String> = [
        "src/lib.rs",
        "src/main.rs",
        "src/deep/mod.rs",
        "tests/fixtures/a/b.json",
        "tests/e2e.rs",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    let (missing, gone) = problems(&entries, &files, |path, _| {
        path != "src/gone.rs" && path != "crate"
    });
    assert_eq!(missing, ["src/deep/mod.rs", "src/main.rs", "tests/e2e.rs"]);
    assert_eq!(gone, ["src/gone.rs", "crate/"]);
    assert!(map_entries("## Project layout\n\nno block\n\n## Tests\n").is_err());
}

#[test]
fn every_path_named_in_docs_development_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let markdown = fs::read_to_string(root.join(MAP_FILE)).expect("read docs/development.md");
    let named = named_paths(&markdown);
    assert!(
        named.iter().any(|(_, p)| p == "tests/docs_map.rs"),
        "no paths found in {MAP_FILE}: is its code still read? (found {})",
        named.len()
    );
    let stale = stale_paths(&named, |path, dir| {
        let path = root.join(path);
        if dir { path.is_dir() } else { path.exists() }
    });
    if stale.is_empty() {
        return;
    }
    let mut message = format!(
        "{MAP_FILE} names paths that are not in the tree ({}); fix or remove each \
         (a path ending in / must be a directory):\n",
        stale.len()
    );
    for (line, path) in &stale {
        message += &format!("  line {line}: {path}\n");
    }
    panic!("{message}");
}

#[test]
fn paths_are_found_in_every_kind_of_code_and_the_stale_ones_named() {
    let markdown = "# Page\n\
        \n\
        Prose names src/not_in_code.rs, which is not checked.\n\
        Run `cargo test --test docs_map` on `tests/docs_map.rs`, and see\n\
        ``docs/a `quoted` page.md`` and `bench/*.sh`, `tests/apiserver_<name>.rs`.\n\
        A span over `two\n\
        docs/lines.md` lines; `charts/chart/templates/`, `src/gone.rs:12`,\n\
        `docs/install.md#anchor`, (`manifests/base/`). An unclosed ` src/no.rs\n\
        \n\
        ```sh\n\
        ./bench/load.sh smoke   # see docs/performance.md.\n\
        KEEP=1 cargo run -- review --policy=tests/fixtures/made-up.yaml\n\
        ```\n\
        \n\
        ~~~\n\
        src/lib.rs      the library (see `envtest/src/`)\n\
        ~~~\n";
    let named = named_paths(markdown);
    let expect = |pairs: &[(usize, &str)]| -> Vec<(usize, String)> {
        pairs.iter().map(|(l, p)| (*l, p.to_string())).collect()
    };
    assert_eq!(
        named,
        expect(&[
            (4, "tests/docs_map.rs"),
            (5, "docs/a"),
            (5, "bench/"),
            (5, "tests/"),
            (6, "docs/lines.md"),
            (7, "charts/chart/templates/"),
            (7, "src/gone.rs"),
            (8, "docs/install.md"),
            (8, "manifests/base/"),
            (11, "bench/load.sh"),
            (11, "docs/performance.md"),
            (12, "tests/fixtures/made-up.yaml"),
            (16, "src/lib.rs"),
            (16, "envtest/src/"),
        ])
    );
    // charts/chart/templates is there as a file: a path ending in / must be
    // a directory.
    let stale = stale_paths(&named, |path, dir| match path {
        "src/gone.rs" | "tests/fixtures/made-up.yaml" => false,
        "charts/chart/templates" => !dir,
        _ => true,
    });
    assert_eq!(
        stale,
        expect(&[
            (7, "charts/chart/templates/"),
            (7, "src/gone.rs"),
            (12, "tests/fixtures/made-up.yaml"),
        ])
    );
}
