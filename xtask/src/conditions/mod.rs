//! The CEL `matchConditions` of the webhook rules for the children and for
//! MonoVertexRollouts and ISBServiceRollouts, generated from the keys in
//! [`pipelinerollout_webhook::kinds`]: the API server sends a write of one of these only when
//! it sets, changes or removes one of the keys rules 13 to 15 judge, or a
//! child's `pause-timestamp` is set or changed by anyone but Numaflow's
//! controller (rule 19), or an owned child is deleted by anyone but
//! Numaplane's controller and Kubernetes' own deleters (rule 20), or a
//! Pipeline's `spec.lifecycle` drain timeout is set or changed (rules 2 to
//! 4 and 16 to 18), or a child a rollout owns has its spec (but scaling
//! and pausing), status, finalizers, ownerReferences or Numaplane's and
//! Numaflow's keys changed by anyone but those two controllers (rule 26);
//! for a rollout, when it turns on
//! `spec.strategy.progressive.forcePromote`. The Numaplane controller
//! writes children constantly: none of its writes reach the webhook but
//! one of `pause-timestamp`, and a condition of its own
//! ([`controller_exempt`]) keeps it off every other webhook. The accounts
//! are the policy's ([`Accounts`]): `cargo xtask generate` writes the
//! expressions, with placeholders for them, into the chart's
//! `files/match-conditions.yaml`, and the chart writes its policy values
//! (or the built-in ones) in their place, also into
//! `manifests/base/webhooks.yaml`.

use pipelinerollout_webhook::kinds::{
    BOOKKEEPING_ANNOTATIONS, BOOKKEEPING_LABELS, FORCE_PROMOTE_LABEL, Kind, MARKED_FOR_DELETION,
    NUMAFLOW_CONTROLLER, NUMAFLOW_GROUP, NUMAPLANE_CONTROLLER, NUMAPLANE_GROUP, PARENT_ROLLOUT,
    PAUSE_TIMESTAMP, SYSTEM_DELETERS,
};
use pipelinerollout_webhook::rollout::{
    ANNOTATIONS, DESIRED_PHASE, FORCE_PROMOTE_FIELD, FieldPath, LABELS, LifecycleKey,
};

/// The kinds whose webhook rule carries a generated matchCondition (a
/// PipelineRollout goes to the webhook on every write: its drain timeout
/// is judged and defaulted).
pub const FILTERED: [Kind; 5] = [
    Kind::Pipeline,
    Kind::MonoVertex,
    Kind::InterStepBufferService,
    Kind::MonoVertexRollout,
    Kind::IsbServiceRollout,
];

/// The labels whose change sends a write to the webhook.
fn label_keys() -> Vec<&'static str> {
    std::iter::once(FORCE_PROMOTE_LABEL)
        .chain(BOOKKEEPING_LABELS)
        .collect()
}

/// The annotations whose change sends a write to the webhook.
fn annotation_keys() -> Vec<&'static str> {
    std::iter::once(MARKED_FOR_DELETION)
        .chain(BOOKKEEPING_ANNOTATIONS)
        .collect()
}

/// `has(o.a) && has(o.a.b) && ...` for every step of `path` below `root`
/// (`metadata` is on every object, so it needs no guard).
fn guard(root: &str, path: &[&str]) -> String {
    let first = usize::from(path.first() == Some(&"metadata")) + 1;
    (first..=path.len())
        .map(|n| format!("has({root}.{})", path[..n].join(".")))
        .collect::<Vec<_>>()
        .join(" && ")
}

/// A CEL list of string literals.
fn list(keys: &[&str]) -> String {
    let quoted: Vec<String> = keys.iter().map(|k| format!("'{k}'")).collect();
    format!("[{}]", quoted.join(", "))
}

/// Whether key `k` is in the map at `path` of `root`.
fn present(root: &str, path: &[&str]) -> String {
    format!("({} && k in {root}.{})", guard(root, path), path.join("."))
}

/// Key `k` in the map at `path` of `root` as one string: `'='` and its
/// value when present, `''` when absent (so that a value of `''` differs
/// from none).
fn value(root: &str, path: &[&str]) -> String {
    let map = format!("{root}.{}", path.join("."));
    format!(
        "({} && k in {map} ? '=' + {map}[k] : '')",
        guard(root, path)
    )
}

/// Whether a CREATE carries one of `keys` in the map at `path`.
fn created(path: &[&str], keys: &[&str]) -> String {
    format!("{}.exists(k, {})", list(keys), present("object", path))
}

/// Whether an UPDATE sets, changes or removes one of `keys` in the map at `path`.
fn changed(path: &[&str], keys: &[&str]) -> String {
    format!(
        "{}.exists(k, {} != {})",
        list(keys),
        value("object", path),
        value("oldObject", path)
    )
}

