//! The rule-table cases of src/policy/rules/tests/ that can be written to
//! a real API server, as PipelineRollout documents, for the differential
//! test. Some of those cases cannot: the CRD's schema, or the API server's
//! own decoding of `metadata`, refuses them before any admission control
//! runs (a string `scaleFactor`, `spec.pipeline` a string, a number as an
//! annotation, no `spec`). They are kept, marked [`Case::rejected`], to show
//! that neither engine ever sees them.

use serde_json::{Value, json};
use test_builders::PipelineRolloutDoc;

use envtest::User;

/// The stored object of an UPDATE case, written before the policy exists.
#[derive(Debug, Clone)]
pub struct Old {
    /// The object as first created.
    pub object: Value,
    /// The status then written through `/status`, if any.
    pub status: Option<Value>,
    /// Deleted (held by a finalizer) before the case, so it is terminating.
    pub terminating: bool,
}

/// What a case writes: a resource the exported policies match.
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

/// Numaplane's PipelineRollouts.
pub const ROLLOUTS: Resource = Resource {
    group: "numaplane.numaproj.io",
    version: "v1alpha1",
    resource: "pipelinerollouts",
    kind: "PipelineRollout",
};
/// Numaflow's Pipelines.
pub const PIPELINES: Resource = Resource {
    group: "numaflow.numaproj.io",
    version: "v1alpha1",
    resource: "pipelines",
    kind: "Pipeline",
};
/// Numaflow's MonoVertices.
pub const MONOVERTICES: Resource = Resource {
    resource: "monovertices",
    kind: "MonoVertex",
    ..PIPELINES
};
/// Numaflow's InterStepBufferServices.
pub const ISB_SERVICES: Resource = Resource {
    resource: "interstepbufferservices",
    kind: "InterStepBufferService",
    ..PIPELINES
};
/// ConfigMaps.
pub const CONFIGMAPS: Resource = Resource {
    group: "",
    version: "v1",
    resource: "configmaps",
    kind: "ConfigMap",
};

impl Resource {
    /// The collection's path in `namespace`.
    pub fn collection(self, namespace: &str) -> String {
        if self.group.is_empty() {
            format!(
                "/api/{}/namespaces/{namespace}/{}",
                self.version, self.resource
            )
        } else {
            format!(
                "/apis/{}/{}/namespaces/{namespace}/{}",
                self.group, self.version, self.resource
            )
        }
    }
}

/// An account the harness has no kubeconfig for: admin impersonates it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Account {
    /// The username.
    pub name: &'static str,
    /// The groups the API server gives it (a service account's, and
    /// `system:authenticated`).
    pub groups: &'static [&'static str],
}

/// One request: a CREATE of `object`, an UPDATE (a PUT) of `old` to it, or
/// a DELETE of `old`.
#[derive(Debug, Clone)]
pub struct Case {
    /// What it writes.
    pub resource: Resource,
    /// A DELETE of the stored object (`object` is unused).
    pub delete: bool,
    /// Written by this account, impersonated by admin, instead of `user`.
    pub account: Option<Account>,
    /// Sent with `dryRun=All`.
    pub dry_run: bool,
    /// What the case is, for reports.
    pub name: String,
    /// The namespace it is written in.
    pub ns: &'static str,
    /// Who writes it.
    pub user: User,
    /// For an UPDATE, the stored object.
    pub old: Option<Old>,
    /// The object written.
    pub object: Value,
    /// Refused by the API server before admission (schema or decoding).
    pub rejected: bool,
    /// A CREATE with `metadata.generateName` instead of a name.
    pub generate_name: bool,
    /// An UPDATE whose `object` is a JSON merge patch (RFC 7386) on the
    /// stored object as the API server returned it, defaults included, so
    /// that what the schema defaults is written back unchanged, as a
    /// client's read-modify-write does.
    pub on_stored: bool,
    /// An UPDATE sent to the `/status` subresource.
    pub through_status: bool,
}

/// A CREATE of `object` by alice.
pub fn create(name: &str, object: PipelineRolloutDoc) -> Case {
    create_of(ROLLOUTS, name, object.into_json())
}

/// A CREATE of `object`, a `resource`, by alice.
pub fn create_of(resource: Resource, name: &str, object: Value) -> Case {
    Case {
        resource,
        delete: false,
        account: None,
        dry_run: false,
        name: format!("CREATE {name}"),
        ns: "",
        user: User::Alice,
        old: None,
        object,
        rejected: false,
        generate_name: false,
        on_stored: false,
        through_status: false,
    }
}

/// An UPDATE from `old` to `new` by alice.
pub fn update(name: &str, old: PipelineRolloutDoc, new: PipelineRolloutDoc) -> Case {
    Case {
        name: format!("UPDATE {name}"),
        old: Some(Old {
            object: old.into_json(),
            status: None,
            terminating: false,
        }),
        ..create(name, new)
    }
}

