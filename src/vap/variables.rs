//! The variables the validations share: what the request, the object and
//! the stored object hold on the paths the rules read, each read once, and
//! guarded so that no wrongly typed value raises a CEL runtime error. Each
//! expression also type-checks against the CRD's schema: the API server's
//! checker reports nothing about variables, so tests/apiserver/vap.rs has it
//! check each one as a validation (and tests/cli/export_vap.rs checks that each is
//! defined before it is read).

use super::cel::{self, Step};
use super::timeout::{DELETION_SCOPE, PAUSE_SCOPE, ScopeVars};
use crate::kinds::PAUSE_TIMESTAMP;
use crate::policy::model::{DrainTimeout, Policy};
use crate::rollout::{
    ALLOW_DATA_LOSS, ANNOTATIONS, FORCE_PROMOTE_FIELD, FieldPath, LifecycleKey, SCALE_FACTOR_FIELD,
    TEMPLATE_ANNOTATIONS, TIMEOUT_FIELD, UPGRADE_IN_PROGRESS,
};

/// A named CEL expression that validations read as `variables.NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Var {
    /// The name.
    pub name: &'static str,
    /// The CEL expression.
    pub expression: String,
}

/// Where a PipelineRollout's drain timeouts are: its embedded Pipeline's
/// `spec.lifecycle`, below the schemaless `spec.pipeline.spec` (step 3).
pub const ROLLOUT_LIFECYCLE: &[&str] = TIMEOUT_FIELD.parent().keys();

/// The variables of the PipelineRollout policy for `policy`, each after
/// those it reads.
pub fn variables(policy: &Policy) -> Vec<Var> {
    let dt = &policy.drain_timeout;
    let mut vars = Vars::request();
    scope_vars(&mut vars, dt, PAUSE_SCOPE);
    scope_vars(&mut vars, &policy.deletion_timeout, DELETION_SCOPE);
    for (prefix, root) in [("", "object"), ("old", "oldObject")] {
        let name = |name| var_name(prefix, name);
        // The timeout, read where no level on the way is blocked: every
        // present level is then a map.
        let steps = cel::steps(root, TIMEOUT_FIELD.keys(), Some(3));
        let block = name("tBlock");
        vars.add(block, guarded(root, cel::first_non_map(&steps[..4]), "''"));
        let unblocked = format!("variables.{block} == '' && ");
        value_var(&mut vars, [name("t"), name("tInt")], &steps, &unblocked);
        let s = name("s");
        let scale = |leaf: &str| format!("?\n  dyn({leaf}) : null");
        vars.add(s, leaf_read(root, SCALE_FACTOR_FIELD.keys(), scale, "null"));
        // S as the rules use it: the rollout's own, else the policy default.
        let default = dt.default_recycle_scale_factor;
        let eff = name("sEff");
        vars.add(
            eff,
            format!("variables.{s} == null ? {default} : variables.{s}"),
        );
        vars.add(name("sInt"), cel::int_view(&format!("variables.{eff}")));
        let steps = cel::steps(root, ANNOTATIONS.keys(), None);
        let bad = name("metaBad");
        vars.add(bad, guarded(root, cel::first_non_map(&steps), "''"));
        // An optional, as a `string` and a `null` branch do not type-check.
        let unblocked = format!("variables.{bad} == '' && ");
        let annotations = ANNOTATIONS.keys();
        optional_key(
            &mut vars,
            name("a"),
            root,
            &unblocked,
            annotations,
            ALLOW_DATA_LOSS,
        );
        let on = |leaf: &str| format!("&& {leaf} == true");
        let force_promote = leaf_read(root, FORCE_PROMOTE_FIELD.keys(), on, "false");
        vars.add(name("forcePromote"), force_promote);
    }
    comparison_vars(&mut vars);
    deletion_vars(
        &mut vars,
        LifecycleKey::rollout_field,
        Some(3),
        [
            "variables.tBlock == '' && ",
            "variables.oldTBlock == '' && ",
        ],
    );
    let template = TEMPLATE_ANNOTATIONS.keys();
    vars.optional_key("tpt", "oldTpt", template, PAUSE_TIMESTAMP);
    vars.0
}

