//! kubectl, run as one of the cluster's users: what people and tools do,
//! with the API server's warnings on stderr.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::user::User;

/// kubectl bound to one user of one cluster.
#[derive(Debug, Clone)]
pub struct Kubectl {
    pub(crate) binary: PathBuf,
    pub(crate) kubeconfig: PathBuf,
    pub(crate) cache_dir: PathBuf,
    pub(crate) user: User,
}

/// What one kubectl run did.
#[derive(Debug, Clone)]
pub struct Output {
    /// The command line, for messages.
    pub command: String,
    /// Whether it exited 0.
    pub success: bool,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error (errors, and `Warning: ...` lines).
    pub stderr: String,
}

impl Output {
    /// This output, after checking the command succeeded.
    #[track_caller]
    pub fn expect_success(self, what: &str) -> Self {
        assert!(self.success, "{what}: expected success, but {self}");
        self
    }

    /// This output, after checking the command failed.
    #[track_caller]
    pub fn expect_failure(self, what: &str) -> Self {
        assert!(!self.success, "{what}: expected a refusal, but {self}");
        self
    }

    /// Standard output as JSON (after `-o json`).
    #[track_caller]
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("output of {} is not JSON ({e}): {}", self.command, self))
    }

    /// The warnings kubectl printed (`Warning: ...` lines on stderr), without
    /// the prefix.
    pub fn warnings(&self) -> Vec<String> {
        self.stderr
            .lines()
            .filter_map(|l| l.strip_prefix("Warning: "))
            .map(str::to_owned)
            .collect()
    }
}

impl std::fmt::Display for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`{}` {}\nstdout: {}\nstderr: {}",
            self.command,
            if self.success { "succeeded" } else { "failed" },
            self.stdout.trim_end(),
            self.stderr.trim_end()
        )
    }
}

impl Kubectl {
    /// The user it acts as.
    pub fn user(&self) -> User {
        self.user
    }

    /// The kubeconfig it uses (a file in the cluster's scratch directory).
    pub fn kubeconfig(&self) -> &std::path::Path {
        &self.kubeconfig
    }

    /// Runs `kubectl ARGS`. Panics only if kubectl cannot be started.
    #[track_caller]
    pub fn run(&self, args: &[&str]) -> Output {
        self.run_with_stdin(args, None)
    }

    /// Runs `kubectl ARGS` with `stdin` as its standard input (for `-f -`).
    #[track_caller]
    pub fn run_with_stdin(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let command = format!("kubectl {} (as {})", args.join(" "), self.user.name());
        let mut child = Command::new(&self.binary)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache_dir)
            .arg("--request-timeout=30s")
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.binary.display()));
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            // kubectl may exit early (a flag error) and close the pipe: its
            // output says why, so a write error is not reported on its own.
            let _ = pipe.write_all(text.as_bytes());
        }
        let out = child
            .wait_with_output()
            .unwrap_or_else(|e| panic!("{command}: {e}"));
        Output {
            command,
            success: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// `kubectl create -f -` of `object` (JSON), `extra` flags appended.
    #[track_caller]
    pub fn create(&self, object: &Value, extra: &[&str]) -> Output {
        let mut args = vec!["create", "-f", "-"];
        args.extend_from_slice(extra);
        self.run_with_stdin(&args, Some(&object.to_string()))
    }

    /// `kubectl get KIND NAME -n NAMESPACE -o json`: `Some(object)`, or
    /// `None` when the API server says NotFound.
    #[track_caller]
    pub fn get(&self, kind: &str, namespace: &str, name: &str) -> Option<Value> {
        let out = self.run(&["get", kind, name, "-n", namespace, "-o", "json"]);
        if out.success {
            Some(out.json())
        } else if out.stderr.contains("NotFound") {
            None
        } else {
            panic!("cannot read {kind} {namespace}/{name}: {out}")
        }
    }

    /// `kubectl patch KIND NAME -n NAMESPACE --type=merge -p PATCH`, `extra`
    /// flags appended.
    #[track_caller]
    pub fn merge_patch(
        &self,
        kind: &str,
        namespace: &str,
        name: &str,
        patch: &Value,
        extra: &[&str],
    ) -> Output {
        let patch = patch.to_string();
        let mut args = vec![
            "patch",
            kind,
            name,
            "-n",
            namespace,
            "--type=merge",
            "-p",
            &patch,
        ];
        args.extend_from_slice(extra);
        self.run(&args)
    }
}
