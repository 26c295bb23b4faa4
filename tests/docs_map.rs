//! The code map in docs/development.md ("Project layout") against the tree.
//!
//! Every line of the map's code block that starts at the first column names
//! a path as its first word; the rest of the line, and indented lines, are
//! description. A path ending in `/` is a directory and covers everything
//! below it. Every file under `src/`, `tests/` and each top-level directory
//! holding a `Cargo.toml` (a workspace crate) must be covered, and every
//! path the map names must exist.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

const MAP_FILE: &str = "docs/development.md";
const MAP_HEADING: &str = "## Project layout";

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
