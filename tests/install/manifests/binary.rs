//! What the webhook's binary says about itself: `serve --help` split per
//! flag (its defaults), the value a container gives a flag, and
//! `check-policy` on a policy file.

use crate::manifests::BIN;
use k8s_openapi::api::core::v1::Container;
use std::collections::BTreeMap;
use std::fs;
use std::process::Command;
use std::sync::LazyLock;
use std::time::Duration;

/// `serve --help`, split per flag (read once).
pub(crate) static HELP: LazyLock<BTreeMap<String, String>> = LazyLock::new(serve_help);

/// `serve --help`, split per flag.
fn serve_help() -> BTreeMap<String, String> {
    let out = Command::new(BIN)
        .args(["serve", "--help"])
        .output()
        .expect("run serve --help");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let mut flags = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if line.starts_with("  ") && trimmed.starts_with('-') && line.len() - trimmed.len() <= 6 {
            if let Some((flag, body)) = current.take() {
                flags.insert(flag, body);
            }
            let flag = trimmed
                .split([' ', ',', '['])
                .find(|w| w.starts_with("--"))
                .unwrap_or(trimmed)
                .to_owned();
            current = Some((flag, String::new()));
        } else if let Some((_, body)) = current.as_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    if let Some((flag, body)) = current {
        flags.insert(flag, body);
    }
    flags
}

/// The default of `flag` (e.g. `--listen`) as `serve --help` states it.
fn default_of(help: &BTreeMap<String, String>, flag: &str) -> Option<String> {
    let body = help
        .get(flag)
        .unwrap_or_else(|| panic!("serve has no flag {flag}"));
    let start = body.find("[default: ")? + "[default: ".len();
    let end = body[start..].find(']')? + start;
    Some(body[start..end].to_owned())
}

/// The value the container gives `flag`: from its args (`--flag=v` or
/// `--flag v`), its environment (`env`), or else the binary's default.
pub(crate) fn flag_value(
    container: &Container,
    help: &BTreeMap<String, String>,
    flag: &str,
    env: &str,
) -> Option<String> {
    let args = container.args.clone().unwrap_or_default();
    let prefix = format!("{flag}=");
    for (i, arg) in args.iter().enumerate() {
        if let Some(value) = arg.strip_prefix(&prefix) {
            return Some(value.to_owned());
        }
        if arg == flag {
            return args.get(i + 1).cloned();
        }
    }
    if let Some(var) = container
        .env
        .iter()
        .flatten()
        .find(|v| v.name == env)
        .and_then(|v| v.value.clone())
    {
        return Some(var);
    }
    default_of(help, flag)
}

pub(crate) fn port_of(address: &str) -> i32 {
    address
        .rsplit_once(':')
        .and_then(|(_, port)| port.parse().ok())
        .unwrap_or_else(|| panic!("{address} has no port"))
}

pub(crate) fn duration(text: &str) -> Duration {
    humantime::parse_duration(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// Runs the binary's `check-policy` on `text`; returns the effective policy.
pub(crate) fn check_policy(text: &str) -> String {
    let dir = tempfile::tempdir().expect("temporary directory");
    let file = dir.path().join("policy.yaml");
    fs::write(&file, text).expect("write policy");
    let out = Command::new(BIN)
        .arg("check-policy")
        .arg(&file)
        .output()
        .expect("run check-policy");
    assert!(
        out.status.success(),
        "the policy ConfigMap's policy.yaml fails check-policy: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}
