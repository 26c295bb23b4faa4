//! An install under another namespace: an overlay of each overlay with
//! `namespace: webhooks` and the transformer `manifests/namespace` renders
//! with every place that names the install's namespace naming `webhooks`,
//! and the old namespace left only where it names something else; so does
//! the cert-manager overlay with the exported policies' components.

use crate::manifests::BIN;
use crate::manifests::render::{OVERLAYS, Workspace};
use serde_json::Value;
use std::fs;
use std::process::Command;

const OLD: &str = "pipelinerollout-webhook";
const NEW: &str = "webhooks";

/// Where a string may hold `pipelinerollout-webhook` without naming the
/// namespace, by the last key of its path, and why.
const ALLOWED_KEYS: [(&str, &str); 9] = [
    (
        "name",
        "the names of objects, webhooks, containers, subjects and roles",
    ),
    ("secretName", "the Secrets' names"),
    ("serviceAccountName", "the ServiceAccount's name"),
    ("policyName", "the ValidatingAdmissionPolicies' names"),
    (
        "resourceNames",
        "the objects RBAC and the policies narrow to, by name",
    ),
    ("image", "the image's repository"),
    (
        "app.kubernetes.io/name",
        "the app's label, and the selectors on it",
    ),
    ("policy.yaml", "the policy's comments name the app"),
    (
        "commonName",
        "the CA's common name (the serving one is checked below)",
    ),
];

/// Where a denial text names the app ("the pipelinerollout-webhook
/// service account", "the pipelinerollout-webhook webhooks").
const ALLOWED_TEXT_KEYS: [&str; 2] = ["message", "messageExpression"];

/// The Secrets' names as CEL literals in the self-managed overlay's
/// own-secrets policy (the Secrets the webhook's account may write): names,
/// not the namespace.
const SECRET_NAMES_IN_CEL: [&str; 2] = [
    "'pipelinerollout-webhook-tls'",
    "'pipelinerollout-webhook-ca'",
];

/// Shapes that name a namespace, wherever they stand.
const NAMESPACE_SHAPES: [&str; 4] = [
    ":pipelinerollout-webhook:",
    ".pipelinerollout-webhook.svc",
    "pipelinerollout-webhook/pipelinerollout-webhook",
    "-n pipelinerollout-webhook",
];

/// The new namespace embedded next to the app's name: the account, the
/// Service's DNS name, the Certificate the CA injector reads.
const NEW_FORMS: [&str; 3] = [
    "system:serviceaccount:webhooks:pipelinerollout-webhook",
    "pipelinerollout-webhook.webhooks.svc",
    "webhooks/pipelinerollout-webhook-tls",
];

fn render_in_webhooks(ws: &Workspace, overlay: &str) -> Vec<Value> {
    let dir = format!("overlays/{overlay}-in-{NEW}");
    let path = ws.manifests().join(&dir);
    fs::create_dir_all(&path).expect("overlay dir");
    fs::write(
        path.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: {NEW}\n\
             resources:\n- ../{overlay}\ntransformers:\n- ../../namespace\n"
        ),
    )
    .expect("write overlay");
    ws.render(&dir)
}

/// Every string leaf: its path, the key it stands under, its text.
fn strings<'a>(
    value: &'a Value,
    path: String,
    key: &'a str,
    out: &mut Vec<(String, &'a str, &'a str)>,
) {
    match value {
        Value::String(s) => out.push((path, key, s)),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                strings(item, format!("{path}[{i}]"), key, out);
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                strings(v, format!("{path}.{k}"), k, out);
            }
        }
        _ => {}
    }
}

fn id(doc: &Value) -> String {
    format!(
        "{}/{}",
        doc["kind"].as_str().unwrap_or("?"),
        doc["metadata"]["name"].as_str().unwrap_or("?")
    )
}

