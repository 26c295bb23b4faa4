//! The Deployment's pod: its namespace's Pod Security level, its security
//! context, its spread over nodes and zones, its disruption budget, the
//! TLS and policy volumes and the policy ConfigMap they come from.

use crate::manifests::binary::{HELP, flag_value, port_of};
use crate::manifests::install::{Install, named, one, selects};
use crate::manifests::render::{Rendering, on_every_rendering};
use crate::manifests::{NAMESPACE, POLICY_CONFIGMAP, TLS_SECRET};
use k8s_openapi::api::core::v1::{Container, PodSpec, Probe, Service};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// The Deployment's pod: its labels, its spec and its one container.
pub(crate) struct Pod<'a> {
    pub(crate) labels: BTreeMap<String, String>,
    pub(crate) spec: &'a PodSpec,
    pub(crate) container: &'a Container,
}

pub(crate) fn pod(install: &Install) -> Pod<'_> {
    let deployment = one(&install.deployments, "Deployment");
    let template = &deployment.spec.template;
    let labels = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .expect("pod labels");
    let spec: &PodSpec = template.spec.as_ref().expect("pod spec");
    let container = one(&spec.containers, "container");
    Pod {
        labels,
        spec,
        container,
    }
}

/// The webhook port (the `--listen` port) and the admin port (the
/// `--admin-listen` one) the container uses.
pub(crate) fn ports(container: &Container) -> (i32, i32) {
    let listen = flag_value(container, &HELP, "--listen", "WEBHOOK_LISTEN").expect("--listen");
    let admin = flag_value(container, &HELP, "--admin-listen", "WEBHOOK_ADMIN_LISTEN")
        .expect("--admin-listen");
    (port_of(&listen), port_of(&admin))
}

/// The container port the Service's `port` targets.
pub(crate) fn service_port(service: &Service, container: &Container, port: i32) -> i32 {
    let service_ports = service
        .spec
        .as_ref()
        .expect("Service spec")
        .ports
        .clone()
        .unwrap_or_default();
    let p = service_ports
        .iter()
        .find(|p| p.port == port)
        .unwrap_or_else(|| panic!("the Service has no port {port}"));
    resolve_port(
        container,
        p.target_port.as_ref().unwrap_or(&IntOrString::Int(port)),
    )
}

/// The volume and the file name behind `file` (a path a flag names),
/// checked to be a read-only directory mount.
pub(crate) fn mounted_dir(container: &Container, file: &str) -> (String, String) {
    let mounts = container.volume_mounts.clone().unwrap_or_default();
    let path = Path::new(file);
    let dir = path
        .parent()
        .and_then(Path::to_str)
        .unwrap_or_else(|| panic!("{file} has no directory"))
        .to_owned();
    let mount = mounts
        .iter()
        .find(|m| m.mount_path.trim_end_matches('/') == dir)
        .unwrap_or_else(|| panic!("nothing is mounted at {dir} (for {file})"));
    assert!(
        mount.sub_path.is_none() && mount.sub_path_expr.is_none(),
        "{dir} is mounted as a directory (subPath would never be updated)"
    );
    assert_eq!(mount.read_only, Some(true), "{dir} is mounted read-only");
    (
        mount.name.clone(),
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_else(|| panic!("{file} has no file name"))
            .to_owned(),
    )
}

/// The ConfigMap the `--policy` file comes from, and its key.
pub(crate) fn policy_source(pod: &Pod<'_>) -> (String, String) {
    let volumes = pod.spec.volumes.clone().unwrap_or_default();
    let policy_file =
        flag_value(pod.container, &HELP, "--policy", "WEBHOOK_POLICY").expect("--policy");
    let (policy_volume, policy_key) = mounted_dir(pod.container, &policy_file);
    let policy_cm_name = volumes
        .iter()
        .find(|v| v.name == policy_volume)
        .and_then(|v| v.config_map.as_ref())
        .map(|c| c.name.clone())
        .expect("the policy volume is a ConfigMap");
    (policy_cm_name, policy_key)
}

