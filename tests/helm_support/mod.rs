//! What the chart's tests share: `helm template` and `kubectl kustomize`
//! as documents, and the object-by-object comparison of two renderings.

#![allow(dead_code)] // each test binary uses a part

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The chart, relative to the repository's root.
pub const CHART: &str = "charts/pipelinerollout-webhook";
/// The release name and namespace the kustomize install corresponds to.
pub const RELEASE: &str = "pipelinerollout-webhook";
/// The kustomize install's namespace.
pub const NAMESPACE: &str = "pipelinerollout-webhook";

/// Kinds without a namespace. kustomize writes its `namespace:` into every
/// object whose kind it does not know to be cluster-scoped (the
/// Validating- and MutatingAdmissionPolicies), and the API server ignores
/// it there.
const CLUSTER_SCOPED: [&str; 9] = [
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding",
];

/// The repository's root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The chart's directory.
pub fn chart() -> PathBuf {
    root().join(CHART)
}

/// A chart example values file.
pub fn example(name: &str) -> PathBuf {
    chart().join("examples").join(name)
}

/// Every example values file of the chart, sorted.
pub fn examples() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(chart().join("examples"))
        .expect("read the chart's examples")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

/// What a `helm` run printed, and whether it succeeded.
#[derive(Debug)]
pub struct Run {
    /// Exit status 0.
    pub success: bool,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// Runs `helm ARGS` from the repository's root; panics, saying so, when
/// helm is not installed.
pub fn helm(args: &[&str]) -> Run {
    let out = Command::new("helm")
        .args(args)
        .current_dir(root())
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run helm ({e}): the chart's tests need Helm 3.8 or newer on the PATH \
                 (.ci/run installs it)"
            )
        });
    Run {
        success: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Parses a YAML stream into its non-empty documents.
pub fn documents(text: &str, what: &str) -> Vec<Value> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text)
        .unwrap_or_else(|e| panic!("{what} renders invalid YAML: {e}\n{text}"));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// `helm template RELEASE CHART -n NAMESPACE` with `args` (values files,
/// `--set`s), as documents; panics with Helm's message when it fails.
pub fn template(args: &[&str]) -> Vec<Value> {
    let run = try_template(args);
    assert!(
        run.success,
        "helm template {args:?} failed:\n{}",
        run.stderr
    );
    documents(&run.stdout, &format!("helm template {args:?}"))
}

/// `helm template` with `args`, as it ran.
pub fn try_template(args: &[&str]) -> Run {
    let mut all = vec!["template", RELEASE, CHART, "--namespace", NAMESPACE];
    all.extend_from_slice(args);
    helm(&all)
}

/// `kubectl kustomize` of `resource` (a directory under the repository's
/// root) with `components` added, as documents.
pub fn kustomize(resource: &str, components: &[&str]) -> Vec<Value> {
    let dir = tempfile::tempdir().expect("temporary directory");
    // kustomize names resources and components by relative paths.
    let up = "../".repeat(dir.path().components().count().saturating_sub(1));
    let relative = |path: &str| {
        let absolute = root().join(path);
        format!(
            "{up}{}",
            absolute.display().to_string().trim_start_matches('/')
        )
    };
    let mut text = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- {}\n",
        relative(resource)
    );
    if !components.is_empty() {
        text.push_str("components:\n");
        for component in components {
            text.push_str(&format!("- {}\n", relative(component)));
        }
    }
    std::fs::write(dir.path().join("kustomization.yaml"), text).expect("write kustomization");
    let out = Command::new("kubectl")
        .args(["kustomize", "--load-restrictor", "LoadRestrictionsNone"])
        .arg(dir.path())
        .output()
        .unwrap_or_else(|e| panic!("cannot run kubectl kustomize ({e}): kubectl is required"));
    assert!(
        out.status.success(),
        "kubectl kustomize {resource} {components:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    documents(
        &String::from_utf8_lossy(&out.stdout),
        &format!("kubectl kustomize {resource}"),
    )
}

/// `Kind/name` of an object.
pub fn id(doc: &Value) -> String {
    format!(
        "{}/{}",
        doc["kind"].as_str().unwrap_or("?"),
        doc["metadata"]["name"].as_str().unwrap_or("?")
    )
}

/// The objects of a rendering by `Kind/name`.
pub fn by_id(docs: &[Value]) -> BTreeMap<String, Value> {
    docs.iter().map(|d| (id(d), d.clone())).collect()
}

/// The object `kind/name` of `docs`; panics naming what there is.
pub fn object<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    let wanted = format!("{kind}/{name}");
    docs.iter().find(|d| id(d) == wanted).unwrap_or_else(|| {
        let ids: Vec<String> = docs.iter().map(id).collect();
        panic!("no {wanted} in the rendering; it has {ids:?}")
    })
}