/// The variables of a policy, in order.
#[derive(Debug, Default)]
pub struct Vars(pub Vec<Var>);

impl Vars {
    /// `ns`, `name` and `user`: the request's namespace, object name and
    /// username, `''` where absent.
    pub fn request() -> Self {
        let mut vars = Self::default();
        // request.name is omitted for generateName; request.namespace is
        // always there for a namespaced resource, but costs nothing to
        // guard. (`namespace` is a reserved word in CEL.)
        vars.add(
            "ns",
            "has(request.namespace) ? request.namespace : ''".into(),
        );
        vars.add("name", "has(request.name) ? request.name : ''".into());
        vars.add(
            "user",
            "has(request.userInfo.username) ? request.userInfo.username : ''".into(),
        );
        vars
    }

    /// Adds `variables.NAME`.
    pub fn add(&mut self, name: &'static str, expression: String) {
        self.0.push(Var { name, expression });
    }

    /// `new` and `old`: the string at `key` of the map at `path` of the
    /// object and of the stored object, as optionals (see [`optional_key`]).
    pub fn optional_key(&mut self, new: &'static str, old: &'static str, path: &[&str], key: &str) {
        optional_key(self, new, "object", "", path, key);
        optional_key(self, old, "oldObject", "", path, key);
    }
}

/// `name`: the string at `key` of the map at `path` of `root`, as an
/// optional: none when `unblocked` (CEL text ending in `&& `, or empty) is
/// false, a step on the way is absent or not a map, or the key is absent
/// or null.
fn optional_key(
    vars: &mut Vars,
    name: &'static str,
    root: &str,
    unblocked: &str,
    path: &[&str],
    key: &str,
) {
    let key = cel::string(key);
    let steps = cel::steps(root, path, None);
    let map = &steps[steps.len() - 1].select;
    vars.add(
        name,
        guarded(
            root,
            format!(
                "{unblocked}{} && {key} in {map} && type({map}[{key}]) != null_type ?\n  \
                 optional.of({map}[{key}]) : optional.none()",
                cel::all_maps(&steps)
            ),
            "optional.none()",
        ),
    );
}