/// The container port that `port` (a number or a name) stands for.
fn resolve_port(container: &Container, port: &IntOrString) -> i32 {
    let ports = container.ports.clone().unwrap_or_default();
    match port {
        IntOrString::Int(n) => *n,
        IntOrString::String(name) => {
            ports
                .iter()
                .find(|p| p.name.as_deref() == Some(name))
                .unwrap_or_else(|| panic!("container has no port named {name}"))
                .container_port
        }
    }
}

pub(crate) fn http_probe(
    container: &Container,
    probe: Option<&Probe>,
    what: &str,
) -> (String, i32) {
    let probe = probe.unwrap_or_else(|| panic!("container has no {what}"));
    let get = probe
        .http_get
        .as_ref()
        .unwrap_or_else(|| panic!("{what} is not an httpGet"));
    assert_eq!(
        get.scheme.as_deref().unwrap_or("HTTP"),
        "HTTP",
        "{what}: the admin port is plain HTTP"
    );
    (
        get.path.clone().unwrap_or_default(),
        resolve_port(container, &get.port),
    )
}

/// The namespace.
pub(crate) fn namespace_is_restricted(r: &Rendering) {
    let namespace = named(&r.install.namespaces, NAMESPACE, "Namespace");
    let pod_security = namespace
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("pod-security.kubernetes.io/enforce"));
    assert_eq!(
        pod_security.map(String::as_str),
        Some("restricted"),
        "the webhook's namespace enforces the restricted Pod Security level"
    );
}

#[test]
fn the_namespace_enforces_the_restricted_pod_security_level() {
    on_every_rendering(namespace_is_restricted);
}

/// Security context: the container's settings, falling back to the pod's.
pub(crate) fn security_context_is_restricted(r: &Rendering) {
    let pod = pod(&r.install);
    let pod_sc = pod.spec.security_context.clone().unwrap_or_default();
    let sc = pod.container.security_context.clone().unwrap_or_default();
    assert_eq!(
        sc.run_as_non_root.or(pod_sc.run_as_non_root),
        Some(true),
        "runAsNonRoot"
    );
    let user = sc.run_as_user.or(pod_sc.run_as_user).expect("runAsUser");
    assert_eq!(
        user, 65532,
        "runs as the image's nonroot user (image/rootfs.sh)"
    );
    assert_eq!(
        sc.read_only_root_filesystem,
        Some(true),
        "readOnlyRootFilesystem"
    );
    assert_eq!(
        sc.allow_privilege_escalation,
        Some(false),
        "allowPrivilegeEscalation"
    );
    assert_ne!(sc.privileged, Some(true), "not privileged");
    let caps = sc.capabilities.clone().expect("capabilities");
    assert_eq!(
        caps.drop,
        Some(vec!["ALL".to_owned()]),
        "drops all capabilities"
    );
    assert!(
        caps.add.unwrap_or_default().is_empty(),
        "adds no capability"
    );
    let seccomp = sc
        .seccomp_profile
        .or(pod_sc.seccomp_profile)
        .expect("seccompProfile");
    assert_eq!(seccomp.type_, "RuntimeDefault");
    assert_ne!(pod.spec.host_network, Some(true));
    assert_ne!(pod.spec.host_pid, Some(true));
    assert_ne!(pod.spec.host_ipc, Some(true));
}

#[test]
fn the_security_context_is_non_root_read_only_and_drops_all_capabilities() {
    on_every_rendering(security_context_is_restricted);
}