/// Compares two renderings object by object: the same `Kind/name`s, the
/// same namespaces (for namespaced kinds), every field equal, except that
/// `chart`'s labels may add to `kustomize`'s (on objects and pod
/// templates). Policy and dashboard files inside ConfigMaps are compared
/// as the data they hold, not as text (the chart writes its values with
/// toYaml). `ignored` names objects left out on purpose. Returns one line
/// per difference, saying which object and field and what to do.
pub fn compare(kustomize: &[Value], chart: &[Value], ignored: &[&str]) -> Vec<String> {
    let (k, c) = (by_id(kustomize), by_id(chart));
    let mut out = Vec::new();
    for name in k.keys().filter(|n| !c.contains_key(*n)) {
        if !ignored.contains(&name.as_str()) {
            out.push(format!(
                "{name}: rendered by kustomize, missing from the chart: add a template for it"
            ));
        }
    }
    for name in c.keys().filter(|n| !k.contains_key(*n)) {
        if !ignored.contains(&name.as_str()) {
            out.push(format!(
                "{name}: rendered by the chart, not by kustomize: add it to manifests/ or put it behind a value that is off by default"
            ));
        }
    }
    for (name, ko) in &k {
        let Some(co) = c.get(name) else { continue };
        labels_added_only(
            name,
            "metadata.labels",
            &ko["metadata"]["labels"],
            &co["metadata"]["labels"],
            &mut out,
        );
        labels_added_only(
            name,
            "spec.template.metadata.labels",
            &ko["spec"]["template"]["metadata"]["labels"],
            &co["spec"]["template"]["metadata"]["labels"],
            &mut out,
        );
        diff(&normalise(ko), &normalise(co), name.clone(), &mut out);
    }
    out
}

fn labels_added_only(name: &str, at: &str, k: &Value, c: &Value, out: &mut Vec<String>) {
    let Some(k) = k.as_object() else { return };
    for (key, value) in k {
        match c.get(key) {
            Some(v) if v == value => {}
            other => out.push(format!(
                "{name}: {at}.{key}: kustomize {value}, chart {}: the chart may add labels, not change or drop them",
                other.map_or("(missing)".to_owned(), Value::to_string)
            )),
        }
    }
}

/// An object without what [`compare`] does not compare field by field.
fn normalise(doc: &Value) -> Value {
    let mut doc = doc.clone();
    let kind = doc["kind"].as_str().unwrap_or_default().to_owned();
    if let Some(meta) = doc["metadata"].as_object_mut() {
        meta.remove("labels");
        if CLUSTER_SCOPED.contains(&kind.as_str()) {
            meta.remove("namespace");
        }
    }
    if let Some(meta) = doc["spec"]["template"]["metadata"].as_object_mut() {
        meta.remove("labels");
    }
    if kind == "ConfigMap"
        && let Some(data) = doc["data"].as_object_mut()
    {
        for (key, value) in data.iter_mut() {
            let text = value.as_str().unwrap_or_default();
            let parsed: Option<Value> = if key.ends_with(".json") {
                serde_json::from_str(text).ok()
            } else if key.ends_with(".yaml") {
                serde_saphyr::from_str(text).ok()
            } else {
                None
            };
            if let Some(parsed) = parsed {
                *value = parsed;
            }
        }
    }
    doc
}

/// Every difference between `k` and `c` below `path`.
fn diff(k: &Value, c: &Value, path: String, out: &mut Vec<String>) {
    match (k, c) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let (x, y) = (
                    a.get(key).unwrap_or(&Value::Null),
                    b.get(key).unwrap_or(&Value::Null),
                );
                diff(x, y, format!("{path}.{key}"), out);
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                diff(x, y, format!("{path}[{i}]"), out);
            }
        }
        _ if same_scalar(k, c) => {}
        _ => out.push(format!(
            "{path}: kustomize {}, chart {}",
            short(k),
            short(c)
        )),
    }
}

/// Equal, with numbers compared by value (YAML's 0440 and 288 are one).
fn same_scalar(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

fn short(v: &Value) -> String {
    let text = if v.is_null() {
        "(missing)".to_owned()
    } else {
        v.to_string()
    };
    if text.len() > 300 {
        format!("{}...", &text[..text.floor_char_boundary(300)])
    } else {
        text
    }
}

/// The policy file of a rendering's policy ConfigMap.
pub fn policy_text(docs: &[Value]) -> String {
    object(docs, "ConfigMap", "pipelinerollout-webhook-policy")["data"]["policy.yaml"]
        .as_str()
        .expect("policy.yaml in the ConfigMap")
        .to_owned()
}

/// Writes `text` to `dir/name`; returns the path.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    path
}