/// `old` + `Name`, or `name`: the variable for the stored object.
fn var_name(prefix: &str, name: &'static str) -> &'static str {
    match (prefix, name) {
        ("", name) => name,
        (_, "tBlock") => "oldTBlock",
        (_, "t") => "oldT",
        (_, "tInt") => "oldTInt",
        (_, "s") => "oldS",
        (_, "sEff") => "oldSEff",
        (_, "sInt") => "oldSInt",
        (_, "metaBad") => "oldMetaBad",
        (_, "a") => "oldA",
        (_, "forcePromote") => "oldForcePromote",
        (_, other) => other,
    }
}

/// A read of the leaf below three levels of `keys` under `root`: the
/// levels all maps and the leaf present, then `rest` of the leaf's select;
/// `otherwise` for a stored object that is absent.
fn leaf_read(root: &str, keys: &[&str], rest: impl Fn(&str) -> String, otherwise: &str) -> String {
    let steps = cel::steps(root, keys, None);
    let (levels, leaf) = steps.split_at(3);
    let leaf = &leaf[0].select;
    let read = format!("{} && has({leaf}) {}", cel::all_maps(levels), rest(leaf));
    guarded(root, read, otherwise)
}

/// For the stored object every expression starts with `oldObject != null`
/// (it is null on CREATE).
pub fn guarded(root: &str, expression: String, otherwise: &str) -> String {
    if root == "oldObject" {
        format!("oldObject == null ? {otherwise} :\n  {expression}")
    } else {
        expression
    }
}

/// The scope of `dt` for the request's namespace (none without overrides).
pub fn scope_vars(vars: &mut Vars, dt: &DrainTimeout, names: ScopeVars) {
    if dt.namespaces.is_empty() {
        return;
    }
    // The first override with a matching pattern wins.
    let mut scope = "-1".to_owned();
    let mut scope_name = cel::string("the policy");
    for (i, ns) in dt.namespaces.iter().enumerate().rev() {
        let any = ns
            .patterns
            .iter()
            .map(|p| cel::namespace_matches("variables.ns", p))
            .collect::<Vec<_>>()
            .join(" || ");
        scope = format!("({any}) ? {i} :\n  {scope}");
        for p in ns.patterns.iter().rev() {
            let text = format!("the policy for namespaces \"{p}\"");
            scope_name = format!(
                "{} ? {} :\n  {scope_name}",
                cel::namespace_matches("variables.ns", p),
                cel::string(&text)
            );
        }
    }
    vars.add(names.index, scope);
    vars.add(names.name, scope_name);
}

/// `names[0]`: the value at the end of `steps` (`null` when a step is
/// absent or null, or `unblocked`, CEL text ending in `&& `, is false), and
/// `names[1]`: its integer view.
pub fn value_var(vars: &mut Vars, names: [&'static str; 2], steps: &[Step], unblocked: &str) {
    let root = steps[0].select.split('.').next().unwrap_or("object");
    let present: Vec<String> = steps
        .iter()
        .map(|s: &Step| format!("has({0}) && {0} != null", s.select))
        .collect();
    vars.add(
        names[0],
        guarded(
            root,
            format!(
                "{unblocked}{} ?\n  {} : null",
                present.join(" && "),
                steps[steps.len() - 1].select
            ),
            "null",
        ),
    );
    vars.add(names[1], cel::int_view(&format!("variables.{}", names[0])));
}

/// The deletion timeout of the object whose drain timeouts are where
/// `field` says (`LifecycleKey::rollout_field` or `child_field`; a step
/// from `schemaless` on goes through `dyn()`):
/// `d`/`dd` (deletionGracePeriodSeconds, and the deprecated
/// deleteGracePeriodSeconds), each with its integer view and the stored
/// object's; `dJ`/`dJInt`, the one Numaflow reads; `dField`, its path;
/// `dSame`, whether it is unchanged as the webhook's rule 8 sees it.
/// `unblocked`: CEL text (ending in `&& `, or empty) true when the object's
/// and the stored object's lifecycle can be read.
pub fn deletion_vars(
    vars: &mut Vars,
    field: fn(LifecycleKey) -> FieldPath,
    schemaless: Option<usize>,
    unblocked: [&str; 2],
) {
    let (current, deprecated) = (
        field(LifecycleKey::Deletion),
        field(LifecycleKey::DeprecatedDeletion),
    );
    let names = [
        ("object", unblocked[0], ["d", "dInt"], ["dd", "ddInt"]),
        (
            "oldObject",
            unblocked[1],
            ["oldD", "oldDInt"],
            ["oldDD", "oldDDInt"],
        ),
    ];
    for (root, ub, names_now, names_deprecated) in names {
        for (path, names) in [(current, names_now), (deprecated, names_deprecated)] {
            value_var(vars, names, &cel::steps(root, path.keys(), schemaless), ub);
        }
    }
    numaflow_reads(vars, ["dJ", "dJInt"], "d", "dd");
    vars.add(
        "dField",
        format!(
            "variables.d != null ? {} : {}",
            cel::string(current.dotted()),
            cel::string(deprecated.dotted())
        ),
    );
    // The deprecated field is what Numaflow reads as long as the new one
    // stays unset, in the stored object too.
    vars.add(
        "dSame",
        format!(
            "oldObject != null && (variables.d != null ?\n  \
             (variables.oldD != null && ({})) :\n  \
             (variables.dd != null && {}variables.oldD == null && variables.oldDD != null && ({})))",
            cel::same("variables.d", "variables.dInt", "variables.oldD", "variables.oldDInt"),
            unblocked[1],
            cel::same("variables.dd", "variables.ddInt", "variables.oldDD", "variables.oldDDInt"),
        ),
    );
}

/// Whether the timeouts `variables.NEW` and the stored object's
/// `variables.OLD` are both present and the same (rule 8), by
/// [`cel::same`] on them and their integer views (`NEWInt`, `OLDInt`).
pub fn same_timeout(new: &str, old: &str) -> String {
    let (n, o) = (format!("variables.{new}"), format!("variables.{old}"));
    format!(
        "oldObject != null && {n} != null && {o} != null && ({})",
        cel::same(&n, &format!("{n}Int"), &o, &format!("{o}Int"))
    )
}

/// `j`: the deletion timeout Numaflow reads, `variables.D` unless it is
/// null, else the deprecated `variables.DD`; `j_int`: its integer view.
pub fn numaflow_reads(vars: &mut Vars, [j, j_int]: [&'static str; 2], d: &str, dd: &str) {
    vars.add(
        j,
        format!("variables.{d} != null ? variables.{d} : variables.{dd}"),
    );
    let int = format!("variables.{d} != null ? variables.{d}Int : variables.{dd}Int");
    vars.add(j_int, int);
}

/// What ratcheting (rule 8) and the gates (rules 6 and 7) compare.
fn comparison_vars(vars: &mut Vars) {
    vars.add("tSame", same_timeout("t", "oldT"));
    vars.add(
        "sValid",
        "variables.s == null || (variables.sInt != null && variables.sInt >= 1 && variables.sInt <= 100)"
            .into(),
    );
    vars.add(
        "sSame",
        format!(
            "oldObject != null && ({})",
            cel::same(
                "variables.sEff",
                "variables.sInt",
                "variables.oldSEff",
                "variables.oldSInt"
            )
        ),
    );
    // ceil(100 / S), for a valid S only.
    vars.add(
        "multiplier",
        "variables.sValid ? (100 + variables.sInt - 1) / variables.sInt : 1".into(),
    );
    vars.add(
        "aSame",
        "oldObject != null && variables.a.hasValue() && variables.oldA.hasValue() && \
         type(variables.a.value()) == type(variables.oldA.value()) && variables.a.value() == variables.oldA.value()"
            .into(),
    );
    // Rule 6's trigger: the annotation becomes exactly "true".
    vars.add(
        "reapply",
        "variables.a.orValue('') == 'true' && !(oldObject != null && variables.oldA.orValue('') == 'true')"
            .into(),
    );
    // Rule 7's trigger: forcePromote is turned on.
    vars.add(
        "promote",
        "variables.forcePromote && !(oldObject != null && variables.oldForcePromote)".into(),
    );
    // Both pause signals, read from the stored object as the webhook's
    // PipelineRollout::is_pausing reads them.
    vars.add(
        "pausing",
        format!(
            "oldObject != null && {}",
            pausing(" && has(c.reason) && c.reason == 'PipelinePausing'")
        ),
    );
}

/// Whether the stored object's status shows a pause (CEL text, after
/// `oldObject != null`): a pause-and-drain upgrade, or a
/// PipelinePausingOrPaused condition that is True and `and_condition`
/// (CEL text on `c`, starting with ` && `, or empty).
pub fn pausing(and_condition: &str) -> String {
    format!(
        "has(oldObject.status) && type(oldObject.status) == map && (\n  \
         (has({upgrade}) && {upgrade} == 'PipelinePauseAndDrain') ||\n  \
         (has(oldObject.status.conditions) && type(oldObject.status.conditions) == list &&\n   \
         oldObject.status.conditions.exists(c, type(c) == map && has(c.type) && c.type == 'PipelinePausingOrPaused' &&\n     \
         has(c.status) && c.status == 'True'{and_condition})))",
        upgrade = UPGRADE_IN_PROGRESS.cel("oldObject")
    )
}
