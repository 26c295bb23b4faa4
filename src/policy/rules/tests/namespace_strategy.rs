//! Rules 23 and 24 on Numaplane's namespace-level ConfigMap: the strategy
//! read as Numaplane reads it, the permission a strategy that skips
//! draining needs, ratcheting, warn mode, the messages and the Events.

use super::fixtures::by_static_lists;
use serde_json::{Value, json};

use super::fixtures::{admin, alice, built_in, policy, warn_mode};
use super::runner::{Mismatches, Named, run_table};
use crate::namespace_config::{CONFIG_LABEL, NAMESPACE_CONFIG};
use crate::namespace_config::{ClusterDefault, ConfigRead};
use crate::policy::Policy;
use crate::policy::rules::namespace_strategy::validate;
use crate::policy::rules::{
    EventReason, Gate, GateResult, Operation, Origin, Rule, StrategyWrite, Verdict,
};
use crate::policy::user::UserInfo;
use crate::rollout::GuardedObject;

/// A ConfigMap labelled as the namespace's configuration, with `data`.
fn config(data: Value) -> Value {
    json!({"metadata": {"labels": {CONFIG_LABEL: NAMESPACE_CONFIG}}, "data": data})
}

fn strategy(value: &str) -> Value {
    config(json!({"upgradeStrategy": value}))
}

fn unlabelled(value: &str) -> Value {
    json!({"metadata": {"labels": {"app": "x"}}, "data": {"upgradeStrategy": value}})
}

fn read(object: &Value) -> ConfigRead {
    GuardedObject::from_json(&object.to_string())
        .expect("json")
        .config_read()
}

/// Judges a write with the static lists as the only source of permission,
/// Numaplane's cluster default being `fallback` (`None`: not read). A
/// DELETE is written as `new` `Value::Null`, the ConfigMap deleted `old`.
fn judged(
    policy: &Policy,
    user: &UserInfo,
    (old, new): (Option<&Value>, &Value),
    fallback: Option<&ClusterDefault>,
) -> Verdict {
    let (operation, new) = match (old, new) {
        (Some(old), Value::Null) => (Operation::Delete, old),
        (Some(_), new) => (Operation::Update, new),
        (None, new) => (Operation::Create, new),
    };
    let write = StrategyWrite {
        operation,
        namespace: "team-a",
        user,
        object: read(new),
        old_object: old.map(read),
        fallback,
        origin: Origin::Request,
    };
    by_static_lists(validate(policy, write), policy, user)
}

