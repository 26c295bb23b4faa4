//! The exported ValidatingAdmissionPolicies evaluated in process by the
//! `cel` interpreter, as the API server evaluates them, on one request:
//! the policy's matchConstraints (resource rules, the namespaceSelector on
//! the namespace's name, the objectSelector on the object or the stored
//! object) and matchConditions decide whether it is judged, then its
//! variables in order and every validation, each with its message
//! ([`judge`]). [`webhook`] has the webhook's own decision path answer the
//! same request, for the differential tables.
//!
//! What the interpreter lacks is given here as Kubernetes has it: the
//! strings extension (`substring`, `trim`, `split`) from the crate, and
//! `matches` for the anchored wildcard patterns the export writes (the
//! crate is built without regular expressions). There is no `authorizer`:
//! a policy whose grant names an RBAC verb fails to evaluate here, so the
//! tables grant by users and groups; the real API server covers the verb
//! (tests/apiserver_vap.rs).

#![allow(dead_code)] // each test binary uses a part

pub mod table;
pub mod webhook;

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::{MatchResources, ValidatingAdmissionPolicy};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use pipelinerollout_webhook::kinds::{self, Kind};
use pipelinerollout_webhook::vap::{self, Exported};
use serde_json::{Value, json};

use webhook::go_round_trip;

/// A resource an exported policy may match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource {
    /// The API group (`""`: the core group).
    pub group: &'static str,
    /// The version.
    pub version: &'static str,
    /// The resource (plural).
    pub resource: &'static str,
    /// The kind.
    pub kind: &'static str,
}

impl Resource {
    /// One of the guarded kinds.
    pub const fn of(kind: Kind) -> Self {
        Self {
            group: kind.group(),
            version: kinds::VERSION,
            resource: kind.resource(),
            kind: kind.kind(),
        }
    }
}

/// Core ConfigMaps.
pub const CONFIGMAPS: Resource = Resource {
    group: "",
    version: "v1",
    resource: kinds::CONFIGMAPS,
    kind: "ConfigMap",
};

/// One admission request, as the API server hands it to a policy (and, in
/// an AdmissionReview, to the webhook).
#[derive(Debug, Clone)]
pub struct Request {
    /// `CREATE`, `UPDATE` or `DELETE`.
    pub operation: &'static str,
    /// What is written.
    pub resource: Resource,
    /// The namespace.
    pub namespace: String,
    /// The object's name (`""` for a CREATE with generateName).
    pub name: String,
    /// The requester.
    pub user: String,
    /// The requester's groups.
    pub groups: Vec<String>,
    /// The object (`null` on DELETE).
    pub object: Value,
    /// The stored object (`null` on CREATE).
    pub old_object: Value,
    /// Sent with `dryRun=All`.
    pub dry_run: bool,
}

impl Request {
    fn new(operation: &'static str, resource: Resource, object: Value, old: Value) -> Self {
        let named = if object.is_null() { &old } else { &object };
        let name = named["metadata"]["name"].as_str().unwrap_or("demo").to_owned();
        Self {
            operation,
            resource,
            namespace: "team".to_owned(),
            name,
            user: "alice".to_owned(),
            groups: vec!["devs".to_owned(), "system:authenticated".to_owned()],
            object,
            old_object: old,
            dry_run: false,
        }
    }

    /// A CREATE of `object`, by alice in namespace `team`.
    pub fn create(resource: Resource, object: Value) -> Self {
        Self::new("CREATE", resource, object, Value::Null)
    }

    /// An UPDATE of `old` to `new`.
    pub fn update(resource: Resource, old: Value, new: Value) -> Self {
        Self::new("UPDATE", resource, new, old)
    }

    /// A DELETE of `stored`.
    pub fn delete(resource: Resource, stored: Value) -> Self {
        Self::new("DELETE", resource, Value::Null, stored)
    }

    /// Made by `user`, in `groups`.
    pub fn by(mut self, user: &str, groups: &[&str]) -> Self {
        self.user = user.to_owned();
        self.groups = groups.iter().map(|g| (*g).to_owned()).collect();
        self
    }

    /// In namespace `ns`.
    pub fn in_namespace(mut self, ns: &str) -> Self {
        self.namespace = ns.to_owned();
        self
    }

    /// Sent with `dryRun=All`.
    pub fn dry_run(mut self) -> Self {
        self.dry_run = true;
        self
    }

    /// The `request` variable of CEL.
    fn cel_request(&self) -> Value {
        let r = self.resource;
        json!({"namespace": self.namespace, "name": self.name, "operation": self.operation,
            "kind": {"group": r.group, "version": r.version, "kind": r.kind},
            "resource": {"group": r.group, "version": r.version, "resource": r.resource},
            "userInfo": {"username": self.user, "groups": self.groups},
            "dryRun": self.dry_run})
    }
}

/// One validation's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Which rule it expresses (the export's label).
    pub rule: &'static str,
    /// Whether its expression holds.
    pub holds: bool,
    /// Its messageExpression's value (evaluated, as the API server does,
    /// only when it fails; empty when it holds).
    pub message: String,
    /// Why its expression could not be evaluated, if it could not.
    pub error: Option<String>,
}

