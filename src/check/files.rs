//! Finding and reading the files to check: files, directories (read
//! recursively) and standard input.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use super::documents;
use super::input::{Inputs, Item, Location, Problem, read_text};

/// The name standard input is reported under.
pub const STDIN: &str = "<stdin>";

/// The extensions read when walking a directory.
pub const EXTENSIONS: [&str; 3] = ["yaml", "yml", "json"];

/// Reads every path: files, directories (recursively, `.yaml`, `.yml` and
/// `.json`, sorted, hidden entries skipped) and `-` for standard input.
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
            if let Err(problem) = walk(path, &mut files) {
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
    match std::io::stdin().read_to_string(&mut text) {
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

fn walk(dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), Problem> {
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
            walk(&path, files)?;
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

fn read_file(inputs: &mut Inputs, path: &Path) {
    let name = path.display().to_string();
    let text = std::fs::read(path)
        .map_err(|e| format!("cannot read the file: {e}; check the path"))
        .and_then(|bytes| {
            String::from_utf8(bytes).map_err(|e| {
                format!(
                    "not UTF-8 text (invalid byte at offset {}): save the manifest as UTF-8",
                    e.utf8_error().valid_up_to()
                )
            })
        });
    match text {
        Ok(text) => {
            let json_only = path
                .extension()
                .is_some_and(|ext| ext.eq_ignore_ascii_case("json"));
            read_text(inputs, &name, &text, json_only);
        }
        Err(message) => problem(inputs, &name, message),
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
}
