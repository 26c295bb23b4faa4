//! The Grafana dashboard. Its source is the chart's `files/dashboard.json`
//! (Helm reads no file outside the chart); the kustomize component needs a
//! copy inside its own directory (kustomize's load restrictor), and the
//! docs link one the reader can import by hand.

use crate::error::Error;
use crate::repository::{Generated, Repository};

/// The dashboard every copy is made from.
pub const SOURCE: &str = "charts/pipelinerollout-webhook/files/dashboard.json";

/// The copies, byte for byte the source.
pub const COPIES: [&str; 2] = [
    "docs/dashboard.json",
    "manifests/components/dashboard/dashboard.json",
];

/// The copies of the dashboard, after checking that the source is JSON.
pub fn copies(repo: &Repository) -> Result<Vec<Generated>, Error> {
    let text = repo.read(SOURCE)?;
    serde_json::from_str::<serde_json::Value>(&text).map_err(|e| Error::Parse {
        what: SOURCE.to_owned(),
        message: e.to_string(),
    })?;
    Ok(COPIES
        .iter()
        .map(|path| Generated {
            path: (*path).to_owned(),
            text: text.clone(),
        })
        .collect())
}