/// What one exported policy makes of a request: `None` when its
/// matchConstraints or matchConditions leave the request alone, else every
/// validation's verdict, in order.
pub fn judge(exported: &Exported, request: &Request) -> Option<Vec<Verdict>> {
    let spec = exported.policy.spec.as_ref().expect("a spec");
    if !matched(spec.match_constraints.as_ref().expect("matchConstraints"), request) {
        return None;
    }
    let mut context = Context::new(request);
    for condition in spec.match_conditions.as_deref().unwrap_or_default() {
        let matches = context.boolean(&condition.expression, &condition.name);
        if !matches.unwrap_or_else(|e| panic!("matchCondition {}: {e}", condition.name)) {
            return None;
        }
    }
    for var in spec.variables.as_deref().unwrap_or_default() {
        context.variable(&var.name, &var.expression);
    }
    let verdicts = spec
        .validations
        .as_deref()
        .unwrap_or_default()
        .iter()
        .zip(&exported.validations)
        .map(|(v, rule)| {
            // An expression that fails fails the validation (failurePolicy
            // Fail); the messageExpression is evaluated, as the API server
            // does, only for a failing validation.
            let (holds, error) = match context.boolean(&v.expression, rule) {
                Ok(holds) => (holds, None),
                Err(e) => (false, Some(e)),
            };
            let text = v.message_expression.as_deref().expect("a messageExpression");
            let message = match (holds, &error) {
                (true, _) => String::new(),
                (false, Some(e)) => format!("expression failed: {e}"),
                (false, None) => match context.run(text, rule) {
                    Ok(cel::Value::String(s)) => s.to_string(),
                    other => panic!("{rule}: messageExpression is not a string: {other:?}"),
                },
            };
            Verdict {
                rule,
                holds,
                message,
                error,
            }
        })
        .collect();
    Some(verdicts)
}

/// The verdicts of `exported` on `request`, which it must judge.
pub fn judged(exported: &Exported, request: &Request) -> Vec<Verdict> {
    judge(exported, request).unwrap_or_else(|| {
        panic!(
            "{} does not judge a {} of {}",
            name(&exported.policy),
            request.operation,
            request.resource.resource
        )
    })
}

/// The validations of `exported` that fail on `request` (none when it is
/// not judged).
pub fn failing(exported: &Exported, request: &Request) -> Vec<Verdict> {
    judge(exported, request)
        .unwrap_or_default()
        .into_iter()
        .filter(|v| !v.holds)
        .collect()
}

fn name(policy: &ValidatingAdmissionPolicy) -> &str {
    policy.metadata.name.as_deref().unwrap_or_default()
}

/// The exported policy whose name ends in `suffix` (`""`: the first, the
/// PipelineRollout policy).
pub fn policy_named<'a>(export: &'a vap::Export, suffix: &str) -> &'a Exported {
    if suffix.is_empty() {
        return export.rollouts();
    }
    export
        .policies
        .iter()
        .find(|p| name(&p.policy).ends_with(suffix))
        .unwrap_or_else(|| panic!("no policy {suffix}"))
}

/// Whether `constraints` match `request`, as the API server reads them
/// (`matchPolicy: Equivalent` matches the same group and resource).
fn matched(constraints: &MatchResources, request: &Request) -> bool {
    let r = request.resource;
    let rule = constraints
        .resource_rules
        .as_deref()
        .unwrap_or_default()
        .iter()
        .any(|rule| {
            let has = |list: &Option<Vec<String>>, want: &str| {
                list.as_deref()
                    .unwrap_or_default()
                    .iter()
                    .any(|x| x == want || x == "*")
            };
            has(&rule.api_groups, r.group)
                && has(&rule.resources, r.resource)
                && has(&rule.operations, request.operation)
        });
    let namespace = json!({"kubernetes.io/metadata.name": request.namespace});
    let labels = |o: &Value| o["metadata"]["labels"].clone();
    let objects = constraints.object_selector.as_ref().is_none_or(|s| {
        selects(s, &labels(&request.object)) || selects(s, &labels(&request.old_object))
    });
    rule && objects
        && constraints
            .namespace_selector
            .as_ref()
            .is_none_or(|s| selects(s, &namespace))
}

/// Whether a label selector selects `labels` (a JSON map, or null).
fn selects(selector: &LabelSelector, labels: &Value) -> bool {
    let get = |k: &str| labels.get(k).and_then(Value::as_str);
    let exact = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| get(k) == Some(v.as_str()));
    exact
        && selector.match_expressions.iter().flatten().all(|e| {
            let values = e.values.as_deref().unwrap_or_default();
            let in_values = get(&e.key).is_some_and(|v| values.iter().any(|x| x == v));
            match e.operator.as_str() {
                "In" => in_values,
                "NotIn" => !in_values,
                "Exists" => get(&e.key).is_some(),
                "DoesNotExist" => get(&e.key).is_none(),
                other => panic!("operator {other}"),
            }
        })
}

