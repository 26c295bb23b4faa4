//! One policy, two engines: the ValidatingAdmissionPolicy that `export-vap`
//! writes, installed on a real kube-apiserver with no webhook registered,
//! must decide every rule-table case that can be written to an API server
//! the way the webhook's `/validate` (`admission::answer`) decides the same
//! request under the same policy. Four policies: the built-in one; one
//! with namespace overrides of both timeouts, a default scale factor and
//! RBAC (the delete, strategy and child edit gates, rollout deletes included, granted
//! by verbs of their own through a Role: see
//! `apiserver_vap_support::grants`); one with the other switches of the
//! rule table and rollout deletes gated; one in warn mode, rollout deletes
//! gated (where the warnings are compared). Rule 21's warning is compared
//! word for word in every phase. First, every expression of the four
//! exported policies, variables included, must type-check against the
//! CRD's schema (kube-controller-manager's status controller, through
//! unbound copies: see `apiserver_vap_support::typecheck`); each installed
//! policy must then draw no type-checking warning either.
//!
//! Requests are judged only once kube-apiserver has stopped recompiling
//! its policies (`Cluster::wait_for_policies_compiled`: a compile during
//! an evaluation can crash it), and a recompile while they are judged
//! fails the phase.
//!
//! One cluster for all four, one policy installed at a time. Without the
//! binaries this test prints a skip line, and fails in CI.

use crate::apiserver_vap_support;

use std::io::Write as _;
use std::time::{Duration, Instant};

use apiserver_vap_support::cases::Case;
use apiserver_vap_support::{
    Api, Judged, check_scope, drains, grants, judge_all, overrides, prepare, prepare_scope,
    rollout_deletes, rollouts, tables, typecheck, warned,
};
use envtest::{Assets, CRD, Cluster, User, repo_root, require};
use hyper::Method;
use pipelinerollout_webhook::policy::Policy;
use pipelinerollout_webhook::vap;
use serde_json::{Value, json};
use test_builders::pipeline_rollout;

/// The overrides policy (see the file for what it exercises).
const OVERRIDES_POLICY: &str = include_str!("../fixtures/policies/overrides-rbac.yaml");

/// The remaining switches: no pause condition, forcePromote not gated, no
/// timeout nowhere, a default scale factor of 1, and rollout deletes gated.
const VARIANTS_POLICY: &str = "\
mode: enforce
drainTimeout:
  default: 5m
  allowNoTimeout: false
  defaultRecycleScaleFactor: 1
forceReapply:
  requirePausing: false
  gateForcePromote: false
  deleteUndrained:
    gateRolloutDeletes: true
";

/// How long kube-apiserver must not have recompiled its policies before
/// they count as compiled: more than its one-second tick and a compile.
const QUIET: Duration = Duration::from_millis(2500);

/// Numaflow's CRDs: the children the exported policies judge.
const NUMAFLOW_CRDS: [&str; 3] = [
    "tests/fixtures/numaflow/numaflow.numaproj.io_pipelines.yaml",
    "tests/fixtures/numaflow/numaflow.numaproj.io_monovertices.yaml",
    "tests/fixtures/numaflow/numaflow.numaproj.io_interstepbufferservices.yaml",
];

/// Warn mode, without the pause condition, rollout deletes gated.
const WARN_POLICY: &str = "mode: warn\nforceReapply:\n  requirePausing: false\n  deleteUndrained:\n    gateRolloutDeletes: true\n";

const USERS: [User; 5] = [
    User::Admin,
    User::Alice,
    User::Carol,
    User::ArgocdServer,
    User::NumaplaneController,
];

struct Phase {
    label: &'static str,
    policy: Policy,
    namespaces: Vec<&'static str>,
    cases: Vec<Case>,
}

