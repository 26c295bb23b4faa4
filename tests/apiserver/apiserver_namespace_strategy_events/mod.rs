//! Rule 24's Events through the real kube-apiserver, on the shared
//! installation of `tests/apiserver/namespace_strategy.rs`: an allowed
//! strategy that skips draining and a refused UPDATE are Events on the
//! ConfigMap the API server stored (its uid); dry runs and a forged review
//! with a made-up uid record none.

use envtest::{Cluster, User};
use serde_json::{Value, json};

use super::{LABEL, assert_refused, config_map, set_strategy, shared, team};
use crate::apiserver_support;

/// The webhook's Events about ConfigMaps in `ns`, as (name, uid, reason,
/// type, action, note), each checked to be the webhook's and about a
/// `v1` ConfigMap; waits up to 10 s until `want` (name, reason) is among
/// them (Events are sent off the request path, in the order decided).
fn config_map_events(cluster: &Cluster, ns: &str, want: (&str, &str)) -> Vec<[String; 6]> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let found: Vec<[String; 6]> = apiserver_support::events_in(cluster, ns)
            .iter()
            .filter(|e| e["reportingController"] == "pipelinerollout-webhook")
            .map(|e| {
                let regarding = &e["regarding"];
                assert_eq!(regarding["kind"], "ConfigMap", "{e:#}");
                assert_eq!(regarding["apiVersion"], "v1", "{e:#}");
                assert_eq!(regarding["namespace"], ns, "{e:#}");
                let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
                [
                    text(&regarding["name"]),
                    text(&regarding["uid"]),
                    text(&e["reason"]),
                    text(&e["type"]),
                    text(&e["action"]),
                    text(&e["note"]),
                ]
            })
            .collect();
        let has = found.iter().any(|[n, _, r, ..]| n == want.0 && r == want.1);
        if has || std::time::Instant::now() > deadline {
            return found;
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
}

fn uid_of(cluster: &Cluster, ns: &str, name: &str) -> String {
    let object = cluster
        .kubectl(User::Admin)
        .get("configmap", ns, name)
        .expect("stored");
    object["metadata"]["uid"]
        .as_str()
        .expect("a uid")
        .to_owned()
}

/// A review sent straight to the webhook, not through the API server: an
/// UPDATE of `ns/name` to `no-strategy` by "mallory" in `system:masters`
/// (so allowed, and asking for an Event), naming `uid`.
fn forged_review(ns: &str, name: &str, uid: &str) -> Value {
    let mut object = config_map(ns, name, true, "no-strategy");
    object["metadata"]["uid"] = json!(uid);
    let mut old = config_map(ns, name, true, "progressive");
    old["metadata"]["uid"] = json!(uid);
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "5b1f2e3d-4c5b-4a69-8f7e-0d1c2b3a4958",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": name,
            "namespace": ns,
            "operation": "UPDATE",
            "userInfo": {"username": "mallory", "groups": ["system:masters", "system:authenticated"]},
            "object": object,
            "oldObject": old,
            "dryRun": false,
        },
    })
}

