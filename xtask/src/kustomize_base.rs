//! The objects of `manifests/base`, rendered from the Helm chart with the
//! kustomize install's choices (`manifests/base/chart-values.yaml`), so
//! the two installs describe the same objects from one source. Each file
//! keeps the comments above its GENERATED line (what the file means in the
//! kustomize install); below it, the chart's rendering of its templates
//! without what kustomize sets itself or an overlay adds: the namespace,
//! the chart's own labels, the certificate's objects and the CA injection.
//! `kustomization.yaml`, `namespace.yaml` and `policy.yaml` are written by
//! hand (docs/generated-files.md says why).

use serde_json::Value;

use crate::error::Error;
use crate::helm::{self, RELEASE};
use crate::repository::{Generated, Repository};

/// The values the chart is rendered with.
pub const VALUES: &str = "manifests/base/chart-values.yaml";

/// Each template and the file of `manifests/base` its objects go to.
pub const FILES: [(&str, &str); 13] = [
    ("serviceaccount.yaml", "serviceaccount.yaml"),
    ("rbac.yaml", "rbac.yaml"),
    ("force-reapply-rbac.yaml", "force-reapply-rbac.yaml"),
    ("sweeper-rbac.yaml", "stale-force-sweeper.yaml"),
    ("leader-election-rbac.yaml", "leader-election.yaml"),
    ("audit-rbac.yaml", "audit-rbac.yaml"),
    ("deployment.yaml", "deployment.yaml"),
    ("poddisruptionbudget.yaml", "poddisruptionbudget.yaml"),
    ("service.yaml", "service.yaml"),
    ("networkpolicy.yaml", "networkpolicy.yaml"),
    ("webhooks.yaml", "webhooks.yaml"),
    (
        "skipped-namespaces-policy.yaml",
        "skipped-namespaces-policy.yaml",
    ),
    ("own-account-policy.yaml", "own-account-policy.yaml"),
];

/// Templates the base takes nothing from: the policy ConfigMap
/// (kustomization.yaml makes it from the commented policy.yaml) and the
/// cert-manager objects (overlays/cert-manager).
const LEFT_OUT: [&str; 2] = ["policy-configmap.yaml", "certificates.yaml"];

/// The labels only the chart puts on its objects.
const HELM_LABELS: [&str; 4] = [
    "app.kubernetes.io/instance",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/version",
    "helm.sh/chart",
];

/// The annotation through which cert-manager injects the CA; the
/// cert-manager overlay adds it.
const INJECT_CA: &str = "cert-manager.io/inject-ca-from";

/// The first line of what the generator writes in each file.
const MARKER: &str = "# GENERATED from charts/pipelinerollout-webhook/templates/";

/// The documents of a `helm template` text, each with its template's name.
fn documents(rendering: &str) -> Result<Vec<(String, String)>, Error> {
    let mut out: Vec<(String, String)> = Vec::new();
    for part in rendering.split("---\n") {
        let Some(rest) = part.strip_prefix("# Source: pipelinerollout-webhook/templates/") else {
            if part.trim().is_empty() {
                continue;
            }
            return Err(Error::Shape(format!(
                "helm printed a document without its template's name: {}",
                part.lines().next().unwrap_or_default()
            )));
        };
        let (template, text) = rest.split_once('\n').unwrap_or((rest, ""));
        out.push((template.to_owned(), text.trim_matches('\n').to_owned()));
    }
    Ok(out)
}

/// The indentation of a line.
fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// `doc` without the chart's labels, the namespace in its metadata and the
/// CA injection, as text (the template's layout and comments kept).
fn kustomize_text(doc: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    let mut in_metadata = false;
    for line in doc.lines() {
        if indent(line) == 0 && !line.starts_with('#') {
            in_metadata = line == "metadata:";
        }
        let key = line.trim_start();
        if HELM_LABELS
            .iter()
            .any(|l| key.starts_with(&format!("{l}:")))
            || (in_metadata && line == format!("  namespace: {RELEASE}"))
        {
            continue;
        }
        if key.starts_with(&format!("{INJECT_CA}:")) {
            // The comment that explains it goes with it.
            while out
                .last()
                .is_some_and(|l| l.trim_start().starts_with('#') && indent(l) == indent(line))
            {
                out.pop();
            }
            continue;
        }
        out.push(line);
    }
    // An `annotations:` left without entries.
    let mut kept: Vec<&str> = Vec::with_capacity(out.len());
    for (i, line) in out.iter().enumerate() {
        let empty = line.trim_start() == "annotations:"
            && out
                .get(i + 1)
                .is_none_or(|next| indent(next) <= indent(line));
        if !empty {
            kept.push(line);
        }
    }
    kept.join("\n")
}

