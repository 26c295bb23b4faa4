//! The alerts. Their source is the chart's `templates/prometheusrule.yaml`:
//! its values switch alerts on and off (the sweeper, leader election, the
//! audit, the certificate mode) and set thresholds, labels and names, so
//! it is the one place that can say all of that. The kustomize components
//! are renderings of it with the kustomize install's names:
//! `prometheus-rule` the default values, `prometheus-rule-self-managed`
//! the patch that turns that into the rendering with
//! `certificates.mode=selfManaged`. They are written from the parsed
//! renderings with every string quoted on one line, so that no YAML reader
//! folds an expression's lines differently from another.

use serde_json::{Value, json};

use crate::error::Error;
use crate::helm::{self, RELEASE};
use crate::repository::{Generated, Repository};

/// The template every rendering comes from.
pub const SOURCE: &str = "charts/pipelinerollout-webhook/templates/prometheusrule.yaml";
/// The PrometheusRule of the kustomize component.
pub const COMPONENT: &str = "manifests/components/prometheus-rule/prometheusrule.yaml";
/// The patch of the self-managed component.
pub const SELF_MANAGED: &str = "manifests/components/prometheus-rule-self-managed/alerts.yaml";

/// The only label the kustomize install puts on its objects.
const NAME_LABEL: &str = "app.kubernetes.io/name";

/// The template rendered with `set` (besides `prometheusRule.enabled`).
fn render(repo: &Repository, set: &str) -> Result<Value, Error> {
    let values = format!("prometheusRule.enabled=true{set}");
    let text = helm::template(
        repo,
        &[
            "--set",
            &values,
            "--show-only",
            "templates/prometheusrule.yaml",
        ],
    )?;
    helm::document(&text, &format!("{SOURCE} rendered with {values}"))
}

/// `value` as YAML, every string on one line.
fn yaml(value: &Value, what: &str) -> Result<String, Error> {
    let options = serde_saphyr::ser_options! { prefer_block_scalars: false };
    serde_saphyr::to_string_with_options(value, options)
        .map_err(|e| Error::Shape(format!("cannot write {what}: {e}")))
}

/// The groups of a rendering, parsed.
fn groups(doc: &Value, what: &str) -> Result<Vec<Value>, Error> {
    doc["spec"]["groups"]
        .as_array()
        .cloned()
        .ok_or_else(|| Error::Shape(format!("{what} has no spec.groups")))
}

/// The name of a group.
fn group_name(group: &Value) -> &str {
    group["name"].as_str().unwrap_or_default()
}

/// The JSON-patch operations that turn the groups of `base` into those
/// of `target`: a group that changed is tested by name and replaced, a
/// group that is new is added where it goes. Groups are never removed or
/// moved.
fn patch(base: &[Value], target: &[Value]) -> Result<Value, Error> {
    let mut names: Vec<&str> = base.iter().map(group_name).collect();
    let mut out = Vec::new();
    for (i, group) in target.iter().enumerate() {
        let name = group_name(group);
        let path = format!("/spec/groups/{i}");
        if names.get(i) == Some(&name) {
            if base.get(i) == Some(group) {
                continue;
            }
            out.push(json!({ "op": "test", "path": format!("{path}/name"), "value": name }));
            out.push(json!({ "op": "replace", "path": path, "value": group }));
        } else if names.contains(&name) {
            return Err(Error::Shape(format!(
                "the group {name} moved between the renderings: a patch cannot say that"
            )));
        } else {
            names.insert(i, name);
            out.push(json!({ "op": "add", "path": path, "value": group }));
        }
    }
    if names.len() != target.len() {
        return Err(Error::Shape(
            "a group of the default rendering is missing with certificates.mode=selfManaged: a \
             patch that removes groups is not generated"
                .to_owned(),
        ));
    }
    Ok(Value::Array(out))
}

/// `groups` after the operations of `patch` (test, replace, add at an index).
fn apply(mut groups: Vec<Value>, patch: &Value) -> Result<Vec<Value>, Error> {
    let bad = || {
        Error::Shape(format!(
            "{SELF_MANAGED}: an operation the generator does not write"
        ))
    };
    for op in patch.as_array().ok_or_else(bad)? {
        let path = op["path"].as_str().ok_or_else(bad)?;
        let rest = path.strip_prefix("/spec/groups/").ok_or_else(bad)?;
        let (index, field) = rest.split_once('/').unwrap_or((rest, ""));
        let index: usize = index.parse().map_err(|_| bad())?;
        match (op["op"].as_str(), field) {
            (Some("test"), "name") => {
                if groups.get(index).map(group_name) != op["value"].as_str() {
                    return Err(bad());
                }
            }
            (Some("replace"), "") if index < groups.len() => groups[index] = op["value"].clone(),
            (Some("add"), "") if index <= groups.len() => groups.insert(index, op["value"].clone()),
            _ => return Err(bad()),
        }
    }
    Ok(groups)
}

const COMPONENT_HEADER: &str = "\
# GENERATED by `cargo xtask generate` from the Helm chart's
# templates/prometheusrule.yaml, rendered with the default values as the
# kustomize install's release (name and namespace pipelinerollout-webhook;
# only the app.kubernetes.io/name label): change the template, then run it
# (docs/generated-files.md). Runbooks: docs/observability.md.
";

const SELF_MANAGED_HEADER: &str = "\
# GENERATED by `cargo xtask generate` from the Helm chart's
# templates/prometheusrule.yaml: the operations that turn its rendering with
# the default values (the prometheus-rule component) into its rendering with
# certificates.mode=selfManaged (the expiry alerts differ: the webhook renews
# at two thirds of the certificate's life, and what to do differs; the alerts
# on its own certificate work are added). Change the template, then run it
# (docs/generated-files.md).
";

/// The two components' files, checked to parse back to the renderings
/// they stand for.
pub fn components(repo: &Repository) -> Result<Vec<Generated>, Error> {
    let mut default = render(repo, "")?;
    default["metadata"]["labels"] = json!({ NAME_LABEL: RELEASE });
    let self_managed = render(repo, ",certificates.mode=selfManaged")?;
    let component = format!("{COMPONENT_HEADER}{}", yaml(&default, COMPONENT)?);
    if helm::document(&component, COMPONENT)? != default {
        return Err(Error::Shape(format!(
            "{COMPONENT} would not parse to the chart's rendering"
        )));
    }

    let base = groups(&default, "the default rendering")?;
    let target = groups(&self_managed, "the selfManaged rendering")?;
    let operations = yaml(&patch(&base, &target)?, SELF_MANAGED)?;
    let parsed: Value = serde_saphyr::from_str(&operations).map_err(|e| Error::Parse {
        what: SELF_MANAGED.to_owned(),
        message: e.to_string(),
    })?;
    if apply(base, &parsed)? != target {
        return Err(Error::Shape(format!(
            "{SELF_MANAGED} would not turn the default rendering into the selfManaged one"
        )));
    }
    Ok(vec![
        Generated {
            path: COMPONENT.to_owned(),
            text: component,
        },
        Generated {
            path: SELF_MANAGED.to_owned(),
            text: format!("{SELF_MANAGED_HEADER}{operations}"),
        },
    ])
}
