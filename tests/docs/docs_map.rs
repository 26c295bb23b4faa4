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
//! Where a line of the map names a function for a file, the file must have
//! it: `name()` is a function of the file itself (a `fn name` in it), and
//! `module::name` (a path under `src/`, such as `admission::decide`) is a
//! function the file goes through: the module's file has a `fn name` (or
//! re-exports it from `module/name.rs`), and the file's code (comments
//! aside) uses `name`. A path whose first part is
//! not a module of `src/` names another crate and is not checked.
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
    map_rows(markdown).map(|rows| rows.into_iter().map(|(path, _)| path).collect())
}

/// The map's rows in order: each path with its description (the rest of
/// its line and the indented lines after it, joined by spaces).
fn map_rows(markdown: &str) -> Result<Vec<(String, String)>, String> {
    let mut lines = markdown.lines();
    lines
        .by_ref()
        .find(|line| line.trim_end() == MAP_HEADING)
        .ok_or_else(|| format!("{MAP_FILE} has no `{MAP_HEADING}` heading"))?;
    let mut rows: Vec<(String, String)> = Vec::new();
    let mut inside = false;
    for line in lines {
        if line.starts_with("## ") && !inside {
            break;
        }
        if line.trim_start().starts_with("```") {
            if inside {
                return Ok(rows);
            }
            inside = true;
            continue;
        }
        if !inside {
            continue;
        }
        if line.starts_with(char::is_whitespace) {
            if let Some((_, description)) = rows.last_mut() {
                description.push(' ');
                description.push_str(line.trim());
            }
            continue;
        }
        let mut words = line.splitn(2, char::is_whitespace);
        if let Some(path) = words.next().filter(|p| !p.is_empty()) {
            let description = words.next().unwrap_or("").trim().to_string();
            rows.push((path.to_string(), description));
        }
    }
    Err(format!(
        "no complete code block under `{MAP_HEADING}` in {MAP_FILE}"
    ))
}

/// A function a description names for its file.
#[derive(Debug, PartialEq)]
enum Named {
    /// `name()`: the file's own.
    Own(String),
    /// `module::name`: a function of `src/module` that the file goes through.
    Through(Vec<String>, String),
}

