//! Records the git commit the webhook is built from, for `--version`.
//!
//! The commit comes from the environment variable
//! `PIPELINEROLLOUT_WEBHOOK_COMMIT` when it is set (a build whose sources
//! carry no `.git`, such as the Dockerfile's, whose `.dockerignore` leaves
//! it out: the Dockerfile sets it from the build argument `GIT_COMMIT`);
//! otherwise from `git rev-parse HEAD` in the repository this crate is the
//! root of; otherwise it is `unknown`. The binary gets it as the
//! compile-time variable of the same name.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The variable that names the commit, read here and written for rustc.
const COMMIT: &str = "PIPELINEROLLOUT_WEBHOOK_COMMIT";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed={COMMIT}");
    let given = std::env::var(COMMIT)
        .ok()
        .map(|value| value.trim().to_owned())
        .filter(|value| !value.is_empty());
    let commit = match given {
        Some(value) => value,
        None => {
            let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
            from_git(&root).unwrap_or_else(|| "unknown".to_owned())
        }
    };
    println!("cargo:rustc-env={COMMIT}={commit}");
}

/// The commit checked out in `root`, when `root` is the top of a git work
/// tree; and tells cargo to run this script again when HEAD moves.
fn from_git(root: &Path) -> Option<String> {
    let top = git(root, &["rev-parse", "--show-toplevel"])?;
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if !same(Path::new(&top), root) {
        // Sources inside some other repository: its commit is not ours.
        return None;
    }
    let commit = git(root, &["rev-parse", "--verify", "HEAD"])?;
    // What changes when HEAD moves: HEAD itself (a checkout), its reflog
    // (every commit, reset or checkout of this work tree), the branch's
    // loose ref and the packed refs. Only files that exist are named: a
    // missing one would make cargo run this script on every build.
    let mut watched = vec!["HEAD".to_owned(), "logs/HEAD".to_owned()];
    if let Some(branch) = git(root, &["symbolic-ref", "-q", "HEAD"]) {
        watched.push(branch);
    }
    watched.push("packed-refs".to_owned());
    for name in watched {
        if let Some(path) = git(root, &["rev-parse", "--git-path", &name]) {
            let path = root.join(path);
            if path.is_file() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
    Some(commit)
}

/// The trimmed output of `git ARGS` run in `dir`, when it succeeds and
/// prints something.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?.trim().to_owned();
    (!text.is_empty()).then_some(text)
}
