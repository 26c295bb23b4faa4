//! The machinery of the differential test (tests/apiserver/vap.rs): writing each
//! case to the API server as one of the harness's users, and asking the
//! webhook's decision path (`admission::answer`) about the same request.
//!
//! Requests go through kube's client with each user's kubeconfig (one
//! process, instead of a kubectl per write), so the body sent is exactly the
//! case's JSON and the API server's `Warning` headers can be read.

pub mod cases;
pub mod drains;
pub mod gates;
pub mod grants;
pub mod overrides;
pub mod rollout_deletes;
pub mod tables;
pub mod typecheck;
pub mod warned;

use std::collections::BTreeMap;
use std::time::Duration;

use http_body_util::BodyExt as _;
use hyper::{Method, Request};
use pipelinerollout_webhook::admission::{self, AnswerContext, Webhook};
use pipelinerollout_webhook::authz::{self, Authorizer};
use pipelinerollout_webhook::namespace_config::ClusterDefault;
use pipelinerollout_webhook::policy::Policy;
use serde_json::{Value, json};
use test_builders::{pipeline_rollout, users};

use crate::cel_support::webhook::go_round_trip;
use cases::{Account, Case};
use envtest::{Cluster, User};

/// The PipelineRollouts of a namespace.
pub fn rollouts(namespace: &str) -> String {
    format!("/apis/numaplane.numaproj.io/v1alpha1/namespaces/{namespace}/pipelinerollouts")
}

/// An answer of the API server.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// The body (a Status on errors).
    pub body: Value,
    /// The `Warning` headers' texts.
    pub warnings: Vec<String>,
}

impl Reply {
    /// Whether the write went through.
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The error message, if any.
    pub fn message(&self) -> &str {
        self.body["message"].as_str().unwrap_or_default()
    }
}

/// A client per user.
pub struct Api {
    clients: BTreeMap<User, kube::Client>,
}

impl Api {
    /// Clients for `users`, from the cluster's kubeconfigs.
    pub async fn connect(cluster: &Cluster, users: &[User]) -> Result<Self, String> {
        let mut clients = BTreeMap::new();
        for user in users {
            let client =
                pipelinerollout_webhook::apiserver::client(Some(&cluster.kubeconfig(*user)))
                    .await
                    .map_err(|e| e.to_string())?;
            clients.insert(*user, client);
        }
        Ok(Self { clients })
    }

    /// The client of `user`.
    pub fn client(&self, user: User) -> Result<&kube::Client, String> {
        self.clients
            .get(&user)
            .ok_or_else(|| format!("no client for {}", user.name()))
    }

    /// Sends `method path` as `user` with `body` (JSON, or a merge patch for
    /// PATCH).
    pub async fn send(
        &self,
        user: User,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Reply, String> {
        self.send_as(user, None, method, path, body).await
    }

    /// Sends as `user`, or as `account` impersonated by `user`.
    pub async fn send_as(
        &self,
        user: User,
        account: Option<Account>,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Reply, String> {
        let content_type = if method == Method::PATCH {
            "application/merge-patch+json"
        } else {
            "application/json"
        };
        let bytes = body.map(Value::to_string).unwrap_or_default().into_bytes();
        let request = || {
            let mut builder = Request::builder()
                .method(method.clone())
                .uri(path)
                .header("content-type", content_type)
                .header("accept", "application/json");
            if let Some(account) = account {
                builder = builder.header("impersonate-user", account.name);
                for group in account.groups {
                    builder = builder.header("impersonate-group", *group);
                }
            }
            builder
                .body(kube::client::Body::from(bytes.clone()))
                .map_err(|e| format!("{method} {path}: {e}"))
        };
        let client = self.client(user)?;
        // A pooled connection the API server closed as the request went out
        // fails it with hyper's SendRequest error, with no answer, and a new
        // connection that could not be made fails it with Connect before
        // anything is sent: send it once more, on a new connection, after a
        // short pause. Any answer, or any other error, is final.
        let response = match client.send(request()?).await {
            Err(e)
                if e.to_string().contains("SendRequest") || e.to_string().contains("(Connect)") =>
            {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                client.send(request()?).await
            }
            other => other,
        }
        .map_err(|e| format!("{method} {path} as {}: {}", user.name(), chain(&e)))?;
        let status = response.status().as_u16();
        let warnings = response
            .headers()
            .get_all("warning")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(warning_text)
            .collect();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("{method} {path}: reading the answer: {e}"))?
            .to_bytes();
        let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
        Ok(Reply {
            status,
            body,
            warnings,
        })
    }

    /// Sends and requires a 2xx answer.
    pub async fn must(
        &self,
        user: User,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, String> {
        let reply = self.send(user, method.clone(), path, body).await?;
        if reply.ok() {
            Ok(reply.body)
        } else {
            Err(format!(
                "{method} {path}: HTTP {}: {}",
                reply.status, reply.body
            ))
        }
    }
}

/// An error and each of its sources (hyper's `client error (Connect)`
/// says why only in its source: refused, reset, a TLS failure).
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        text.push_str(&format!(": {e}"));
        source = e.source();
    }
    text
}