/// Whether `word` is a Rust name in snake case (a function's or a module's).
fn snake_case(word: &str) -> bool {
    word.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && word
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// The functions `description` names: `name()` and `module::name`.
fn named_functions(description: &str) -> Vec<Named> {
    let is_name_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut named = Vec::new();
    let mut rest = description;
    while let Some(start) = rest.find(is_name_char) {
        let after = &rest[start..];
        let end = after
            .find(|c: char| !is_name_char(c))
            .unwrap_or(after.len());
        let word = after[..end].trim_matches(':');
        let called = after[end..].starts_with("()");
        let parts: Vec<&str> = word.split("::").collect();
        if parts.iter().all(|p| snake_case(p)) {
            match parts.as_slice() {
                [name] if called => named.push(Named::Own((*name).to_string())),
                [module @ .., name] if !module.is_empty() => named.push(Named::Through(
                    module.iter().map(|m| (*m).to_string()).collect(),
                    (*name).to_string(),
                )),
                _ => {}
            }
        }
        rest = &after[end..];
    }
    named
}

/// Whether the Rust source `code` defines a function `name`.
fn defines(code: &str, name: &str) -> bool {
    code.match_indices(&format!("fn {name}"))
        .any(|(at, found)| {
            code[at + found.len()..].starts_with(['(', '<'])
                && (at == 0
                    || !code[..at].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_'))
        })
}

/// Whether `code` uses the word `name` outside its comments.
fn uses(code: &str, name: &str) -> bool {
    let word_char = |c: char| c.is_ascii_alphanumeric() || c == '_';
    code.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .any(|line| {
            line.match_indices(name).any(|(at, _)| {
                !line[..at].ends_with(word_char) && !line[at + name.len()..].starts_with(word_char)
            })
        })
}

/// What the map says of its files' functions that is not so: for each row
/// naming a function for a file, the file and what is wrong. `read` gives
/// the text of a repository file, `None` when there is none.
fn wrong_functions(
    rows: &[(String, String)],
    read: impl Fn(&str) -> Option<String>,
) -> Vec<String> {
    let mut wrong = Vec::new();
    for (path, description) in rows.iter().filter(|(p, _)| p.ends_with(".rs")) {
        let named = named_functions(description);
        if named.is_empty() {
            continue;
        }
        let Some(code) = read(path) else { continue };
        for function in named {
            match function {
                Named::Own(name) if !defines(&code, &name) => {
                    wrong.push(format!("{path}: names {name}(), but has no `fn {name}`"));
                }
                Named::Own(_) => {}
                Named::Through(module, name) => {
                    let dir = format!("src/{}", module.join("/"));
                    let Some(module_code) =
                        read(&format!("{dir}.rs")).or_else(|| read(&format!("{dir}/mod.rs")))
                    else {
                        if read(&format!("src/{}.rs", module[0]))
                            .or_else(|| read(&format!("src/{}/mod.rs", module[0])))
                            .is_some()
                        {
                            wrong.push(format!(
                                "{path}: names {}::{name}, but src/ has no module {}",
                                module.join("::"),
                                module.join("::")
                            ));
                        }
                        continue;
                    };
                    let full = format!("{}::{name}", module.join("::"));
                    // Defined there, or in a file of its own that the module re-exports.
                    let own_file = read(&format!("{dir}/{name}.rs"));
                    let defined = defines(&module_code, &name)
                        || (own_file.is_some_and(|f| defines(&f, &name))
                            && uses(&module_code, &name));
                    if !defined {
                        wrong.push(format!(
                            "{path}: names {full}, but {dir} has no `fn {name}`"
                        ));
                    } else if !uses(&code, &name) {
                        wrong.push(format!(
                            "{path}: says it goes through {full}, but its code never uses `{name}`"
                        ));
                    }
                }
            }
        }
    }
    wrong
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
fn every_function_the_map_names_for_a_file_is_there() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let markdown = fs::read_to_string(root.join(MAP_FILE)).expect("read docs/development.md");
    let rows = map_rows(&markdown).unwrap_or_else(|e| panic!("{e}"));
    let checked = rows
        .iter()
        .filter(|(_, d)| !named_functions(d).is_empty())
        .count();
    assert!(
        checked > 0,
        "no row of the map names a function: is {MAP_FILE} still read?"
    );
    let wrong = wrong_functions(&rows, |path| fs::read_to_string(root.join(path)).ok());
    assert!(
        wrong.is_empty(),
        "the `{MAP_HEADING}` block in {MAP_FILE} names functions that are not so ({}); \
         fix the description or the code:\n  {}",
        wrong.len(),
        wrong.join("\n  ")
    );
}

#[test]
fn the_function_check_reads_both_forms_and_names_each_wrong_one() {
    let markdown = "## Project layout\n\n```\n\
        src/a.rs        run() and go(), through b::c::answer and kube::api, not Type() nor list::\n\
        \x20               wrapped: step() and b::c::decide\n\
        src/d.rs        uses b::gone, b::helper and nothing::here\n\
        src/e/          a directory's run() is not read\n\
        ```\n";
    let rows = map_rows(markdown).unwrap();
    assert_eq!(rows[0].0, "src/a.rs");
    assert_eq!(
        named_functions(&rows[0].1),
        [
            Named::Own("run".into()),
            Named::Own("go".into()),
            Named::Through(vec!["b".into(), "c".into()], "answer".into()),
            Named::Through(vec!["kube".into()], "api".into()),
            Named::Own("step".into()),
            Named::Through(vec!["b".into(), "c".into()], "decide".into()),
        ]
    );
    let files = |path: &str| -> Option<String> {
        let text = match path {
            "src/a.rs" => {
                "pub async fn run<P>() {}\n// answer() in a comment is no use\nfn stepping() {}\nlet x = c::decide(1);\nfn go() {}"
            }
            "src/b/c.rs" => "pub fn answer() {}\npub(crate) fn decide() {}",
            "src/b/mod.rs" => "pub mod c;\nmod helper;\npub use helper::helper;",
            "src/b/helper.rs" => "pub fn helper() {}",
            "src/d.rs" => "b::gone();\nb::helper();",
            _ => return None,
        };
        Some(text.to_string())
    };
    assert_eq!(
        wrong_functions(&rows, files),
        [
            "src/a.rs: says it goes through b::c::answer, but its code never uses `answer`",
            "src/a.rs: names step(), but has no `fn step`",
            "src/d.rs: names b::gone, but src/b has no `fn gone`",
        ]
    );
}

#[test]
fn every_path_named_in_docs_development_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let markdown = fs::read_to_string(root.join(MAP_FILE)).expect("read docs/development.md");
    let named = named_paths(&markdown);
    assert!(
        named.iter().any(|(_, p)| p == "tests/docs/docs_map.rs"),
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
        Run `cargo test --test docs` on `tests/docs/docs_map.rs`, and see\n\
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
            (4, "tests/docs/docs_map.rs"),
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
