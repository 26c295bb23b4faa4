//! The work tree the generator reads and writes, and what it writes.

use std::path::PathBuf;

use crate::error::Error;

/// A file the generator writes: its path below the repository's root and
/// its whole text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generated {
    /// Relative to the repository's root, with `/` separators.
    pub path: String,
    /// The file's contents.
    pub text: String,
}

/// The repository's root (the parent of `xtask/`).
#[derive(Debug, Clone)]
pub struct Repository {
    root: PathBuf,
}

impl Repository {
    /// The repository this xtask was built from.
    pub fn locate() -> Self {
        let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let root = manifest.parent().map_or(manifest.clone(), PathBuf::from);
        Self { root }
    }

    /// The absolute path of `path` (relative to the root).
    pub fn path(&self, path: &str) -> PathBuf {
        self.root.join(path)
    }

    /// The text of `path`.
    pub fn read(&self, path: &str) -> Result<String, Error> {
        std::fs::read_to_string(self.path(path)).map_err(|source| Error::Read {
            path: path.to_owned(),
            source,
        })
    }

    /// Writes `file` unless it already holds that text; says whether it
    /// wrote.
    pub fn write_if_changed(&self, file: &Generated) -> Result<bool, Error> {
        if self.read(&file.path).is_ok_and(|text| text == file.text) {
            return Ok(false);
        }
        std::fs::write(self.path(&file.path), &file.text).map_err(|source| Error::Write {
            path: file.path.clone(),
            source,
        })?;
        Ok(true)
    }
}