/// `doc` as [`kustomize_text`] should leave it, parsed.
fn kustomize_value(mut doc: Value) -> Value {
    let strip = |labels: &mut Value| {
        if let Some(map) = labels.as_object_mut() {
            for label in HELM_LABELS {
                map.remove(label);
            }
        }
    };
    strip(&mut doc["metadata"]["labels"]);
    if doc["spec"]["template"]["metadata"].is_object() {
        strip(&mut doc["spec"]["template"]["metadata"]["labels"]);
    }
    if let Some(meta) = doc["metadata"].as_object_mut() {
        meta.remove("namespace");
        let annotations = meta.get_mut("annotations").and_then(Value::as_object_mut);
        if let Some(annotations) = annotations {
            annotations.remove(INJECT_CA);
            if annotations.is_empty() {
                meta.remove("annotations");
            }
        }
    }
    doc
}

/// The comments above the GENERATED line of `existing` (or, in a file
/// without one, its leading comments), followed by an empty comment line
/// that sets them apart; empty when there are none.
fn preamble(existing: &str) -> String {
    let mut lines: Vec<&str> = existing
        .lines()
        .take_while(|line| line.starts_with('#') && !line.starts_with(MARKER))
        .collect();
    while lines.last() == Some(&"#") {
        lines.pop();
    }
    lines
        .iter()
        .map(|line| format!("{line}\n"))
        .chain((!lines.is_empty()).then(|| "#\n".to_owned()))
        .collect()
}

/// Parses every document of a YAML stream.
fn parse_all(text: &str, what: &str) -> Result<Vec<Value>, Error> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text).map_err(|e| Error::Parse {
        what: what.to_owned(),
        message: e.to_string(),
    })?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// The files of `manifests/base` that come from the chart.
pub fn files(repo: &Repository) -> Result<Vec<Generated>, Error> {
    let rendering = helm::template(repo, &["-f", VALUES])?;
    let documents = documents(&rendering)?;
    for (template, _) in &documents {
        let known =
            FILES.iter().any(|(t, _)| t == template) || LEFT_OUT.contains(&template.as_str());
        if !known {
            return Err(Error::Shape(format!(
                "the chart's template {template} renders objects for the kustomize install's \
                 values, and xtask/src/kustomize_base.rs does not say where in manifests/base they \
                 go: add it to FILES (or to LEFT_OUT, with the reason)"
            )));
        }
    }
    let mut out = Vec::new();
    for (template, file) in FILES {
        let path = format!("manifests/base/{file}");
        let docs: Vec<&str> = documents
            .iter()
            .filter(|(t, _)| *t == template)
            .map(|(_, d)| d.as_str())
            .collect();
        if docs.is_empty() {
            return Err(Error::Shape(format!(
                "the chart's template {template} renders nothing for {VALUES}, but {path} comes \
                 from it"
            )));
        }
        let body: Vec<String> = docs.iter().map(|d| kustomize_text(d)).collect();
        let existing = repo.read(&path).unwrap_or_default();
        let text = format!(
            "{}{MARKER}{template}\n\
             # by `cargo xtask generate`, with the values in chart-values.yaml: change\n\
             # the template, then run it (docs/generated-files.md). The comments above\n\
             # this line are this file's own.\n{}\n",
            preamble(&existing),
            body.join("\n---\n")
        );
        let mut wanted = Vec::new();
        for doc in &docs {
            wanted.push(kustomize_value(helm::document(doc, template)?));
        }
        if parse_all(&text, &path)? != wanted {
            return Err(Error::Shape(format!(
                "{path} would not parse to the chart's rendering of {template}: the generator's \
                 edits of the text (labels, namespace, CA injection) no longer fit the template"
            )));
        }
        out.push(Generated { path, text });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chart_labels_namespace_and_injection_are_dropped_and_the_rest_kept() {
        let doc = "apiVersion: v1\nkind: X\nmetadata:\n  name: a\n  namespace: pipelinerollout-webhook\n  labels:\n    app.kubernetes.io/name: a\n    helm.sh/chart: c-1\n  annotations:\n    # why\n    cert-manager.io/inject-ca-from: ns/a\nspec:\n  # kept\n  namespace: pipelinerollout-webhook\n";
        assert_eq!(
            kustomize_text(doc),
            "apiVersion: v1\nkind: X\nmetadata:\n  name: a\n  labels:\n    app.kubernetes.io/name: a\nspec:\n  # kept\n  namespace: pipelinerollout-webhook"
        );
    }

    #[test]
    fn the_preamble_is_the_comments_above_the_marker() {
        let file = format!("# mine\n#\n{MARKER}x.yaml\n# more\napiVersion: v1\n");
        assert_eq!(preamble(&file), "# mine\n#\n");
        assert_eq!(preamble("# head\napiVersion: v1\n# late\n"), "# head\n#\n");
        assert_eq!(preamble("apiVersion: v1\n"), "");
    }
}