/// The interpreter's context for one request: Kubernetes' functions, the
/// request's variables, and the policy's variables as they are added.
struct Context {
    env: Arc<cel::Env>,
    context: cel::Context<'static, 'static>,
    variables: HashMap<String, cel::Value>,
}

impl Context {
    fn new(request: &Request) -> Self {
        let mut env = cel::Env::stdlib();
        env.add_extension(cel::extensions::strings)
            .expect("the strings extension");
        let env = Arc::new(env);
        let mut context = cel::Context::with_env(Arc::clone(&env));
        context
            .add_function(
                "matches",
                |cel::extractors::This(s): cel::extractors::This<Arc<String>>,
                 regex: Arc<String>| wildcard(&regex, &s),
            )
            .expect("matches is not the interpreter's without regex");
        context.add_variable_from_value("object", to_cel(&request.object));
        // The stored object comes from etcd, as Go wrote it.
        context.add_variable_from_value("oldObject", to_cel(&go_round_trip(&request.old_object)));
        context.add_variable_from_value("request", to_cel(&request.cel_request()));
        context.add_variable_from_value("variables", HashMap::<String, cel::Value>::new());
        Self {
            env,
            context,
            variables: HashMap::new(),
        }
    }

    /// `text` evaluated; an error as the interpreter words it. A text that
    /// does not parse is a defect of the export, not a verdict.
    fn run(&self, text: &str, what: &str) -> Result<cel::Value, String> {
        // Parsing is most of the cost: each text is parsed once per thread.
        thread_local! {
            static PARSED: RefCell<HashMap<String, Rc<cel::Program>>> = RefCell::default();
        }
        let program = PARSED.with(|parsed| {
            let mut parsed = parsed.borrow_mut();
            if let Some(p) = parsed.get(text) {
                return Rc::clone(p);
            }
            let program = Rc::new(
                self.env
                    .compile(text)
                    .unwrap_or_else(|e| panic!("{what} does not parse: {e}\n{text}")),
            );
            parsed.insert(text.to_owned(), Rc::clone(&program));
            program
        });
        program.execute(&self.context).map_err(|e| e.to_string())
    }

    fn boolean(&self, text: &str, what: &str) -> Result<bool, String> {
        match self.run(text, what)? {
            cel::Value::Bool(b) => Ok(b),
            other => panic!("{what}: not a bool: {other:?}"),
        }
    }

    /// Adds `variables.NAME`; one that fails to evaluate is left out, so
    /// that a validation reading it fails (the API server evaluates
    /// variables lazily: only their readers fail).
    fn variable(&mut self, name: &str, text: &str) {
        if let Ok(value) = self.run(text, &format!("variables.{name}")) {
            self.variables.insert(name.to_owned(), value);
            self.context
                .add_variable_from_value("variables", self.variables.clone());
        }
    }
}

/// `regex`, one the export writes for a namespace pattern (`^a.*b$`: only
/// literal characters and `.*` runs, anchored), matched against `s`.
fn wildcard(regex: &str, s: &str) -> bool {
    let inner = regex
        .strip_prefix('^')
        .and_then(|r| r.strip_suffix('$'))
        .unwrap_or_else(|| panic!("not an anchored pattern: {regex}"));
    let parts: Vec<&str> = inner.split(".*").collect();
    assert!(
        parts
            .iter()
            .all(|p| p.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')),
        "not a wildcard pattern: {regex}"
    );
    let (first, rest) = parts.split_first().expect("split yields a part");
    let Some(mut left) = s.strip_prefix(first) else {
        return false;
    };
    let Some((last, middle)) = rest.split_last() else {
        return left.is_empty();
    };
    for part in middle {
        match left.find(part) {
            Some(at) => left = &left[at + part.len()..],
            None => return false,
        }
    }
    left.len() >= last.len() && left.ends_with(last)
}

/// A JSON value as the API server hands it to CEL: an integer that fits
/// int64 is an `int` (`cel::to_value` makes a positive one a `uint`, which
/// Kubernetes never does), any other number a `double`.
pub fn to_cel(v: &Value) -> cel::Value {
    match v {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => (*b).into(),
        Value::Number(n) => n
            .as_i64()
            .map_or_else(|| n.as_f64().unwrap_or(f64::NAN).into(), Into::into),
        Value::String(s) => s.clone().into(),
        Value::Array(items) => items.iter().map(to_cel).collect::<Vec<_>>().into(),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| (k.clone(), to_cel(v)))
            .collect::<HashMap<_, _>>()
            .into(),
    }
}

#[test]
fn wildcards_match_as_the_policy_reads_them() {
    for (regex, s, want) in [
        ("^team-.*-prod$", "team-a-prod", true),
        ("^team-.*-prod$", "team--prod", true),
        ("^team-.*-prod$", "team-prod", false),
        ("^team-.*$", "team-", true),
        ("^.*$", "", true),
        ("^a.*b.*c$", "abc", true),
        ("^a.*b.*c$", "acb", false),
        ("^ab$", "ab", true),
        ("^ab$", "abc", false),
    ] {
        assert_eq!(wildcard(regex, s), want, "{regex} on {s}");
    }
}