/// Whether `forcePromote` is `true` in `root`.
fn force_promote_on(root: &str) -> String {
    format!(
        "({} && {} == true)",
        guard(root, FORCE_PROMOTE_FIELD.keys()),
        FORCE_PROMOTE_FIELD.cel(root)
    )
}

/// The accounts the expressions name: the policy's
/// `numaplane.controllerAccount`, `numaflow.controllerAccount` and
/// `forceReapply.deleteUndrained.systemDeleters`, whose writes (or
/// deletes) are kept off the webhook, as the rules would allow them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accounts<'a> {
    /// Numaplane's controller (`numaplane.controllerAccount`).
    pub numaplane: &'a str,
    /// Numaflow's controller (`numaflow.controllerAccount`).
    pub numaflow: &'a str,
    /// Kubernetes' own deleters of children
    /// (`forceReapply.deleteUndrained.systemDeleters`).
    pub system_deleters: &'a [&'a str],
}

impl Accounts<'static> {
    /// The built-in policy's accounts.
    pub const BUILT_IN: Self = Self {
        numaplane: NUMAPLANE_CONTROLLER,
        numaflow: NUMAFLOW_CONTROLLER,
        system_deleters: &SYSTEM_DELETERS,
    };

    /// What the chart's copy of the expressions names instead, each
    /// replaced (quoted: [`literal`]) by the policy value of the same name
    /// when the chart renders: a literal `'@numaplane.controllerAccount@'`,
    /// and the list `['@forceReapply.deleteUndrained.systemDeleters@']`
    /// as a whole.
    pub const PLACEHOLDERS: Self = Self {
        numaplane: "@numaplane.controllerAccount@",
        numaflow: "@numaflow.controllerAccount@",
        system_deleters: &["@forceReapply.deleteUndrained.systemDeleters@"],
    };
}

/// `text` as a CEL string literal: the CEL export's one escaper.
pub use pipelinerollout_webhook::vap::cel::string as literal;

/// The name of the matchCondition that keeps Numaplane's controller off a
/// webhook.
pub const CONTROLLER_CONDITION: &str = "not-numaplane-controller";

/// The matchCondition expression that keeps Numaplane's controller off a
/// webhook: one string comparison per request, so that an unreachable
/// webhook (failurePolicy Fail) never stalls the controller's own writes.
/// The chart puts it on every webhook but the children's, whose
/// expression keeps the controller's writes of `pause-timestamp` (rule 19).
pub fn controller_exempt(accounts: &Accounts<'_>) -> String {
    format!(
        "request.userInfo.username != {}",
        literal(accounts.numaplane)
    )
}

/// Whether a DELETE of a child is one rule 20 judges: the stored object
/// (`oldObject`; `object` is null on DELETE and is never read) carries the
/// parent-rollout-name label, and the deleter is neither Numaplane's
/// controller nor one of Kubernetes' own deleters (their deletes never
/// wait for the webhook).
fn deleted_owned_child(accounts: &Accounts<'_>) -> String {
    let deleters: Vec<String> = accounts
        .system_deleters
        .iter()
        .map(|a| literal(a))
        .collect();
    format!(
        "request.userInfo.username != {} && !(request.userInfo.username in [{}]) && has(oldObject.metadata.labels) && '{PARENT_ROLLOUT}' in oldObject.metadata.labels",
        literal(accounts.numaplane),
        deleters.join(", ")
    )
}

/// Whether a CREATE or UPDATE of a child sets or changes pause-timestamp
/// (rule 19) as anyone but Numaflow's controller (removing it is allowed).
/// Numaplane's controller is judged too: it never writes the annotation.
fn pause_timestamp_written(update: bool, accounts: &Accounts<'_>) -> String {
    let path = ANNOTATIONS.keys();
    let new = format!(
        "({} && '{PAUSE_TIMESTAMP}' in {})",
        guard("object", path),
        ANNOTATIONS.cel("object")
    );
    let written = if update {
        let value = |root: &str| {
            format!(
                "({} && '{PAUSE_TIMESTAMP}' in {map} ? '=' + {map}['{PAUSE_TIMESTAMP}'] : '')",
                guard(root, path),
                map = ANNOTATIONS.cel(root)
            )
        };
        format!("{new} && {} != {}", value("object"), value("oldObject"))
    } else {
        new
    };
    format!(
        "(request.userInfo.username != {} && {written})",
        literal(accounts.numaflow)
    )
}

