//! The namespace-level ConfigMap policy: rules 23 and 24 as CEL, on
//! ConfigMaps labelled `numaplane.numaproj.io/config:
//! namespace-level-config` (the binding's objectSelector, which an UPDATE
//! meets when either the object or the stored object carries it; the
//! rules read the label on each). `data.upgradeStrategy` is one of the
//! three strategies Numaplane accepts, or empty or blank, which it reads as
//! `no-strategy` (rule 23); a strategy that skips draining needs
//! `forceReapply.namespaceStrategy` (rule 24). Both ratchet: an invalid
//! value kept as it was, and a namespace that already skipped draining,
//! are allowed. A ConfigMap's `data` is a map of strings (the API server
//! refuses anything else), so the value is always a string. The same
//! policy judges ConfigMaps labelled `numaflow-controller-definitions`
//! (rule 27): outside Numaplane's namespace they need
//! `forceReapply.controllerDefinitions`.

use super::cel;
use super::validation::{Assertion, assertion, permission};
use super::variables::{self, Var, Vars};
use crate::kinds::CONFIGMAPS;
use crate::namespace_config::{
    CONFIG_LABEL, CONTROLLER_DEFINITIONS, NAMESPACE_CONFIG, NO_STRATEGY, STRATEGIES_SHOWN,
    UPGRADE_STRATEGIES, UPGRADE_STRATEGY_KEY, folded_key_note,
};
use crate::policy::model::Policy;

/// The variables and validations of the namespace-level ConfigMap policy.
pub fn rules(policy: &Policy) -> (Vec<Var>, Vec<Assertion>) {
    let strategy = &policy.force_reapply.namespace_strategy;
    let mut vars = Vars::request();
    let label = cel::string(CONFIG_LABEL);
    let key = cel::string(UPGRADE_STRATEGY_KEY);
    let folded = cel::string(&UPGRADE_STRATEGY_KEY.to_ascii_lowercase());
    for ([keys_var, key_var, also_var, s_var], root) in [
        (["keys", "key", "also", "s"], "object"),
        (["oldKeys", "oldKey", "oldAlso", "oldS"], "oldObject"),
    ] {
        // The keys Numaplane reads as upgradeStrategy: a ConfigMap's keys
        // are ASCII, so lowerAscii() folds them as Go does.
        vars.add(
            keys_var,
            variables::guarded(
                root,
                format!(
                    "has({root}.metadata.labels) && {label} in {root}.metadata.labels &&\n  \
                     {root}.metadata.labels[{label}] == {} && has({root}.data) ?\n  \
                     {root}.data.filter(k, k.lowerAscii() == {folded}) : []",
                    cel::string(NAMESPACE_CONFIG)
                ),
                "[]",
            ),
        );
        let keys = format!("variables.{}", keys_var);
        // The one Go keeps: the greatest in byte order.
        vars.add(
            key_var,
            format!("{keys}.size() == 0 ? '' : {keys}.filter(k, {keys}.all(j, j <= k))[0]"),
        );
        let kept = format!("variables.{}", key_var);
        // Another, the greatest of the rest, when there are several.
        vars.add(
            also_var,
            format!(
                "{keys}.size() < 2 ? '' :\n  {keys}.filter(k, k != {kept} && {keys}.all(j, j == {kept} || j <= k))[0]"
            ),
        );
        vars.add(
            s_var,
            format!("{kept} == '' ? optional.none() : optional.of({root}.data[{kept}])"),
        );
    }
    vars.add(
        "field",
        format!(
            "'data.' + variables.key + (variables.key == {key} ? '' : {})",
            cel::string(&folded_key_note())
        ),
    );
    let no_strategy = cel::string(NO_STRATEGY);
    for (name, s) in [("skips", "variables.s"), ("oldSkips", "variables.oldS")] {
        vars.add(
            name,
            format!("{s}.hasValue() && ({s}.value().trim() == '' || {s}.value() == {no_strategy})"),
        );
    }
    // Unchanged (ratcheting): the same keys read, with the same value.
    let unchanged = "variables.oldS.hasValue() && variables.oldS.value() == variables.s.value() &&\n  \
                     variables.oldKey == variables.key && variables.oldAlso == variables.also";
    let clash = assertion(
        "rule 23: one key of data is read as upgradeStrategy",
        format!("variables.also == '' ||\n  ({unchanged})"),
        &format!(
            "data has several keys that Numaplane reads as the same field upgradeStrategy (Go matches keys in any case, and keeps the value of the key that sorts last): keep one key, spelled upgradeStrategy, with one of {STRATEGIES_SHOWN}"
        ),
        format!(
            "'data has both \"' + variables.key + '\" and \"' + variables.also + {} + variables.key + {}",
            cel::string(
                "\", which Numaplane reads as the same field upgradeStrategy (Go matches keys in any case, and keeps the value of the key that sorts last, \""
            ),
            cel::string(&format!(
                "\"): keep one key, spelled upgradeStrategy, with one of {STRATEGIES_SHOWN}"
            ))
        ),
    );
    let known: Vec<String> = UPGRADE_STRATEGIES.iter().map(|s| (*s).to_owned()).collect();
    let invalid = assertion(
        "rule 23: upgradeStrategy is one Numaplane accepts",
        format!(
            "!variables.s.hasValue() || variables.s.value().trim() == '' || variables.s.value() in {} ||\n  \
             ({unchanged})",
            cel::string_list(&known)
        ),
        &format!(
            "data.upgradeStrategy is not one Numaplane accepts: it ignores the ConfigMap and only logs an error its operators see; write one of {STRATEGIES_SHOWN} (an empty value means \"no-strategy\")"
        ),
        format!(
            "variables.field + ' is \"' + (variables.s.value().size() > 40 ? variables.s.value().substring(0, 39) + '…' : variables.s.value()) + {}",
            cel::string(&format!(
                "\", which Numaplane does not accept: it ignores the ConfigMap and only logs an error its operators see; write one of {STRATEGIES_SHOWN} (an empty value means \"no-strategy\")"
            ))
        ),
    );
    let (permitted, refused) = permission(strategy.grant(), Some(("", CONFIGMAPS)));
    let gated = assertion(
        "rule 24: a strategy that skips draining needs forceReapply.namespaceStrategy",
        format!("!variables.skips || variables.oldSkips ||\n  {permitted}"),
        "the user may not make every rollout of this namespace upgrade without draining (upgradeStrategy no-strategy, empty or blank): it needs forceReapply.namespaceStrategy; ask a platform admin, or write \"pause-and-drain\" or \"progressive\"",
        format!(
            "'user \"' + variables.user + '\" may not set ' + variables.field + ' to ' +\n  \
             (variables.s.value() == {no_strategy} ? '\"no-strategy\"' : 'empty or blank (Numaplane reads it as \"no-strategy\")') +\n  \
             ' in namespace \"' + variables.ns + '\": every rollout there would then upgrade by plain apply, with no pause and no drain, so data in flight may be lost; ' +\n  \
             {refused} + {}",
            cel::string(
                "; ask a platform admin to add you to forceReapply.namespaceStrategy in the webhook's policy, or write \"pause-and-drain\" or \"progressive\""
            )
        ),
    );
    (vars.0, vec![clash, invalid, gated, definitions(policy)])
}