fn phases() -> Vec<Phase> {
    let parse = |yaml: &str| Policy::from_yaml(yaml).expect("test policy is valid");
    vec![
        Phase {
            label: "built-in",
            policy: Policy::built_in(),
            namespaces: vec!["vap-built-in"],
            cases: [
                tables::built_in("vap-built-in"),
                drains::built_in("vap-built-in"),
                in_ns(rollout_deletes::timeouts(), "vap-built-in"),
            ]
            .concat(),
        },
        Phase {
            label: "overrides-rbac",
            policy: parse(OVERRIDES_POLICY),
            namespaces: tables::OVERRIDE_NAMESPACES.to_vec(),
            cases: [tables::overrides(), overrides::cases(), grants::cases()].concat(),
        },
        Phase {
            label: "variants",
            policy: parse(VARIANTS_POLICY),
            namespaces: vec!["vap-variants"],
            cases: [
                tables::variants("vap-variants"),
                in_ns(rollout_deletes::gated(), "vap-variants"),
            ]
            .concat(),
        },
        Phase {
            label: "warn",
            policy: parse(WARN_POLICY),
            namespaces: vec!["vap-warn"],
            cases: [
                tables::warn("vap-warn"),
                warned::cases("vap-warn"),
                in_ns(rollout_deletes::gated(), "vap-warn"),
            ]
            .concat(),
        },
    ]
}

fn in_ns(cases: Vec<Case>, ns: &'static str) -> Vec<Case> {
    cases.into_iter().map(|c| c.ns(ns)).collect()
}

/// RBAC the cases need: the users may write PipelineRollouts anywhere;
/// alice may force a re-apply in payments-eu only, and holds the delete
/// and strategy gates' verbs there (see `apiserver_vap_support::grants`).
fn rbac(namespaces: &[&str]) -> Vec<Value> {
    let subjects: Vec<Value> = [User::Alice, User::Carol, User::ArgocdServer]
        .iter()
        .map(|u| u.subject())
        .collect();
    let mut children_subjects = subjects.clone();
    children_subjects.push(User::NumaplaneController.subject());
    for account in drains::ACCOUNTS {
        children_subjects.push(
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": account.name}),
        );
    }
    let group = "numaplane.numaproj.io";
    let rbac = "rbac.authorization.k8s.io/v1";
    let mut objects: Vec<Value> = namespaces
        .iter()
        .filter(|ns| **ns != "default")
        .map(|ns| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
        .collect();
    objects.extend([
        json!({"apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": "vap-e2e-writer"},
            "rules": [{"apiGroups": [group], "resources": ["pipelinerollouts"],
                "verbs": ["get", "create", "update", "patch", "delete"]}]}),
        json!({"apiVersion": rbac, "kind": "ClusterRoleBinding", "metadata": {"name": "vap-e2e-writer"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "vap-e2e-writer"},
            "subjects": subjects}),
        // Children (and their /status, as Numaflow's aggregate-to-edit
        // role grants) and ConfigMaps, for the users and the impersonated
        // accounts: what stops them is the policy, not RBAC.
        json!({"apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": "vap-e2e-children"},
            "rules": [{"apiGroups": ["numaflow.numaproj.io"],
                "resources": ["pipelines", "monovertices", "interstepbufferservices",
                    "pipelines/status", "monovertices/status", "interstepbufferservices/status"],
                "verbs": ["get", "create", "update", "patch", "delete"]},
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "create", "update", "patch", "delete"]}]}),
        json!({"apiVersion": rbac, "kind": "ClusterRoleBinding", "metadata": {"name": "vap-e2e-children"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "vap-e2e-children"},
            "subjects": children_subjects}),
        json!({"apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": "vap-e2e-force-reapply"},
            "rules": [{"apiGroups": [group], "resources": ["pipelinerollouts"], "verbs": ["force-reapply"]}]}),
        json!({"apiVersion": rbac, "kind": "RoleBinding",
            "metadata": {"name": "alice-force-reapply", "namespace": "payments-eu"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "vap-e2e-force-reapply"},
            "subjects": [User::Alice.subject()]}),
    ]);
    objects.extend(grants::rbac());
    objects
}