/// The text of a `Warning: 299 - "text"` header.
fn warning_text(header: &str) -> String {
    match (header.find('"'), header.rfind('"')) {
        (Some(start), Some(end)) if end > start => header[start + 1..end].replace("\\\"", "\""),
        _ => header.to_owned(),
    }
}

/// A case written to the cluster, ready to be judged: its object name and,
/// for an UPDATE, the stored object.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The case.
    pub case: Case,
    /// The object's name.
    pub name: String,
    /// The stored object (UPDATE), as the API server hands it to admission.
    pub stored: Option<Value>,
}

/// The finalizer that keeps a terminating stored object.
const HOLD: &str = "vap-e2e.numaplane.numaproj.io/hold";

/// Writes each UPDATE case's stored object (as admin, before any policy
/// exists): created, its status written through `/status`, deleted if it is
/// to be terminating, and read back.
pub async fn prepare(api: &Api, cases: Vec<Case>, prefix: &str) -> Result<Vec<Prepared>, String> {
    let mut out = Vec::with_capacity(cases.len());
    for (i, case) in cases.into_iter().enumerate() {
        let name = format!("{prefix}-{i}");
        let mut stored = None;
        if let Some(old) = &case.old {
            let collection = case.resource.collection(case.ns);
            let base = format!("{collection}/{name}");
            let mut object = old.object.clone();
            object["metadata"]["name"] = json!(name);
            object["metadata"]["namespace"] = json!(case.ns);
            if old.terminating {
                object["metadata"]["finalizers"] = json!([HOLD]);
            }
            let what = |e: String| format!("{}: the stored object: {e}", case.name);
            api.must(User::Admin, Method::POST, &collection, Some(&object))
                .await
                .map_err(what)?;
            if let Some(status) = &old.status {
                let patch = json!({"status": status});
                api.must(
                    User::Admin,
                    Method::PATCH,
                    &format!("{base}/status"),
                    Some(&patch),
                )
                .await
                .map_err(what)?;
            }
            if old.terminating {
                api.must(User::Admin, Method::DELETE, &base, None)
                    .await
                    .map_err(what)?;
            }
            stored = Some(
                api.must(User::Admin, Method::GET, &base, None)
                    .await
                    .map_err(what)?,
            );
        }
        out.push(Prepared { case, name, stored });
    }
    Ok(out)
}

/// What the webhook's decision path answered.
#[derive(Debug, Clone)]
pub struct WebhookAnswer {
    /// Allowed.
    pub allowed: bool,
    /// Each violation's message.
    pub denials: Vec<String>,
    /// The warnings.
    pub warnings: Vec<String>,
}

/// One case, judged by both engines.
#[derive(Debug, Clone)]
pub struct Judged {
    /// The case.
    pub case: Case,
    /// The API server's answer, with the exported policy installed.
    pub api: Reply,
    /// The webhook's answer to the same request (`None` for a case the
    /// API server refuses before admission).
    pub webhook: Option<WebhookAnswer>,
}

