//! `helm template` of the chart, as the kustomize install's release: the
//! name and namespace `pipelinerollout-webhook`.

use std::process::Command;

use serde_json::Value;

use crate::error::Error;
use crate::repository::Repository;

/// The chart, relative to the repository's root.
pub const CHART: &str = "charts/pipelinerollout-webhook";
/// The release name and namespace the kustomize install corresponds to.
pub const RELEASE: &str = "pipelinerollout-webhook";

/// The text `helm template` prints for the chart with `args` (values,
/// `--show-only`), run from the repository's root.
pub fn template(repo: &Repository, args: &[&str]) -> Result<String, Error> {
    let mut all = vec!["template", RELEASE, CHART, "--namespace", RELEASE];
    all.extend_from_slice(args);
    let out = Command::new("helm")
        .args(&all)
        .current_dir(repo.path("."))
        .output()
        .map_err(Error::NoHelm)?;
    if !out.status.success() {
        return Err(Error::Helm {
            args: all.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    String::from_utf8(out.stdout).map_err(|e| Error::Parse {
        what: format!("helm {}", all.join(" ")),
        message: e.to_string(),
    })
}

/// The one document of a YAML text.
pub fn document(text: &str, what: &str) -> Result<Value, Error> {
    serde_saphyr::from_str(text).map_err(|e| Error::Parse {
        what: what.to_owned(),
        message: e.to_string(),
    })
}