#[test]
fn the_exported_policy_decides_like_the_webhook_on_a_real_api_server() {
    let test = envtest::test_name();
    let Some(assets) = require(&test, Assets::find()) else {
        return;
    };
    if require(&test, Assets::kube_controller_manager()).is_none() {
        return;
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let started = Instant::now();
    let cluster = Cluster::start(&assets).expect("the test cluster starts");
    cluster
        .install_crd(&repo_root().join(CRD))
        .expect("the CRD installs");
    for crd in NUMAFLOW_CRDS {
        cluster
            .install_crd(&repo_root().join(crd))
            .expect("Numaflow's CRDs install");
    }
    cluster
        .start_controller_manager("validatingadmissionpolicy-status-controller")
        .expect("kube-controller-manager starts");
    let phases = phases();
    let namespaces: Vec<&str> = phases.iter().flat_map(|p| p.namespaces.clone()).collect();
    cluster
        .create_all(rbac(&namespaces))
        .expect("namespaces and RBAC");
    // RBAC sees new bindings a moment after they are written.
    let resource = "pipelinerollouts.numaplane.numaproj.io";
    for user in [User::Alice, User::Carol, User::ArgocdServer] {
        cluster
            .wait_for_access(user, "update", resource, namespaces[0], true)
            .expect("the writers' RBAC is in force");
    }
    cluster
        .wait_for_access(User::Alice, "force-reapply", resource, "payments-eu", true)
        .expect("alice's force-reapply grant is in force");
    for (verb, resource, ns, allowed) in grants::expected_access() {
        cluster
            .wait_for_access(User::Alice, verb, resource, ns, allowed)
            .unwrap_or_else(|e| panic!("alice's {verb} on {resource} in {ns}: {e}"));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let api = runtime
        .block_on(Api::connect(&cluster, &USERS))
        .expect("clients");
    let mut report = String::new();
    let checked = runtime
        .block_on(type_check(&api, &phases))
        .unwrap_or_else(|e| panic!("{e}"));
    report.push_str(&checked);
    let mut disagreements = Vec::new();
    for phase in phases {
        let judged = runtime
            .block_on(run_phase(&cluster, &api, &phase))
            .unwrap_or_else(|e| panic!("{}: {e}", phase.label));
        let (summary, found) = compare(&phase, &judged);
        if phase.label == "overrides-rbac" {
            disagreements.extend(grants::check(&judged));
        }
        report.push_str(&summary);
        disagreements.extend(found);
    }
    report.push_str(&format!("total {:.1}s\n", started.elapsed().as_secs_f64()));
    let _ = std::io::stderr().write_all(format!("apiserver_vap:\n{report}").as_bytes());
    assert!(
        disagreements.is_empty(),
        "{} disagreement(s) between the exported policy and the webhook:\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
}

/// Type-checks every expression of each phase's exported policy,
/// variables included (see `apiserver_vap_support::typecheck`): the summary
/// line, or every warning.
async fn type_check(api: &Api, phases: &[Phase]) -> Result<String, String> {
    let started = Instant::now();
    let exports: Vec<(&str, vap::Export)> = phases
        .iter()
        .map(|p| {
            (
                p.label,
                vap::export(&p.policy, &format!("vap-e2e-{}", p.label)),
            )
        })
        .collect();
    let labels: Vec<(String, &vap::Exported)> = exports
        .iter()
        .flat_map(|(l, e)| {
            e.policies.iter().map(move |p| {
                let name = p.policy.metadata.name.clone().unwrap_or_default();
                (
                    format!("{l}{}", name.trim_start_matches(&format!("vap-e2e-{l}"))),
                    p,
                )
            })
        })
        .collect();
    let policies: Vec<_> = labels
        .iter()
        .map(|(l, p)| (l.as_str(), &p.policy))
        .collect();
    let warnings = typecheck::check_all(api, &policies).await?;
    if !warnings.is_empty() {
        let lines: Vec<String> = warnings.iter().map(ToString::to_string).collect();
        return Err(format!(
            "{} type-checking warning(s) on the exported policies:\n{}",
            warnings.len(),
            lines.join("\n")
        ));
    }
    Ok(format!(
        "  type checking: every variable, validation and message expression of {} policies, no warning ({:.1}s)\n",
        policies.len(),
        started.elapsed().as_secs_f64()
    ))
}

/// Writes the stored objects, installs the policy, waits for its type
/// checking and for it to act, judges every case, and removes the policy.
async fn run_phase(cluster: &Cluster, api: &Api, phase: &Phase) -> Result<Vec<Judged>, String> {
    let name = format!("vap-e2e-{}", phase.label);
    let prepared = prepare(api, phase.cases.clone(), phase.label).await?;
    let scope = phase.label == "built-in";
    if scope {
        prepare_scope(api, phase.namespaces[0]).await?;
    }
    let export = vap::export(&phase.policy, &name);
    let file = cluster.dir().join(format!("{name}.yaml"));
    std::fs::write(&file, export.to_yaml().map_err(|e| e.to_string())?)
        .map_err(|e| format!("{}: {e}", file.display()))?;
    let admin = cluster.kubectl(User::Admin);
    let out = admin.run(&["create", "-f", &file.display().to_string()]);
    if !out.success {
        return Err(format!("cannot install the exported policy: {out}"));
    }
    for exported in &export.policies {
        type_checked(
            api,
            exported.policy.metadata.name.as_deref().unwrap_or_default(),
        )
        .await?;
    }
    let warn = phase.policy.mode == pipelinerollout_webhook::policy::Mode::Warn;
    wait_for(api, &name, phase.namespaces[0], true, warn).await?;
    // No policy may be compiled while requests are judged: the API server
    // can crash (see envtest's `wait_for_policies_compiled`).
    cluster.wait_for_policies_compiled(QUIET, Duration::from_secs(60))?;
    let refreshes = cluster.policy_refreshes()?;
    let judged = judge_all(api, prepared, &phase.policy).await?;
    let during = cluster.policy_refreshes()? - refreshes;
    if during > 0 {
        return Err(format!(
            "kube-apiserver recompiled its policies {during} time(s) while the cases were judged: nothing may change a policy or a binding then"
        ));
    }
    if scope {
        check_scope(api, phase.namespaces[0], &phase.policy).await?;
    }
    for exported in &export.policies {
        let out = admin.run(&[
            "delete",
            "validatingadmissionpolicybinding,validatingadmissionpolicy",
            exported.policy.metadata.name.as_deref().unwrap_or_default(),
        ]);
        if !out.success {
            return Err(format!("cannot remove the policy: {out}"));
        }
    }
    wait_for(api, &name, phase.namespaces[0], false, warn).await?;
    // The probe sees the rollout policy go; the children's and the
    // ConfigMaps' go with the same recompile, which the next phase's stored
    // objects must not meet.
    cluster.wait_for_policies_compiled(QUIET, Duration::from_secs(60))?;
    Ok(judged)
}

/// Waits until the status controller has type-checked the installed
/// policy, and requires that it found nothing.
async fn type_checked(api: &Api, name: &str) -> Result<(), String> {
    let warned = typecheck::warnings(api, name, &[]).await?;
    if warned.is_empty() {
        Ok(())
    } else {
        let lines: Vec<String> = warned.iter().map(ToString::to_string).collect();
        Err(format!("type checking warns:\n{}", lines.join("\n")))
    }
}

/// Waits until a dry run of a rollout with a string timeout is refused
/// (warned about, in warn mode) by the policy `name`, or (`active` false)
/// no longer is.
async fn wait_for(api: &Api, name: &str, ns: &str, active: bool, warn: bool) -> Result<(), String> {
    let mut probe = pipeline_rollout().with_timeout("probe").into_json();
    probe["metadata"]["name"] = json!("vap-probe");
    let path = format!("{}?dryRun=All", rollouts(ns));
    let by = format!("ValidatingAdmissionPolicy '{name}'");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let reply = api
            .send(User::Admin, Method::POST, &path, Some(&probe))
            .await?;
        let acts = if warn {
            reply.ok() && reply.warnings.iter().any(|w| w.contains(&by))
        } else {
            reply.status == 403 && reply.message().contains(&by)
        };
        if acts == active && (active || reply.ok()) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the policy {name} does not {} after 30s: HTTP {} {:?} {}",
                if active { "act" } else { "stop acting" },
                reply.status,
                reply.warnings,
                reply.body
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The summary line of a phase and its disagreements.
fn compare(phase: &Phase, judged: &[Judged]) -> (String, Vec<String>) {
    // Any of the phase's policies: `vap-e2e-LABEL` and its suffixed ones.
    let by = format!("ValidatingAdmissionPolicy 'vap-e2e-{}", phase.label);
    let warn = phase.policy.mode == pipelinerollout_webhook::policy::Mode::Warn;
    let warnings_policy = format!(
        "vap-e2e-{}{}",
        phase.label,
        vap::ROLLOUT_DELETE_WARNINGS_SUFFIX
    );
    let (mut compared, mut denied, mut rejected, mut same_message) = (0, 0, 0, 0);
    let mut found = Vec::new();
    for j in judged {
        let case = &j.case;
        let at = format!("[{}] {} (namespace {})", phase.label, case.name, case.ns);
        let Some(webhook) = &j.webhook else {
            // Refused before admission: by the schema (422) or decoding (400).
            rejected += 1;
            if j.api.ok() || j.api.status == 403 {
                found.push(format!(
                    "{at}: expected the API server to refuse it before admission, got HTTP {}: {}",
                    j.api.status, j.api.body
                ));
            }
            continue;
        };
        compared += 1;
        found.extend(rollout_deletes::compare_warnings(
            &at,
            &warnings_policy,
            j,
            webhook,
        ));
        let vap_message = j
            .api
            .message()
            .split("denied request: ")
            .nth(1)
            .unwrap_or_default();
        let vap_denied = j.api.status == 403 && j.api.message().contains(&by);
        if !j.api.ok() && !vap_denied {
            found.push(format!(
                "{at}: the API server refused it for another reason: HTTP {} {}",
                j.api.status, j.api.body
            ));
            continue;
        }
        let (vap_says, webhook_says) = if warn {
            // Rule 21's warning is no "would deny" (compared above).
            let vap_warns = j
                .api
                .warnings
                .iter()
                .filter(|w| w.contains(&by) && !w.contains(&warnings_policy))
                .count();
            let would_deny = webhook
                .warnings
                .iter()
                .filter(|w| w.starts_with("warn mode, would deny:"))
                .count();
            // One warning per failing validation, one per violation: the
            // same count, unless rule 6 fails on both of its validations
            // (the webhook words both reasons in one violation).
            if vap_warns != would_deny && !phase.policy.force_reapply.require_pausing {
                found.push(format!(
                    "{at}: the policy warns {vap_warns} times, the webhook {would_deny}: {:?} vs {:?}",
                    j.api.warnings, webhook.warnings
                ));
            }
            if vap_denied || !webhook.allowed {
                found.push(format!(
                    "{at}: warn mode denied: policy {}, webhook {}",
                    vap_denied, !webhook.allowed
                ));
            }
            (vap_warns > 0, would_deny > 0)
        } else {
            (vap_denied, !webhook.allowed)
        };
        if vap_says {
            denied += 1;
        }
        if vap_denied && webhook.denials.iter().any(|d| d == vap_message) {
            same_message += 1;
        }
        if vap_says != webhook_says {
            let what = if warn { "warns" } else { "denies" };
            found.push(format!(
                "{at}: the policy {what}: {vap_says}; the webhook {what}: {webhook_says}\n  policy: HTTP {} {} {:?}\n  webhook: denials {:?}, warnings {:?}",
                j.api.status,
                j.api.message(),
                j.api.warnings,
                webhook.denials,
                webhook.warnings
            ));
        }
    }
    let verb = if warn { "warned about" } else { "denied" };
    let summary = format!(
        "  {}: {compared} cases compared ({denied} {verb} by both engines, {} allowed{}), \
         {same_message} denial messages word for word the webhook's, {rejected} refused by the API server before admission\n",
        phase.label,
        compared - denied,
        if warn { " silently" } else { "" },
    );
    (summary, found)
}
