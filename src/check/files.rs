//! Finding and reading the files to check: files, directories (read
//! recursively) and standard input.
//!
//! A directory walk stays inside the directory it was given: a symbolic
//! link whose target lies outside it is reported, not read (name the target
//! itself to check it). No file or input larger than [`MAX_FILE_BYTES`] is
//! read.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use super::documents;
use super::input::{Inputs, Item, Location, Problem, read_text};

/// The name standard input is reported under.
pub const STDIN: &str = "<stdin>";

/// The extensions read when walking a directory.
pub const EXTENSIONS: [&str; 3] = ["yaml", "yml", "json"];

/// The largest file (or standard input) `check` reads: far above any
/// manifest, small enough that a wrong path (a disk image, a log) is
/// refused rather than read into memory.
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// Why a file cannot be read as manifests; the message is what `check`
/// reports for it.
#[derive(Debug, thiserror::Error)]
enum FileError {
    #[error("cannot read the file: {0}; check the path")]
    Unreadable(#[from] std::io::Error),
    #[error(
        "the file is {0} bytes, more than the {MAX_FILE_BYTES} bytes check reads: check the path, or split the manifests into smaller files"
    )]
    TooLarge(u64),
    #[error("not UTF-8 text (invalid byte at offset {0}): save the manifest as UTF-8")]
    NotUtf8(usize),
}

/// Reads every path: files, directories (recursively, `.yaml`, `.yml` and
/// `.json`, sorted, hidden entries skipped) and `-` for standard input;
/// warns of directories that hold no such files.
pub fn read_paths(paths: &[String]) -> Inputs {
    let mut inputs = Inputs::default();
    let mut stdin_read = false;
    for path in paths {
        if path == "-" {
            inputs.files += 1;
            if stdin_read {
                let message =
                    "standard input (-) was given more than once; it can be read only once";
                problem(&mut inputs, STDIN, message.into());
            } else {
                stdin_read = true;
                read_stdin(&mut inputs);
            }
            continue;
        }
        let mut files = Vec::new();
        let path = Path::new(path);
        if path.is_dir() {
            let root = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
            if let Err(problem) = walk(&root, path, &mut files, &mut inputs) {
                inputs.files += 1;
                inputs.items.push(Item::Problem(problem));
            }
            files.sort();
            if files.is_empty() {
                inputs.empty_dirs.push(path.display().to_string());
            }
        } else {
            files.push(path.to_path_buf());
        }
        for file in files {
            inputs.files += 1;
            read_file(&mut inputs, &file);
        }
    }
    for dir in &inputs.empty_dirs {
        eprintln!(
            "warning: {dir} holds no .yaml, .yml or .json files (hidden files and directories are skipped)"
        );
    }
    inputs
}

fn problem(inputs: &mut Inputs, file: &str, message: String) {
    inputs.items.push(Item::Problem(Problem {
        location: Location::file(file),
        message,
    }));
}

fn read_stdin(inputs: &mut Inputs) {
    let mut text = String::new();
    let read = std::io::stdin()
        .take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut text);
    if text.len() as u64 > MAX_FILE_BYTES {
        let message = format!(
            "standard input holds more than the {MAX_FILE_BYTES} bytes check reads: check the manifests in smaller parts"
        );
        problem(inputs, STDIN, message);
        return;
    }
    match read {
        // Empty input most likely means the command before the pipe
        // failed, which `sh` without pipefail would hide.
        Ok(_) if documents::split_yaml(&text).is_empty() => problem(
            inputs,
            STDIN,
            "standard input holds no documents: did the command before the pipe fail?".into(),
        ),
        Ok(_) => read_text(inputs, STDIN, &text, false),
        Err(e) => problem(inputs, STDIN, format!("cannot read standard input: {e}")),
    }
}

/// Collects the files below `dir` (inside the canonical `root`); links that
/// lead outside `root` are reported in `inputs` and skipped.
fn walk(
    root: &Path,
    dir: &Path,
    files: &mut Vec<PathBuf>,
    inputs: &mut Inputs,
) -> Result<(), Problem> {
    let unreadable = |e: std::io::Error| Problem {
        location: Location::file(&dir.display().to_string()),
        message: format!("cannot read directory: {e}"),
    };
    for entry in std::fs::read_dir(dir).map_err(unreadable)? {
        let entry = entry.map_err(unreadable)?;
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        // Symbolic links to directories are not followed (no loops).
        let file_type = entry.file_type().map_err(unreadable)?;
        if file_type.is_dir() {
            walk(root, &path, files, inputs)?;
        } else if file_type.is_symlink()
            && let Some(outside) = path.canonicalize().ok().filter(|t| !t.starts_with(root))
        {
            inputs.files += 1;
            let message = format!(
                "a symbolic link to {}, outside the directory given; not read (name that file to check it)",
                outside.display()
            );
            problem(inputs, &path.display().to_string(), message);
        } else if path.is_file()
            && path.extension().is_some_and(|ext| {
                EXTENSIONS
                    .iter()
                    .any(|known| ext.eq_ignore_ascii_case(known))
            })
        {
            files.push(path);
        }
    }
    Ok(())
}