/// The drain timeouts of a Pipeline's `spec.lifecycle` that Numaflow reads.
pub const LIFECYCLE_TIMEOUTS: [LifecycleKey; 3] = [
    LifecycleKey::Pause,
    LifecycleKey::Deletion,
    LifecycleKey::DeprecatedDeletion,
];

/// Whether a write of a Pipeline carries (CREATE) or changes (UPDATE) one
/// of its lifecycle timeouts (the child's expression leaves Numaplane's
/// controller out). The
/// values are integers (Numaflow's CRD says so), so presence and value are
/// compared apart, and no `null` meets an integer.
fn lifecycle_written(operation_create: bool) -> String {
    let per_key: Vec<String> = LIFECYCLE_TIMEOUTS
        .iter()
        .map(|key| {
            let field = key.child_field();
            let has = |root: &str| guard(root, field.keys());
            if operation_create {
                format!("({})", has("object"))
            } else {
                let (new, old) = (has("object"), has("oldObject"));
                format!(
                    "(({new}) != ({old}) || (({new}) && {} != {}))",
                    field.cel("object"),
                    field.cel("oldObject")
                )
            }
        })
        .collect();
    format!(
        "(request.resource.resource == 'pipelines' && ({}))",
        per_key.join(" || ")
    )
}

/// Whether an ownerReference `r` names a Numaplane rollout.
fn names_a_rollout(r: &str) -> String {
    let kinds: Vec<&str> = Kind::ALL
        .into_iter()
        .filter(|k| !k.is_child())
        .map(Kind::kind)
        .collect();
    format!(
        "(has({r}.apiVersion) && {r}.apiVersion.startsWith('{NUMAPLANE_GROUP}/')) || (has({r}.kind) && {r}.kind in {})",
        list(&kinds)
    )
}

/// Whether a rollout owns `root`: the parent-rollout-name label or an
/// ownerReference to a rollout.
fn owned(root: &str) -> String {
    format!(
        "((has({root}.metadata.labels) && '{PARENT_ROLLOUT}' in {root}.metadata.labels) || (has({root}.metadata.ownerReferences) && {root}.metadata.ownerReferences.exists(r, {})))",
        names_a_rollout("r")
    )
}

/// Whether the keys under Numaplane's and Numaflow's prefixes of the map
/// `map` (labels or annotations) differ between the object and the stored one.
fn prefixed_changed(map: &str) -> String {
    let prefixed =
        format!("(k.startsWith('{NUMAPLANE_GROUP}/') || k.startsWith('{NUMAFLOW_GROUP}/'))");
    let (new, old) = (
        format!("object.metadata.{map}"),
        format!("oldObject.metadata.{map}"),
    );
    format!(
        "((has({new}) && {new}.exists(k, {prefixed} && !(has({old}) && k in {old} && {old}[k] == {new}[k]))) || (has({old}) && {old}.exists(k, {prefixed} && !(has({new}) && k in {new}))))"
    )
}

/// Whether a finalizer of `a` other than `free` is missing from `b`.
fn finalizer_missing(a: &str, b: &str, free: &str) -> String {
    format!(
        "(has({a}.metadata.finalizers) && {a}.metadata.finalizers.exists(f, !(f in {free}) && !(has({b}.metadata.finalizers) && f in {b}.metadata.finalizers)))"
    )
}

/// Whether the spec of `a` has a key, other than what anyone may change,
/// that `b` lacks or holds otherwise (a MonoVertex's `replicas`,
/// `lifecycle.desiredPhase`).
fn spec_key_differs(a: &str, b: &str) -> String {
    let lifecycle = DESIRED_PHASE.parent();
    let (lc_a, lc_b) = (lifecycle.cel(a), lifecycle.cel(b));
    let life = format!(
        "(!(k in {b}.spec) ? {lc_a}.exists(j, j != '{phase}') : {lc_a}.exists(j, j != '{phase}' && !(j in {lc_b} && {lc_a}[j] == {lc_b}[j])))",
        phase = DESIRED_PHASE.name()
    );
    format!(
        "{a}.spec.exists(k, !(k == 'replicas' && request.resource.resource == 'monovertices') && (k == '{}' ? {life} : !(k in {b}.spec && {a}.spec[k] == {b}.spec[k])))",
        lifecycle.name()
    )
}