/// Writes every case as its user and asks the webhook about the same
/// request under `policy` (RBAC through `admin`'s client when the policy
/// asks it).
pub async fn judge_all(
    api: &Api,
    prepared: Vec<Prepared>,
    policy: &Policy,
) -> Result<Vec<Judged>, String> {
    let authorizer = match policy.force_reapply.rbac {
        Some(_) => Authorizer::Rbac(authz::RbacAuthorizer::new(api.client(User::Admin)?.clone())),
        None => Authorizer::StaticLists(authz::StaticLists::new("the policy does not ask RBAC")),
    };
    let mut out = Vec::with_capacity(prepared.len());
    for p in prepared {
        let case = &p.case;
        let mut object = match &p.stored {
            Some(stored) if case.on_stored => merged(stored.clone(), &case.object),
            _ => case.object.clone(),
        };
        object["metadata"]["namespace"] = json!(case.ns);
        if case.generate_name {
            object["metadata"]["generateName"] = json!(format!("{}-", p.name));
        } else {
            object["metadata"]["name"] = json!(p.name);
        }
        let collection = case.resource.collection(case.ns);
        let (method, path) = match &p.stored {
            None => (Method::POST, collection),
            Some(_) if case.delete => (Method::DELETE, format!("{collection}/{}", p.name)),
            Some(stored) => {
                object["metadata"]["resourceVersion"] =
                    stored["metadata"]["resourceVersion"].clone();
                let status = if case.through_status { "/status" } else { "" };
                (Method::PUT, format!("{collection}/{}{status}", p.name))
            }
        };
        let body = (!case.delete).then_some(&object);
        let path = if case.dry_run {
            format!("{path}?dryRun=All")
        } else {
            path
        };
        let reply = api
            .send_as(
                if case.account.is_some() {
                    User::Admin
                } else {
                    case.user
                },
                case.account,
                method,
                &path,
                body,
            )
            .await?;
        let webhook = if case.rejected {
            None
        } else {
            Some(webhook_answer(policy, &authorizer, case, &p, object).await?)
        };
        out.push(Judged {
            case: p.case,
            api: reply,
            webhook,
        });
    }
    Ok(out)
}

/// `patch` applied to `target` as a JSON merge patch (RFC 7386): objects
/// merged key by key, `null` removes, anything else replaces.
fn merged(mut target: Value, patch: &Value) -> Value {
    let Value::Object(changes) = patch else {
        return patch.clone();
    };
    if !target.is_object() {
        target = json!({});
    }
    if let Value::Object(map) = &mut target {
        for (key, change) in changes {
            if change.is_null() {
                map.remove(key);
            } else {
                let before = map.remove(key).unwrap_or(Value::Null);
                map.insert(key.clone(), merged(before, change));
            }
        }
    }
    target
}

/// The AdmissionReview the API server would send the webhook for this
/// request, answered by `admission::answer`.
async fn webhook_answer(
    policy: &Policy,
    authorizer: &Authorizer,
    case: &Case,
    p: &Prepared,
    sent: Value,
) -> Result<WebhookAnswer, String> {
    // The API server decodes the body and encodes it again for the webhook.
    let mut object = go_round_trip(&sent);
    let operation = match &p.stored {
        // A DELETE has no object; the stored one is `oldObject`.
        Some(_) if case.delete => {
            object = Value::Null;
            "DELETE"
        }
        // A write to the main resource keeps the stored status.
        Some(stored) => {
            if !case.through_status && stored.get("status").is_some() {
                object["status"] = stored["status"].clone();
            }
            "UPDATE"
        }
        None => {
            if let Some(o) = object.as_object_mut() {
                o.remove("status");
            }
            "CREATE"
        }
    };
    let uid = case.username().replace(':', "-");
    let r = case.resource;
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": format!("{}-{}", p.name, operation),
            "kind": {"group": r.group, "version": r.version, "kind": r.kind},
            "resource": {"group": r.group, "version": r.version, "resource": r.resource},
            "subResource": if case.through_status { "status" } else { "" },
            "name": if case.generate_name { String::new() } else { p.name.clone() },
            "namespace": case.ns,
            "operation": operation,
            "userInfo": {"username": case.username(), "uid": format!("{uid}-uid"), "groups": case.groups()},
            "object": object,
            "oldObject": p.stored.clone().unwrap_or(Value::Null),
            "dryRun": case.dry_run,
        }
    });
    let outcome = answer(policy, authorizer, &review)
        .await
        .map_err(|e| format!("{}: {e}", case.name))?;
    Ok(WebhookAnswer {
        allowed: outcome.allowed(),
        denials: outcome
            .verdict
            .denials
            .iter()
            .map(ToString::to_string)
            .collect(),
        warnings: outcome.verdict.warnings.clone(),
    })
}