/// Topology spread: per node, and per zone without blocking scheduling.
pub(crate) fn pods_spread_over_nodes_and_zones(r: &Rendering) {
    let pod = pod(&r.install);
    let spread = pod
        .spec
        .topology_spread_constraints
        .clone()
        .unwrap_or_default();
    let by_key = |key: &str| {
        spread
            .iter()
            .find(|c| c.topology_key == key)
            .unwrap_or_else(|| panic!("no topologySpreadConstraint on {key}"))
            .clone()
    };
    for key in ["kubernetes.io/hostname", "topology.kubernetes.io/zone"] {
        let c = by_key(key);
        assert!(
            selects(
                c.label_selector.as_ref().expect("labelSelector"),
                &pod.labels
            ),
            "the spread on {key} counts the webhook's pods"
        );
    }
    assert_eq!(
        by_key("topology.kubernetes.io/zone").when_unsatisfiable,
        "ScheduleAnyway"
    );
}

#[test]
fn the_pods_spread_over_nodes_and_zones() {
    on_every_rendering(pods_spread_over_nodes_and_zones);
}

/// PodDisruptionBudget.
pub(crate) fn disruption_budget_keeps_one_pod(r: &Rendering) {
    let pod = pod(&r.install);
    let pdb = one(&r.install.pdbs, "PodDisruptionBudget");
    let pdb_spec = pdb.spec.as_ref().expect("PDB spec");
    assert_eq!(pdb_spec.min_available, Some(IntOrString::Int(1)));
    assert!(selects(
        pdb_spec.selector.as_ref().expect("PDB selector"),
        &pod.labels
    ));
}

#[test]
fn the_pod_disruption_budget_keeps_one_pod() {
    on_every_rendering(disruption_budget_keeps_one_pod);
}

/// Volumes: the TLS Secret and the policy ConfigMap, as directories that
/// hold the files the args name.
pub(crate) fn tls_and_policy_are_read_only_directories(r: &Rendering) {
    let pod = pod(&r.install);
    let container = pod.container;
    let volumes = pod.spec.volumes.clone().unwrap_or_default();
    let tls_cert =
        flag_value(container, &HELP, "--tls-cert", "WEBHOOK_TLS_CERT").expect("--tls-cert");
    let tls_key = flag_value(container, &HELP, "--tls-key", "WEBHOOK_TLS_KEY").expect("--tls-key");
    let (cert_volume, cert_file) = mounted_dir(container, &tls_cert);
    let (key_volume, key_file) = mounted_dir(container, &tls_key);
    assert_eq!(
        cert_volume, key_volume,
        "certificate and key come from one Secret"
    );
    assert_eq!(
        (cert_file.as_str(), key_file.as_str()),
        ("tls.crt", "tls.key")
    );
    let tls_volume = volumes
        .iter()
        .find(|v| v.name == cert_volume)
        .expect("TLS volume");
    let secret_name = tls_volume
        .secret
        .as_ref()
        .and_then(|s| s.secret_name.clone())
        .expect("the TLS volume is a Secret");
    assert_eq!(secret_name, TLS_SECRET);
    policy_source(&pod);
}

#[test]
fn tls_and_policy_are_mounted_as_read_only_directories() {
    on_every_rendering(tls_and_policy_are_read_only_directories);
}

/// The policy ConfigMap: fixed name (the webhook reloads it; a policy
/// edit does not roll the pods), and a policy the binary accepts, with
/// RBAC authorisation on.
pub(crate) fn policy_configmap_keeps_its_name_and_asks_rbac(r: &Rendering) {
    let (policy_cm_name, _) = policy_source(&pod(&r.install));
    assert_eq!(
        policy_cm_name, POLICY_CONFIGMAP,
        "the policy ConfigMap keeps its name (disableNameSuffixHash): edits are hot-reloaded"
    );
    let effective = r.effective_policy();
    let rendered: Value = serde_saphyr::from_str(effective).unwrap_or_else(|e| {
        panic!("check-policy printed YAML that does not parse ({e}):\n{effective}")
    });
    assert_eq!(
        rendered["forceReapply"]["rbac"]["verb"], "force-reapply",
        "the cluster policy asks RBAC for the verb force-reapply:\n{effective}"
    );
}

#[test]
fn the_policy_configmap_keeps_its_name_and_its_policy_asks_rbac() {
    on_every_rendering(policy_configmap_keeps_its_name_and_asks_rbac);
}