fn stale_places(docs: &[Value]) -> Vec<String> {
    let mut stale = Vec::new();
    for doc in docs {
        let mut leaves = Vec::new();
        strings(doc, String::new(), "", &mut leaves);
        for (path, key, text) in leaves {
            // The places that embed the new namespace, with the app's name
            // beside it (checked one by one in names_the_new_namespace).
            let rest = NEW_FORMS
                .iter()
                .chain(&SECRET_NAMES_IN_CEL)
                .fold(text.to_owned(), |t, form| t.replace(form, ""));
            if !rest.contains(OLD) {
                continue;
            }
            let text = rest.as_str();
            let shaped = NAMESPACE_SHAPES.iter().any(|s| text.contains(s));
            let allowed =
                ALLOWED_KEYS.iter().any(|(k, _)| *k == key) || ALLOWED_TEXT_KEYS.contains(&key);
            if shaped || !allowed {
                stale.push(format!("{} {path}: {text:?}", id(doc)));
            }
        }
    }
    stale
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

/// Each place that embeds the namespace names `webhooks`.
fn names_the_new_namespace(overlay: &str, docs: &[Value]) {
    let sa_subject = |s: &&Value| s["kind"] == "ServiceAccount" && s["name"] == OLD;
    for kind in ["RoleBinding", "ClusterRoleBinding"] {
        for b in of_kind(docs, kind) {
            for s in b["subjects"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(sa_subject)
            {
                assert_eq!(s["namespace"], NEW, "{overlay}: {} subject", id(b));
            }
        }
    }
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        let configs = of_kind(docs, kind);
        assert_eq!(configs.len(), 1, "{overlay}: one {kind}");
        for w in configs[0]["webhooks"].as_array().into_iter().flatten() {
            let name = &w["name"];
            assert_eq!(
                w["clientConfig"]["service"]["namespace"], NEW,
                "{overlay}: {name}"
            );
            let skipped = &w["namespaceSelector"]["matchExpressions"][0];
            assert_eq!(skipped["operator"], "NotIn", "{overlay}: {name}");
            assert_eq!(
                skipped["values"][0], NEW,
                "{overlay}: {name} skips its namespace"
            );
        }
        if overlay != "self-managed" && overlay != "self-signed" {
            assert_eq!(
                configs[0]["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
                format!("{NEW}/pipelinerollout-webhook-tls"),
                "{overlay}: {kind}"
            );
        }
    }
    let policies = of_kind(docs, "ValidatingAdmissionPolicy");
    let policy = |name: &str| {
        policies
            .iter()
            .find(|p| p["metadata"]["name"] == name)
            .copied()
    };
    let skipped = policy("pipelinerollout-webhook-skipped-namespaces").expect("skipped-namespaces");
    assert_eq!(
        skipped["spec"]["matchConstraints"]["namespaceSelector"]["matchExpressions"][0]["values"],
        serde_json::json!([NEW, "kube-system"]),
        "{overlay}: the skipped namespaces are the webhooks'"
    );
    let account = format!("'system:serviceaccount:{NEW}:pipelinerollout-webhook'");
    let mut own = vec!["pipelinerollout-webhook-own-account"];
    if overlay == "self-managed" {
        own.push("pipelinerollout-webhook-own-webhooks");
        own.push("pipelinerollout-webhook-own-secrets");
    }
    for name in own {
        let p = policy(name).unwrap_or_else(|| panic!("{overlay}: {name}"));
        let condition = p["spec"]["matchConditions"][0]["expression"]
            .as_str()
            .unwrap_or("");
        assert_eq!(
            condition,
            format!("request.userInfo.username == {account}"),
            "{overlay}: {name}"
        );
    }
    for cert in of_kind(docs, "Certificate")
        .iter()
        .filter(|c| c["metadata"]["name"] == "pipelinerollout-webhook-tls")
    {
        let service = format!("pipelinerollout-webhook.{NEW}.svc");
        assert_eq!(cert["spec"]["commonName"], service, "{overlay}");
        assert_eq!(
            cert["spec"]["dnsNames"],
            serde_json::json!([service, format!("{service}.cluster.local")]),
            "{overlay}"
        );
    }
    for doc in docs {
        if let Some(ns) = doc["metadata"].get("namespace") {
            assert_eq!(ns, NEW, "{overlay}: {}", id(doc));
        }
    }
}

#[test]
fn every_overlay_installs_under_another_namespace() {
    let ws = Workspace::new();
    let out = Command::new(BIN)
        .args(["gen-certs", "--force", "--namespace", NEW, "--out"])
        .arg(ws.certs_dir())
        .output()
        .expect("run gen-certs");
    assert!(
        out.status.success(),
        "gen-certs: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (overlay, _) in &OVERLAYS {
        eprintln!("checking overlays/{overlay} under namespace {NEW}");
        let docs = render_in_webhooks(&ws, overlay);
        let stale = stale_places(&docs);
        assert!(
            stale.is_empty(),
            "overlays/{overlay} under namespace {NEW} still names {OLD} as a namespace (or somewhere \
             the allow-list does not justify): {stale:#?}"
        );
        names_the_new_namespace(overlay, &docs);
    }
}

/// The exported policies of the second line and of the defaults
/// (components/validating-admission-policy and mutating-admission-policy)
/// exclude the new namespace as the webhooks do.
#[test]
fn the_exported_policies_exclude_another_namespace() {
    let ws = Workspace::new();
    let overlay = "with-exported-policies";
    let path = ws.manifests().join("overlays").join(overlay);
    fs::create_dir_all(&path).expect("overlay dir");
    fs::write(
        path.join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ../cert-manager\n\
         components:\n- ../../components/fail-open\n- ../../components/validating-admission-policy\n\
         - ../../components/mutating-admission-policy\n",
    )
    .expect("write overlay");
    let docs = render_in_webhooks(&ws, overlay);
    let stale = stale_places(&docs);
    assert!(
        stale.is_empty(),
        "the exported policies under namespace {NEW} still name {OLD} as a namespace: {stale:#?}"
    );
    names_the_new_namespace(overlay, &docs);
    let exported: Vec<&Value> = docs
        .iter()
        .filter(|d| {
            matches!(
                d["kind"].as_str(),
                Some("ValidatingAdmissionPolicy" | "MutatingAdmissionPolicy")
            ) && d["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("pipelinerollout-webhook-policy"))
        })
        .collect();
    assert!(
        exported
            .iter()
            .any(|d| d["kind"] == "MutatingAdmissionPolicy")
            && exported
                .iter()
                .any(|d| d["kind"] == "ValidatingAdmissionPolicy"),
        "the components render no exported policies: {:?}",
        exported.iter().map(|d| id(d)).collect::<Vec<_>>()
    );
    for policy in exported {
        assert_eq!(
            policy["spec"]["matchConstraints"]["namespaceSelector"]["matchExpressions"][0]["values"]
                [0],
            NEW,
            "{} excludes the install's namespace",
            id(policy)
        );
    }
}

/// Without the transformer, the old namespace stays: the check above sees it.
#[test]
fn the_check_sees_a_stale_namespace() {
    let ws = Workspace::new();
    let path = ws.manifests().join("overlays/without-transformer");
    fs::create_dir_all(&path).expect("overlay dir");
    fs::write(
        path.join("kustomization.yaml"),
        format!("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: {NEW}\nresources:\n- ../cert-manager\n"),
    )
    .expect("write overlay");
    let stale = stale_places(&ws.render("overlays/without-transformer"));
    for place in [
        "clientConfig.service.namespace",
        "subjects[0].namespace",
        "dnsNames[0]",
        "inject-ca-from",
        "matchConditions[0].expression",
    ] {
        assert!(
            stale.iter().any(|s| s.contains(place)),
            "{place} not seen as stale: {stale:#?}"
        );
    }
}