/// Reads at most [`MAX_FILE_BYTES`] of `path`, or says why not.
fn read_bounded(path: &Path) -> Result<Vec<u8>, FileError> {
    let file = std::fs::File::open(path)?;
    let announced = file.metadata()?.len();
    if announced > MAX_FILE_BYTES {
        return Err(FileError::TooLarge(announced));
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    match bytes.len() as u64 {
        n if n > MAX_FILE_BYTES => Err(FileError::TooLarge(n)),
        _ => Ok(bytes),
    }
}

fn read_file(inputs: &mut Inputs, path: &Path) {
    let name = path.display().to_string();
    let text = read_bounded(path).and_then(|bytes| {
        String::from_utf8(bytes).map_err(|e| FileError::NotUtf8(e.utf8_error().valid_up_to()))
    });
    match text {
        Ok(text) => {
            let json_only = path
                .extension()
                .is_some_and(|ext| ext.eq_ignore_ascii_case("json"));
            read_text(inputs, &name, &text, json_only);
        }
        Err(error) => problem(inputs, &name, error.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_are_walked_sorted_skipping_hidden_and_other_files() {
        let dir = tempfile::tempdir().expect("dir");
        let root = dir.path();
        let pr = |name: &str| {
            format!(
                "apiVersion: numaplane.numaproj.io/v1alpha1\nkind: PipelineRollout\nmetadata: {{name: {name}}}\n"
            )
        };
        for (path, text) in [
            ("b.yaml", pr("b")),
            ("a/c.YML", format!("{}---\nkind: ConfigMap\n", pr("c"))),
            ("a/d.json", "{\"kind\": \"Secret\"}".to_owned()),
            ("a/b/e.yml", pr("e")),
            (".hidden/x.yaml", "bad: [\n".to_owned()),
            (".x.yaml", "bad: [\n".to_owned()),
            ("notes.txt", "bad: [\n".to_owned()),
        ] {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, text).expect("write");
        }
        let inputs = read_paths(&[root.display().to_string()]);
        assert_eq!((inputs.files, inputs.skipped), (4, 2));
        let names: Vec<&str> = inputs
            .items
            .iter()
            .filter_map(|item| match item {
                Item::Rollout(m) => m.object["metadata"]["name"].as_str(),
                Item::Problem(_) => None,
            })
            .collect();
        // Sorted by path: a/b/e.yml, a/c.YML, (a/d.json), b.yaml.
        assert_eq!(names, ["e", "c", "b"]);
        assert_eq!(inputs.items.len(), 3, "{:?}", inputs.items);

        let empty = tempfile::tempdir().expect("dir");
        let inputs = read_paths(&[empty.path().display().to_string()]);
        assert_eq!(inputs.files, 0);
        assert_eq!(inputs.empty_dirs.len(), 1);

        // A file named explicitly is read whatever its extension.
        let inputs = read_paths(&[root.join("notes.txt").display().to_string()]);
        assert!(matches!(&inputs.items[..], [Item::Problem(p)] if p.location.line == Some(1)));
    }

    fn problems(inputs: &Inputs) -> Vec<String> {
        inputs
            .items
            .iter()
            .filter_map(|item| match item {
                Item::Problem(p) => Some(p.message.clone()),
                Item::Rollout(_) => None,
            })
            .collect()
    }

    #[test]
    fn a_walk_reads_no_link_that_leads_outside_the_directory() {
        let outside = tempfile::tempdir().expect("dir");
        let secret = outside.path().join("secret.yaml");
        std::fs::write(&secret, "kind: Secret\n").expect("write");
        let tree = tempfile::tempdir().expect("dir");
        let root = tree.path();
        std::fs::write(root.join("real.yaml"), "kind: ConfigMap\n").expect("write");
        std::os::unix::fs::symlink(&secret, root.join("escape.yaml")).expect("link");
        std::os::unix::fs::symlink(root.join("real.yaml"), root.join("inside.yaml")).expect("link");
        let inputs = read_paths(&[root.display().to_string()]);
        let found = problems(&inputs);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("a symbolic link to")
                && found[0].contains("outside the directory given"),
            "{found:?}"
        );
        assert_eq!(
            inputs.skipped, 2,
            "the link inside the tree is read: {inputs:?}"
        );
        // Named on its own, the link is followed: the user asked for it.
        let named = read_paths(&[root.join("escape.yaml").display().to_string()]);
        assert!(problems(&named).is_empty(), "{named:?}");
    }

    #[test]
    fn a_file_above_the_limit_is_refused_unread() {
        let dir = tempfile::tempdir().expect("dir");
        let big = dir.path().join("big.yaml");
        let file = std::fs::File::create(&big).expect("create");
        file.set_len(MAX_FILE_BYTES + 1).expect("grow");
        let inputs = read_paths(&[big.display().to_string()]);
        let found = problems(&inputs);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains(&format!("more than the {MAX_FILE_BYTES} bytes check reads")),
            "{found:?}"
        );
    }
}