#[test]
fn rule_24s_decisions_are_events_on_the_config_map() {
    let Some((env, _turn)) = shared() else { return };
    let cluster = &env.cluster;
    let ns = "e2e-ns-strategy-events";
    team(cluster, ns);
    let allowed = "NamespaceStrategyAllowed";
    let denied = "NamespaceStrategyDenied";

    // Argo CD's API server (in namespaceStrategy's users) creates it with
    // no-strategy: an Event on the ConfigMap the API server stored.
    cluster
        .kubectl(User::ArgocdServer)
        .create(
            &config_map(ns, "numaplane-config", true, "no-strategy"),
            &[],
        )
        .expect_success("argocd-server creates a no-strategy ConfigMap");
    let uid = uid_of(cluster, ns, "numaplane-config");
    let events = config_map_events(cluster, ns, ("numaplane-config", allowed));
    let [[name, event_uid, reason, kind, action, note]] = events.as_slice() else {
        panic!("one Event: {events:#?}");
    };
    assert_eq!(
        (
            name.as_str(),
            reason.as_str(),
            kind.as_str(),
            action.as_str()
        ),
        ("numaplane-config", allowed, "Warning", "Allowed")
    );
    assert_eq!(event_uid, &uid, "the Event is about the stored ConfigMap");
    assert!(
        note.contains(
            "allowed by the admission webhook: user \"system:serviceaccount:argocd:argocd-server\" set data.upgradeStrategy to \"no-strategy\" in namespace \"e2e-ns-strategy-events\", so every rollout there upgrades by plain apply, with no pause and no drain"
        ),
        "{note}"
    );

    // Dry runs, refused (alice) and allowed (Argo CD's API server), are
    // judged and record nothing.
    set_strategy(cluster, User::Alice, ns, "numaplane-config", "progressive")
        .expect_success("alice writes progressive");
    for (user, refused) in [(User::Alice, true), (User::ArgocdServer, false)] {
        let out = cluster.kubectl(user).merge_patch(
            "configmap",
            ns,
            "numaplane-config",
            &json!({"data": {"upgradeStrategy": "no-strategy"}}),
            &["--dry-run=server"],
        );
        if refused {
            assert_refused(&out, "may not set data.upgradeStrategy");
        } else {
            out.expect_success("a permitted dry run");
        }
    }

    // alice's refused UPDATE: changing the value.
    let out = set_strategy(cluster, User::Alice, ns, "numaplane-config", "no-strategy");
    assert_refused(&out, "user \"alice\" may not set data.upgradeStrategy");
    // A forged review about the real ConfigMap, with a made-up uid: allowed
    // (mallory claims system:masters), and no Event, counted unverified.
    let unverified = format!(
        "pipelinerollout_webhook_events_total{{reason=\"{allowed}\",result=\"unverified\"}}"
    );
    let before = apiserver_support::webhook_sample(env, &unverified);
    let forged = forged_review(
        ns,
        "numaplane-config",
        "00000000-0000-0000-0000-000000000000",
    );
    let (status, body) = env
        .webhook
        .post_json(cluster, "/validate?timeout=5s", &forged.to_string())
        .expect("the webhook answers");
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).expect("an AdmissionReview");
    assert_eq!(answer["response"]["allowed"], true, "{body}");
    // alice's refused UPDATE: adding the label to a no-strategy ConfigMap.
    cluster
        .kubectl(User::Alice)
        .create(&config_map(ns, "settings", false, "no-strategy"), &[])
        .expect_success("an ordinary ConfigMap");
    let out = cluster.kubectl(User::Alice).run(&[
        "label",
        "configmap",
        "settings",
        "-n",
        ns,
        &format!("{LABEL}=namespace-level-config"),
    ]);
    assert_refused(&out, "user \"alice\" may not set data.upgradeStrategy");

    // One task publishes the Events in the order they were asked for, so
    // once the last refusal's Event is there, any Event of the dry runs or
    // of the forged review would be too.
    let events = config_map_events(cluster, ns, ("settings", denied));
    let seen: Vec<(&str, &str)> = events
        .iter()
        .map(|[name, _, reason, ..]| (name.as_str(), reason.as_str()))
        .collect();
    let mut want = vec![
        ("numaplane-config", allowed),
        ("numaplane-config", denied),
        ("settings", denied),
    ];
    let mut sorted = seen.clone();
    sorted.sort();
    want.sort();
    assert_eq!(sorted, want, "{events:#?}");
    for [name, event_uid, reason, kind, action, note] in &events {
        if reason != denied {
            continue;
        }
        assert_eq!((kind.as_str(), action.as_str()), ("Warning", "Denied"));
        assert_eq!(event_uid, &uid_of(cluster, ns, name), "{name}");
        assert!(
            note.starts_with("refused by the admission webhook: user \"alice\" may not set data.upgradeStrategy to \"no-strategy\" in namespace \"e2e-ns-strategy-events\""),
            "{note}"
        );
    }
    assert_eq!(
        apiserver_support::webhook_sample(env, &unverified),
        before + 1.0,
        "the forged review's Event is counted as unverified"
    );
}
