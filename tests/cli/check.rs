//! `pipelinerollout-webhook check`, run as a CI job runs it, on the
//! manifests in `tests/fixtures/check/` (see the README there): here the
//! repository layout, the requester flags and `--against`; the output
//! formats in `formats.rs`; the kinds of input (bad YAML, standard input,
//! kustomize) in `inputs.rs`.

mod formats;
mod inputs;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

const DENY_ADDED_FORCE: &str =
    "may not set metadata.annotations[\"numaplane.numaproj.io/allow-data-loss\"] to \"true\"";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/check")
}

/// A fixture path, relative to the crate root (as a CI job would name it).
fn fixture(name: &str) -> String {
    format!("tests/fixtures/check/{name}")
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn check_with_stdin(args: &[&str], stdin: Option<&[u8]>) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pipelinerollout-webhook"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg("check")
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run check");
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().expect("stdin");
        pipe.write_all(input).expect("write stdin");
    }
    let out = child.wait_with_output().expect("wait for check");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn check(args: &[&str]) -> Run {
    check_with_stdin(args, None)
}

fn json(run: &Run) -> Vec<Value> {
    match serde_json::from_str(&run.stdout) {
        Ok(Value::Array(records)) => records,
        other => panic!("not a JSON array ({other:?}):\n{}", run.stdout),
    }
}

fn last_line(text: &str) -> &str {
    text.lines().last().unwrap_or_default()
}

#[test]
fn a_repository_directory_in_text() {
    let run = check(&[&fixture("repo")]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{}", run.stdout);
    // Sorted: platform/, team-a/, team-b/; README.txt and .hidden.yaml are not read.
    let a = fixture("repo/team-a/pipelines.yaml");
    let b = fixture("repo/team-b");
    assert_eq!(
        lines[0],
        format!(
            "{} platform/metrics: info: pauseGracePeriodSeconds will be set to 31536000 (no timeout)",
            fixture("repo/platform/rollouts.json")
        )
    );
    assert_eq!(
        lines[1],
        format!(
            "{a}:3 team-a/enrich: info: pauseGracePeriodSeconds will be set to 31536000 (no timeout)"
        )
    );
    assert!(
        lines[2].starts_with(&format!(
            "{b}/forced.yaml team-b/replay: error: user \"pipelinerollout-webhook:check\" {DENY_ADDED_FORCE}"
        )),
        "{}",
        lines[2]
    );
    assert_eq!(
        lines[3],
        format!(
            "{b}/short.yml default/short-drain: error: spec.pipeline.spec.lifecycle.pauseGracePeriodSeconds is 10, below the minimum of 30 (30s) set by the policy: set 30 to 3600 seconds, or 31536000 (or more) for no timeout"
        )
    );
    assert_eq!(
        lines[4],
        "checked 5 PipelineRollouts in 4 files (2 other documents skipped): 2 denied, 0 warnings"
    );
    assert!(run.stderr.is_empty(), "{}", run.stderr);
}

#[test]
fn namespace_flag_and_requester_flags() {
    let run = check(&["--namespace", "team-b", &fixture("repo/team-b/short.yml")]);
    assert_eq!(run.code, 1);
    assert!(
        run.stdout.contains(" team-b/short-drain: error: "),
        "{}",
        run.stdout
    );

    // A manifest that already carries the force: denied on CREATE even for
    // an admin, because a new rollout cannot be pausing.
    let forced = fixture("repo/team-b/forced.yaml");
    let run = check(&["--as", "alice", "--as-group", "system:masters", &forced]);
    assert_eq!(run.code, 1);
    assert!(
        run.stdout
            .contains("a new PipelineRollout cannot be pausing"),
        "{}",
        run.stdout
    );
    assert!(
        !run.stdout.contains("not in forceReapply.users"),
        "{}",
        run.stdout
    );

    // Deployed and stuck pausing: the UPDATE that adds the force is allowed
    // for a member of a permitted group, denied for the default user.
    let pausing = fixture("deployed/pausing.yaml");
    let run = check(&["--against", &pausing, &forced]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stdout.contains("it is not in forceReapply.users"),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains("cannot be pausing"), "{}", run.stdout);
    let run = check(&[
        "--against",
        &pausing,
        "--as",
        "alice",
        "--as-group",
        "devs",
        "--as-group",
        "system:masters",
        &forced,
    ]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_eq!(
        run.stdout,
        "checked 1 PipelineRollout in 1 file (1 judged as an update of deployed objects): 0 denied, 0 warnings\n"
    );
}

#[test]
fn against_a_deployed_dump_ratchets_a_legacy_timeout() {
    let legacy = fixture("legacy/orders.yaml");
    let dump = fixture("deployed/pipelinerollouts.yaml");

    // New, it would be denied.
    let run = check(&[&legacy]);
    assert_eq!(run.code, 1);
    assert!(run.stdout.contains("team-legacy/orders: error: spec.pipeline.spec.lifecycle.pauseGracePeriodSeconds is 7200, above the maximum"), "{}", run.stdout);

    // As an update of what is deployed, the unchanged value only warns.
    let run = check(&["--against", &dump, &legacy, &fixture("repo/team-a")]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_eq!(
        run.stdout.lines().next(),
        Some(format!("{legacy} team-legacy/orders: warning: unchanged, so allowed: pauseGracePeriodSeconds 7200 is above the maximum 3600").as_str())
    );
    assert_eq!(
        last_line(&run.stdout),
        "checked 3 PipelineRollouts in 2 files (1 other document skipped; 2 judged as updates of deployed objects): 0 denied, 1 warning"
    );

    let run = check(&["--against", &fixture("deployed"), "-o", "json", &legacy]);
    assert_eq!(run.code, 0);
    let records = json(&run);
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["operation"], "UPDATE");
    assert_eq!(records[0]["severity"], "warning");

    let run = check(&["--against", &dump, "-o", "junit", &legacy]);
    let doc = roxmltree::Document::parse(&run.stdout).expect("well-formed XML");
    let out = doc
        .descendants()
        .find(|n| n.has_tag_name("system-out"))
        .and_then(|n| n.text())
        .unwrap_or_default();
    assert!(
        out.starts_with(&format!(
            "judged as an UPDATE of the deployed object in {dump}\nwarning: unchanged, so allowed"
        )),
        "{out}"
    );
}