struct Case {
    name: &'static str,
    policy: Policy,
    user: UserInfo,
    old: Option<Value>,
    new: Value,
    /// The rules that deny, by number.
    denied_by: Vec<u8>,
    /// A text every denial message or warning contains ("" for none).
    says: &'static str,
    gate: Option<GateResult>,
    /// The one Event the verdict asks for, and a text its note contains.
    event: Option<(EventReason, &'static str)>,
    /// Numaplane's cluster default (`None`: not read).
    fallback: Option<ClusterDefault>,
}

impl Named for Case {
    fn name(&self) -> &str {
        self.name
    }
}

fn case(name: &'static str, old: Option<Value>, new: Value) -> Case {
    Case {
        name,
        policy: built_in(),
        user: alice(),
        old,
        new,
        denied_by: Vec::new(),
        says: "",
        gate: None,
        event: None,
        fallback: Some(ClusterDefault::Strategy("progressive")),
    }
}

impl Case {
    fn denied(mut self, rule: Rule, says: &'static str) -> Self {
        self.denied_by = vec![rule.number()];
        self.says = says;
        if rule == Rule::NamespaceStrategy {
            self.gate = Some(GateResult::Denied);
        }
        self
    }
    /// Denied by `rule` too (listed after those before).
    fn and(mut self, rule: Rule) -> Self {
        self.denied_by.push(rule.number());
        if rule == Rule::NamespaceStrategy {
            self.gate = Some(GateResult::Denied);
        }
        self
    }
    fn says(mut self, says: &'static str) -> Self {
        self.says = says;
        self
    }
    fn gate(mut self, result: GateResult) -> Self {
        self.gate = Some(result);
        self
    }
    fn event(mut self, reason: EventReason, says: &'static str) -> Self {
        self.event = Some((reason, says));
        self
    }
    fn by(mut self, user: UserInfo) -> Self {
        self.user = user;
        self
    }
    fn under(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }
    fn falling_back_to(mut self, fallback: Option<ClusterDefault>) -> Self {
        self.fallback = fallback;
        self
    }
}

#[test]
fn namespace_strategy_table() {
    let listed = policy("forceReapply:\n  namespaceStrategy: {users: [alice], groups: []}\n");
    let listed_again = listed.clone();
    let no = ClusterDefault::Strategy("no-strategy");
    use EventReason::{NamespaceStrategyAllowed, NamespaceStrategyDenied};
    let cases = [
        case("progressive is allowed", None, strategy("progressive")),
        case("pause-and-drain is allowed", None, strategy("pause-and-drain")),
        case("no-strategy needs permission", None, strategy("no-strategy")).denied(
            Rule::NamespaceStrategy,
            "may not set data.upgradeStrategy to \"no-strategy\" in namespace \"team-a\"",
        ),
        case("empty reads as no-strategy", None, strategy("")).denied(
            Rule::NamespaceStrategy,
            "empty or blank (Numaplane reads it as \"no-strategy\")",
        ),
        case("blank reads as no-strategy", None, strategy("  ")).denied(
            Rule::NamespaceStrategy,
            "forceReapply.namespaceStrategy",
        ),
        case("an unknown value lists the three", None, strategy("drain")).denied(
            Rule::NamespaceStrategyValue,
            "\"drain\", which Numaplane does not accept: it ignores the ConfigMap and only logs an error its operators see; write one of \"progressive\", \"pause-and-drain\" or \"no-strategy\"",
        ),
        case("a padded value is unknown", None, strategy(" progressive")).denied(
            Rule::NamespaceStrategyValue,
            "\" progressive\"",
        ),
        case("a number is not a string", None, config(json!({"upgradeStrategy": 7})))
            .denied(Rule::NamespaceStrategyValue, "data.upgradeStrategy is 7, not a string"),
        case("data not an object", None, json!({"metadata": {"labels": {CONFIG_LABEL: NAMESPACE_CONFIG}}, "data": "x"}))
            .denied(Rule::NamespaceStrategyValue, "data is a string, not an object"),
        case("no data is allowed, with a warning", None, json!({"metadata": {"labels": {CONFIG_LABEL: NAMESPACE_CONFIG}}}))
            .says("has no data: Numaplane ignores it"),
        case("no upgradeStrategy is allowed, with a warning", None, config(json!({"other": "x"})))
            .says("cluster-wide default"),
        case("another label value is not judged", None, json!({"metadata": {"labels": {CONFIG_LABEL: "usde-config"}}, "data": {"upgradeStrategy": "no-strategy"}})),
        case("an unlabelled ConfigMap is not judged", None, unlabelled("no-strategy")),
        case("a listed user may", None, strategy("no-strategy"))
            .under(listed.clone())
            .gate(GateResult::Allowed)
            .event(NamespaceStrategyAllowed, "allowed by the admission webhook: user \"alice\" set data.upgradeStrategy to \"no-strategy\" in namespace \"team-a\", so every rollout there upgrades by plain apply, with no pause and no drain; data still in flight may be lost"),
        case("a listed user may blank it", Some(strategy("progressive")), strategy(" "))
            .under(listed.clone())
            .gate(GateResult::Allowed)
            .event(NamespaceStrategyAllowed, "set data.upgradeStrategy to empty or blank (Numaplane reads it as \"no-strategy\") in namespace \"team-a\""),
        case("system:masters may (forceReapply's groups by default)", None, strategy("no-strategy"))
            .by(admin())
            .gate(GateResult::Allowed)
            .event(NamespaceStrategyAllowed, "user \"admin\" set data.upgradeStrategy"),
        case("the listed user is not forceReapply's", None, strategy("no-strategy"))
            .under(listed)
            .by(admin())
            .denied(Rule::NamespaceStrategy, "not in forceReapply.namespaceStrategy.users"),
        case("changing to no-strategy", Some(strategy("progressive")), strategy("no-strategy"))
            .denied(Rule::NamespaceStrategy, "every rollout there would then upgrade by plain apply")
            .event(NamespaceStrategyDenied, "refused by the admission webhook: user \"alice\" may not set data.upgradeStrategy to \"no-strategy\" in namespace \"team-a\": every rollout there would then upgrade by plain apply"),
        case("adding the label with no-strategy", Some(unlabelled("no-strategy")), strategy("no-strategy"))
            .denied(Rule::NamespaceStrategy, "no pause and no drain")
            .event(NamespaceStrategyDenied, "ask a platform admin to add you to forceReapply.namespaceStrategy"),
        case("from an invalid value to no-strategy", Some(strategy("x")), strategy("no-strategy"))
            .denied(Rule::NamespaceStrategy, "may not set")
            .event(NamespaceStrategyDenied, "user \"alice\" may not set"),
        case("no-strategy unchanged is allowed, with a warning", Some(strategy("no-strategy")), strategy("no-strategy"))
            .says("unchanged, so allowed: upgradeStrategy \"no-strategy\" makes every rollout in \"team-a\" upgrade without draining"),
        case("no-strategy to blank changes nothing that matters", Some(strategy("no-strategy")), strategy(""))
            .says("unchanged, so allowed"),
        case("an unknown value unchanged warns", Some(strategy("drain")), strategy("drain"))
            .says("unchanged, so allowed: upgradeStrategy \"drain\" is ignored by Numaplane"),
        case("an unknown value changed is denied", Some(strategy("drain")), strategy("drains"))
            .denied(Rule::NamespaceStrategyValue, "\"drains\""),
        case("back from no-strategy is allowed", Some(strategy("no-strategy")), strategy("pause-and-drain")),
        case("removing the label is allowed", Some(strategy("pause-and-drain")), unlabelled("no-strategy")),
        case("warn mode denies nothing", None, strategy("no-strategy"))
            .under(warn_mode())
            .says("warn mode, would deny: alice may not make the namespace upgrade without draining")
            .gate(GateResult::WouldDeny)
            .event(NamespaceStrategyAllowed, "allowed by the admission webhook in warn mode (enforce would deny: alice may not make the namespace upgrade without draining): user \"alice\" set data.upgradeStrategy to \"no-strategy\" in namespace \"team-a\""),
        case("warn mode, an UPDATE is allowed, not refused", Some(strategy("progressive")), strategy("no-strategy"))
            .under(warn_mode())
            .says("warn mode, would deny")
            .gate(GateResult::WouldDeny)
            .event(NamespaceStrategyAllowed, "in warn mode (enforce would deny"),
        case("warn mode, unchanged records nothing", Some(strategy("no-strategy")), strategy(""))
            .under(warn_mode())
            .says("unchanged, so allowed"),
        case("warn mode, an unknown value", None, strategy("x"))
            .under(warn_mode())
            .says("warn mode, would deny: upgradeStrategy \"x\" is ignored by Numaplane"),
        // Numaplane decodes data with Go's encoding/json: any case of the
        // key is upgradeStrategy, and of several the last in byte order wins.
        case("UpgradeStrategy is upgradeStrategy", None, config(json!({"UpgradeStrategy": "no-strategy"})))
            .denied(Rule::NamespaceStrategy, "may not set data.UpgradeStrategy (which Numaplane reads as upgradeStrategy: Go matches keys in any case) to \"no-strategy\""),
        case("UPGRADESTRATEGY blank reads as no-strategy", None, config(json!({"UPGRADESTRATEGY": ""})))
            .denied(Rule::NamespaceStrategy, "data.UPGRADESTRATEGY (which Numaplane reads as upgradeStrategy: Go matches keys in any case) to empty or blank"),
        case("two keys: the last in byte order is read, and both are refused", None, config(json!({"upgradeStrategy": "pause-and-drain", "upgradestrategy": ""})))
            .denied(Rule::NamespaceStrategyValue, "data has both \"upgradestrategy\" and \"upgradeStrategy\", which Numaplane reads as the same field upgradeStrategy")
            .and(Rule::NamespaceStrategy),
        case("a key patched into pause-and-drain", Some(strategy("pause-and-drain")), config(json!({"upgradeStrategy": "pause-and-drain", "upgradestrategy": "no-strategy"})))
            .denied(Rule::NamespaceStrategyValue, "keep one key, spelled upgradeStrategy")
            .and(Rule::NamespaceStrategy)
            .event(NamespaceStrategyDenied, "may not set data.upgradestrategy (which Numaplane reads as upgradeStrategy"),
        case("two keys that read as pause-and-drain are still refused", None, config(json!({"upgradeStrategy": "no-strategy", "upgradestrategy": "pause-and-drain"})))
            .denied(Rule::NamespaceStrategyValue, "keeps the value of the key that sorts last, \"upgradestrategy\""),
        case("two keys unchanged warn", Some(config(json!({"UPGRADESTRATEGY": "x", "upgradeStrategy": "progressive"}))), config(json!({"UPGRADESTRATEGY": "x", "upgradeStrategy": "progressive"})))
            .says("unchanged, so allowed: data keys \"upgradeStrategy\" and \"UPGRADESTRATEGY\" are both upgradeStrategy to Numaplane"),
        case("an unknown value under another case", None, config(json!({"UpgradeStrategy": "drain"})))
            .denied(Rule::NamespaceStrategyValue, "data.UpgradeStrategy (which Numaplane reads as upgradeStrategy: Go matches keys in any case) is \"drain\""),
        case("UpgradeStrategy progressive is allowed, with no warning", None, config(json!({"UpgradeStrategy": "progressive"}))),
        case("warn mode, two keys", None, config(json!({"upgradeStrategy": "progressive", "upgradestrategy": "pause-and-drain"})))
            .under(warn_mode())
            .says("warn mode, would deny: data keys \"upgradestrategy\" and \"upgradeStrategy\" are both upgradeStrategy to Numaplane"),
        case("a key that only looks alike is not read", None, config(json!({"upgrade-strategy": "no-strategy"})))
            .says("no data.upgradeStrategy"),
        // Numaplane falls back to its cluster default: judged as that default.
        case("DELETE, the default no-strategy", Some(strategy("progressive")), Value::Null)
            .falling_back_to(Some(no.clone()))
            .denied(Rule::NamespaceStrategy, "may not change the namespace-level ConfigMap of namespace \"team-a\" by deleting it: Numaplane would then use Numaplane's cluster default \"no-strategy\" there")
            .event(NamespaceStrategyDenied, "by deleting it"),
        case("DELETE, the default not read", Some(strategy("pause-and-drain")), Value::Null)
            .falling_back_to(None)
            .denied(Rule::NamespaceStrategy, "which the webhook cannot read (not read here) and so takes as \"no-strategy\"")
            .event(NamespaceStrategyDenied, "cannot read"),
        case("DELETE, the default progressive", Some(strategy("pause-and-drain")), Value::Null),
        case("DELETE of one that skipped draining already", Some(strategy("no-strategy")), Value::Null)
            .falling_back_to(Some(no.clone())),
        case("DELETE of an unlabelled ConfigMap", Some(unlabelled("progressive")), Value::Null)
            .falling_back_to(Some(no.clone())),
        case("DELETE by a listed user", Some(strategy("progressive")), Value::Null)
            .falling_back_to(Some(no.clone()))
            .under(listed_again.clone())
            .gate(GateResult::Allowed)
            .event(NamespaceStrategyAllowed, "the namespace-level ConfigMap of namespace \"team-a\" by deleting it, so Numaplane uses Numaplane's cluster default \"no-strategy\" there"),
        case("DELETE by the namespace controller", Some(strategy("progressive")), Value::Null)
            .falling_back_to(Some(no.clone()))
            .by(UserInfo::new("system:serviceaccount:kube-system:namespace-controller", &[])),
        case("removing the label, the default no-strategy", Some(strategy("progressive")), unlabelled("progressive"))
            .falling_back_to(Some(no.clone()))
            .denied(Rule::NamespaceStrategy, "by removing its label")
            .event(NamespaceStrategyDenied, "by removing its label"),
        case("removing the key, the default no-strategy", Some(strategy("progressive")), config(json!({"other": "x"})))
            .falling_back_to(Some(no.clone()))
            .denied(Rule::NamespaceStrategy, "by leaving out data.upgradeStrategy")
            .event(NamespaceStrategyDenied, "by leaving out data.upgradeStrategy"),
        case("creating one without the key, the default no-strategy", None, config(json!({"other": "x"})))
            .falling_back_to(Some(no.clone()))
            .denied(Rule::NamespaceStrategy, "by leaving out data.upgradeStrategy"),
        case("still without the key: unchanged", Some(config(json!({"other": "x"}))), config(json!({"other": "y"})))
            .falling_back_to(Some(no.clone()))
            .says("cluster-wide default"),
        case("an invalid default does not skip draining", Some(strategy("progressive")), Value::Null)
            .falling_back_to(Some(ClusterDefault::Invalid("fast".into()))),
        case("warn mode: a DELETE would be denied", Some(strategy("progressive")), Value::Null)
            .falling_back_to(Some(no.clone()))
            .under(warn_mode())
            .says("warn mode, would deny: alice may not leave the namespace to Numaplane's default, which skips draining")
            .gate(GateResult::WouldDeny)
            .event(NamespaceStrategyAllowed, "in warn mode"),
    ];
    run_table("namespace strategy", &cases, |c, found| {
        let verdict = judged(
            &c.policy,
            &c.user,
            (c.old.as_ref(), &c.new),
            c.fallback.as_ref(),
        );
        let denied_by: Vec<u8> = verdict.denials.iter().map(|v| v.rule().number()).collect();
        found.equal("denied by", denied_by, c.denied_by.clone());
        let text = format!(
            "{} | {}",
            verdict.denial_message().unwrap_or_default(),
            verdict.warnings.join(" | ")
        );
        found.check(text.contains(c.says), || {
            format!("{text:?} lacks {:?}", c.says)
        });
        if c.says.is_empty() {
            found.equal("warnings", verdict.warnings.clone(), Vec::new());
        }
        gate_recorded(found, &verdict, Gate::NamespaceStrategy, c.gate, c.event);
    });
}

/// Checks what a ConfigMap gate recorded: its result (`want`), the audit
/// annotation named after it (present when it decided), and the one Event
/// with a text its note contains (or none).
pub(super) fn gate_recorded(
    found: &mut Mismatches,
    verdict: &Verdict,
    gate: Gate,
    want: Option<GateResult>,
    event: Option<(EventReason, &str)>,
) {
    let got = verdict
        .gates
        .iter()
        .find(|(g, _)| *g == gate)
        .map(|(_, r)| *r);
    found.equal("gate", got, want);
    found.equal(
        "audit annotation",
        verdict.audit.contains_key(gate.as_str()),
        want.is_some(),
    );
    let events: Vec<(EventReason, &str)> = verdict
        .events
        .iter()
        .map(|e| (e.reason, e.note.as_str()))
        .collect();
    match event {
        None => found.equal("events", events, Vec::new()),
        Some((reason, says)) => match events.as_slice() {
            [(got, note)] => {
                found.equal("event reason", *got, reason);
                found.check(note.contains(says), || {
                    format!("the Event's note {note:?} lacks {says:?}")
                });
            }
            other => found.check(false, || format!("one {reason:?} Event, not {other:?}")),
        },
    }
}

#[test]
fn namespace_strategy_events_are_warnings_with_the_gates_actions() {
    use EventReason::{NamespaceStrategyAllowed, NamespaceStrategyDenied};
    let shown: Vec<(&str, bool, &str)> = [NamespaceStrategyAllowed, NamespaceStrategyDenied]
        .into_iter()
        .map(|r| (r.as_str(), r.is_warning(), r.action()))
        .collect();
    assert_eq!(
        shown,
        [
            ("NamespaceStrategyAllowed", true, "Allowed"),
            ("NamespaceStrategyDenied", true, "Denied"),
        ]
    );
    assert!(EventReason::ALL.contains(&NamespaceStrategyAllowed));
    assert!(EventReason::ALL.contains(&NamespaceStrategyDenied));
}