/// Rule 27: Numaflow controller definitions outside Numaplane's namespace
/// need `forceReapply.controllerDefinitions` (Numaplane's controller aside),
/// on every write that leaves the label on.
fn definitions(policy: &Policy) -> Assertion {
    let label = cel::string(CONFIG_LABEL);
    let (permitted, refused) = permission(
        policy.force_reapply.controller_definitions.grant(),
        Some(("", CONFIGMAPS)),
    );
    let home = &policy.numaplane.namespace;
    assertion(
        "rule 27: Numaflow controller definitions outside Numaplane's namespace need forceReapply.controllerDefinitions",
        format!(
            "!(has(object.metadata.labels) && {label} in object.metadata.labels &&
  \
             object.metadata.labels[{label}] == {}) ||
  \
             variables.ns == {} || variables.user == {} ||
  {permitted}",
            cel::string(CONTROLLER_DEFINITIONS),
            cel::string(home),
            cel::string(&policy.numaplane.controller_account),
        ),
        &format!(
            "the user may not write Numaflow controller definitions outside Numaplane's namespace: it needs forceReapply.controllerDefinitions; keep them in \"{home}\""
        ),
        format!(
            "'user \"' + variables.user + {} + variables.ns + {} +\n  {refused} + {}",
            cel::string(
                "\" may not write Numaflow controller definitions (a ConfigMap labelled numaplane.numaproj.io/config: numaflow-controller-definitions) in namespace \""
            ),
            cel::string(
                "\": Numaplane prefers them to its own and applies a definition's fullSpec with its own account, which can grant any permission; "
            ),
            cel::string(&format!(
                "; keep the definitions in \"{home}\" (Numaplane's namespace), or ask a platform admin to add you to forceReapply.controllerDefinitions in the webhook's policy"
            ))
        ),
    )
}