/// `/validate`'s answer to an AdmissionReview, through `admission::answer`.
async fn answer(
    policy: &Policy,
    authorizer: &Authorizer,
    review: &Value,
) -> Result<admission::Reply, String> {
    // A cluster default that drains (see tests/cel_support/webhook.rs).
    let drains = ClusterDefault::Strategy("progressive");
    let judge = AnswerContext {
        authorizer,
        permission_timeout: Duration::from_secs(10),
        now: time::OffsetDateTime::now_utc(),
        cluster_default: Some(&drains),
        cluster: None,
    };
    let body = review.to_string().into_bytes();
    let (_, outcome) = admission::answer(Webhook::Validate, policy, &body, judge)
        .await
        .map_err(|e| format!("the webhook could not read the review: {e}"))?;
    Ok(outcome)
}

/// The object of [`check_scope`], written before the policy: its timeout
/// breaks rule 2.
pub async fn prepare_scope(api: &Api, ns: &str) -> Result<(), String> {
    let mut object = pipeline_rollout().with_timeout("1h").into_json();
    object["metadata"]["name"] = json!("scope");
    api.must(User::Admin, Method::POST, &rollouts(ns), Some(&object))
        .await
        .map(|_| ())
}

/// Rule 9's scope, with the policy installed: a status write through
/// `/status` and a DELETE of an object that breaks rule 2 go through; the
/// webhook does not judge the first and allows the second with rule 21's
/// warning only.
pub async fn check_scope(api: &Api, ns: &str, policy: &Policy) -> Result<(), String> {
    let path = format!("{}/scope", rollouts(ns));
    let authorizer = Authorizer::StaticLists(authz::StaticLists::new("scope check"));
    let status = json!({"status": {"phase": "Deployed"}});
    let stored = api
        .must(
            User::Admin,
            Method::PATCH,
            &format!("{path}/status"),
            Some(&status),
        )
        .await
        .map_err(|e| format!("a status write was refused under the policy: {e}"))?;
    api.must(User::Alice, Method::DELETE, &path, None)
        .await
        .map_err(|e| format!("a DELETE was refused under the policy: {e}"))?;
    for (operation, sub_resource, object) in [
        ("UPDATE", "status", stored.clone()),
        ("DELETE", "", Value::Null),
    ] {
        let review = json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": format!("scope-{operation}"),
                "resource": {"group": "numaplane.numaproj.io", "version": "v1alpha1", "resource": "pipelinerollouts"},
                "subResource": sub_resource,
                "name": "scope",
                "namespace": ns,
                "operation": operation,
                "userInfo": {"username": User::Alice.name(), "groups": User::Alice.groups()},
                "object": object,
                "oldObject": stored,
            }
        });
        let outcome = answer(policy, &authorizer, &review).await?;
        // A DELETE is judged by rule 21 only: allowed (the object's bad
        // timeout is not judged again), warning of the deletion timeout,
        // as the exported policies allow it (rule 21's warns, and the
        // rollout policy does not match DELETE).
        let delete_ok = operation == "DELETE"
            && outcome.judged
            && outcome.verdict.warnings.len() == 1
            && outcome.verdict.warnings[0].starts_with("its Pipelines are deleted too");
        if !outcome.allowed() || (outcome.judged && !delete_ok) {
            return Err(format!(
                "the webhook judged a {operation} {sub_resource}: {:?}",
                outcome.verdict
            ));
        }
    }
    Ok(())
}

/// The users the harness writes as are the builders' users: the same
/// username and groups, so the webhook is asked about the request the
/// API server saw.
#[test]
fn the_harness_users_are_the_builders_users() {
    for (user, built) in [
        (User::Admin, users::admin()),
        (User::Alice, users::alice()),
        (User::Carol, users::carol()),
        (User::ArgocdServer, users::argocd_server()),
    ] {
        assert_eq!(users::username(&built), user.name(), "{user:?}");
        assert_eq!(users::groups(&built), user.groups(), "{user:?}");
    }
}