/// An UPDATE of a `resource` from `old` to `new` by alice.
pub fn update_of(resource: Resource, name: &str, old: Value, new: Value) -> Case {
    Case {
        name: format!("UPDATE {name}"),
        old: Some(Old {
            object: old,
            status: None,
            terminating: false,
        }),
        ..create_of(resource, name, new)
    }
}

/// A DELETE of a stored `resource` by alice.
pub fn delete_of(resource: Resource, name: &str, stored: Value) -> Case {
    Case {
        name: format!("DELETE {name}"),
        delete: true,
        ..update_of(resource, name, stored, Value::Null)
    }
}

impl Case {
    /// Sent with `dryRun=All`.
    pub fn dry_run(mut self) -> Self {
        self.name = format!("{} (dry run)", self.name);
        self.dry_run = true;
        self
    }

    /// Written by `account`, which admin impersonates.
    pub fn by_account(mut self, account: Account) -> Self {
        self.name = format!("{}, by {}", self.name, account.name);
        self.account = Some(account);
        self
    }

    /// The username the API server sees.
    pub fn username(&self) -> &'static str {
        self.account.map_or_else(|| self.user.name(), |a| a.name)
    }

    /// The groups the API server sees.
    pub fn groups(&self) -> &'static [&'static str] {
        self.account
            .map_or_else(|| self.user.groups(), |a| a.groups)
    }

    /// Written by `user`.
    pub fn by(mut self, user: User) -> Self {
        self.name = format!("{}, by {}", self.name, user.name());
        self.user = user;
        self
    }
    /// In namespace `ns`.
    pub fn ns(mut self, ns: &'static str) -> Self {
        self.ns = ns;
        self
    }
    /// The stored object's status (an UPDATE only).
    pub fn status(mut self, status: Value) -> Self {
        if let Some(old) = &mut self.old {
            old.status = Some(status);
        }
        self
    }
    /// The stored object is terminating (an UPDATE only).
    pub fn terminating(mut self) -> Self {
        if let Some(old) = &mut self.old {
            old.terminating = true;
            self.name = format!("{} (terminating)", self.name);
        }
        self
    }
    /// `object` is a merge patch on the stored object (an UPDATE only).
    pub fn on_stored(mut self) -> Self {
        self.on_stored = true;
        self
    }
    /// Sent to the `/status` subresource (an UPDATE only).
    pub fn through_status(mut self) -> Self {
        self.name = format!("{} (/status)", self.name);
        self.through_status = true;
        self
    }
    /// Refused by the API server before admission.
    pub fn rejected(mut self) -> Self {
        self.rejected = true;
        self
    }
}

/// T values for CREATE, with the name the table gives them. Floats are
/// written as JSON floats (`30.0`), which the API server keeps as doubles.
pub fn timeout_values() -> Vec<(&'static str, Value)> {
    let float = |text: &str| serde_json::from_str::<Value>(text).unwrap_or(Value::Null);
    vec![
        ("T null", Value::Null),
        ("T \"1h\"", json!("1h")),
        ("T \"30\"", json!("30")),
        ("T 30.5", json!(30.5)),
        ("T true", json!(true)),
        ("T 1e3 (a float)", float("1e3")),
        ("T 30.0 (a float)", float("30.0")),
        ("T 29.0 (a float)", float("29.0")),
        ("T 3601.0 (a float)", float("3601.0")),
        ("T 4611686019.0 (a float)", float("4611686019.0")),
        ("T -9.3e18 (a float below int64)", float("-9.3e18")),
        ("T object", json!({"seconds": 30})),
        ("T array", json!([30])),
        ("T 0", json!(0)),
        ("T -5", json!(-5)),
        ("T i64::MIN", json!(i64::MIN)),
        ("T 1", json!(1)),
        ("T 29", json!(29)),
        ("T 30", json!(30)),
        ("T 300", json!(300)),
        ("T 3600", json!(3600)),
        ("T 3601", json!(3601)),
        ("T 86400", json!(86400)),
        ("T 31535999", json!(31_535_999)),
        ("T 31536000", json!(31_536_000)),
        ("T 31536001", json!(31_536_001)),
        ("T 92233720", json!(92_233_720)),
        ("T 4611686018", json!(4_611_686_018_u64)),
        ("T 4611686019", json!(4_611_686_019_u64)),
        ("T 9223372036", json!(9_223_372_036_u64)),
        ("T 10^10", json!(10_000_000_000_u64)),
        ("T i64::MAX", json!(i64::MAX)),
        ("T i64::MAX + 1", json!(9_223_372_036_854_775_808_u64)),
        ("T u64::MAX", json!(u64::MAX)),
        ("T 1e20 (a float)", float("1e20")),
    ]
}