/// Whether a write of a child changes what rule 26 keeps for Numaplane's
/// and Numaflow's controllers, as anyone but them: on CREATE, an
/// ownerReference to a rollout; on UPDATE of a child a rollout owns
/// (before or after), its spec (but scaling and pausing), status, keys
/// under the two prefixes, and its finalizers and ownerReferences (for the
/// system deleters, but the deletion finalizers and the removal of
/// ownerReferences, which is how they delete and orphan).
fn edited_owned_child(update: bool, accounts: &Accounts<'_>) -> String {
    let not_controllers = format!(
        "request.userInfo.username != {} && request.userInfo.username != {}",
        literal(accounts.numaplane),
        literal(accounts.numaflow)
    );
    if !update {
        return format!(
            "({not_controllers} && has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(r, {}))",
            names_a_rollout("r")
        );
    }
    let deleters: Vec<String> = accounts
        .system_deleters
        .iter()
        .map(|a| literal(a))
        .collect();
    let deleter = format!("request.userInfo.username in [{}]", deleters.join(", "));
    let deletion_finalizers = "['foregroundDeletion', 'orphan']";
    let status = "(has(object.status) != has(oldObject.status) || (has(object.status) && object.status != oldObject.status))";
    let spec = format!(
        "(has(object.spec) != has(oldObject.spec) || (has(object.spec) && ({} || {})))",
        spec_key_differs("object", "oldObject"),
        spec_key_differs("oldObject", "object")
    );
    let finalizers = |free: &str| {
        format!(
            "({} || {})",
            finalizer_missing("object", "oldObject", free),
            finalizer_missing("oldObject", "object", free)
        )
    };
    let refs = "(has(object.metadata.ownerReferences) != has(oldObject.metadata.ownerReferences) || (has(object.metadata.ownerReferences) && object.metadata.ownerReferences != oldObject.metadata.ownerReferences))";
    let refs_added = "(has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(r, !(has(oldObject.metadata.ownerReferences) && r in oldObject.metadata.ownerReferences)))";
    format!(
        "({not_controllers} && ({} || {}) && ({status} || {spec} || {} || {} || ({deleter} ? ({} || {refs_added}) : ({} || {refs}))))",
        owned("oldObject"),
        owned("object"),
        prefixed_changed("labels"),
        prefixed_changed("annotations"),
        finalizers(deletion_finalizers),
        finalizers("[]"),
    )
}

/// The matchCondition expression for writes of `kind`, naming the
/// built-in policy's accounts: true when the write touches what the rules
/// judge. `None` for a PipelineRollout.
pub fn expression(kind: Kind) -> Option<String> {
    expression_for(kind, &Accounts::BUILT_IN)
}

/// [`expression`], naming `accounts`.
pub fn expression_for(kind: Kind, accounts: &Accounts<'_>) -> Option<String> {
    let (labels, annotations): (Vec<&str>, Vec<&str>) = if kind.is_child() {
        (LABELS.keys().to_vec(), ANNOTATIONS.keys().to_vec())
    } else {
        let template = kind.template()?;
        if kind == Kind::PipelineRollout {
            return None;
        }
        let in_template = |map: FieldPath| {
            ["spec", template]
                .into_iter()
                .chain(map.keys().iter().copied())
                .collect()
        };
        (in_template(LABELS), in_template(ANNOTATIONS))
    };
    let (label_keys, annotation_keys) = (label_keys(), annotation_keys());
    let mut on_create = vec![
        created(&labels, &label_keys),
        created(&annotations, &annotation_keys),
    ];
    let mut on_update = vec![
        changed(&labels, &label_keys),
        changed(&annotations, &annotation_keys),
    ];
    if !kind.is_child() {
        on_create.push(force_promote_on("object"));
        on_update.push(format!(
            "({} && !{})",
            force_promote_on("object"),
            force_promote_on("oldObject")
        ));
        // Numaplane's controller is kept off by a condition of its own.
        return Some(format!(
            "request.operation == 'CREATE' ? ({}) : ({})",
            on_create.join(" || "),
            on_update.join(" || ")
        ));
    }
    on_create.push(lifecycle_written(true));
    on_update.push(lifecycle_written(false));
    // Every write of Numaplane's controller is left out but one of
    // pause-timestamp, which rule 19 refuses it too.
    Some(format!(
        "request.operation == 'DELETE' ? ({}) : (request.operation == 'CREATE' ? ({} || {} || (request.userInfo.username != {np} && ({}))) : ({} || {} || (request.userInfo.username != {np} && ({}))))",
        deleted_owned_child(accounts),
        pause_timestamp_written(false, accounts),
        edited_owned_child(false, accounts),
        on_create.join(" || "),
        pause_timestamp_written(true, accounts),
        edited_owned_child(true, accounts),
        on_update.join(" || "),
        np = literal(accounts.numaplane),
    ))
}

/// The name of the matchCondition on the rule for `kind` (the children
/// share one webhook and one expression).
pub fn name(kind: Kind) -> String {
    if kind.is_child() {
        "children-force-keys".to_owned()
    } else {
        format!("{}-force-keys", kind.resource())
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod evaluated;
