//! Rule 27 on Numaflow controller definitions: a ConfigMap labelled
//! `numaflow-controller-definitions` outside Numaplane's namespace needs
//! the controllerDefinitions permission (Numaplane's controller aside);
//! in Numaplane's namespace, without the label, or losing it, it needs
//! none. Warn mode, the messages and the Events.

use super::fixtures::by_static_lists;
use serde_json::{Value, json};

use super::fixtures::{admin, alice, built_in, policy, warn_mode};
use super::namespace_strategy::gate_recorded;
use super::runner::{Named, run_table};
use crate::namespace_config::ConfigRead;
use crate::namespace_config::{CONFIG_LABEL, CONTROLLER_DEFINITIONS};
use crate::policy::Policy;
use crate::policy::rules::namespace_strategy::validate;
use crate::policy::rules::{EventReason, Gate, GateResult, Operation, Origin, Rule, StrategyWrite};
use crate::policy::user::UserInfo;
use crate::rollout::GuardedObject;

/// A definitions ConfigMap whose one definition grants cluster-admin, as
/// the review's reproduction writes it.
fn definitions() -> Value {
    json!({
        "metadata": {"labels": {CONFIG_LABEL: CONTROLLER_DEFINITIONS}},
        "data": {"controller_definitions.yaml": "controllerDefinitions:\n- version: 9.9.9\n  fullSpec: |\n    kind: ClusterRoleBinding\n"}
    })
}

fn unlabelled() -> Value {
    let mut object = definitions();
    object["metadata"]["labels"] = json!({"app": "x"});
    object
}

fn read(object: &Value) -> ConfigRead {
    GuardedObject::from_json(&object.to_string())
        .expect("json")
        .config_read()
}

fn numaplane() -> UserInfo {
    UserInfo::new(
        "system:serviceaccount:numaplane-system:numaplane-sa",
        &["system:serviceaccounts"],
    )
}

struct Case {
    name: &'static str,
    policy: Policy,
    user: UserInfo,
    namespace: &'static str,
    old: Option<Value>,
    new: Value,
    gate: Option<GateResult>,
    /// A text the denial message or a warning contains ("" for none).
    says: &'static str,
    event: Option<(EventReason, &'static str)>,
}

impl Named for Case {
    fn name(&self) -> &str {
        self.name
    }
}

fn case(name: &'static str, namespace: &'static str, old: Option<Value>, new: Value) -> Case {
    Case {
        name,
        policy: built_in(),
        user: alice(),
        namespace,
        old,
        new,
        gate: None,
        says: "",
        event: None,
    }
}

impl Case {
    fn gate(mut self, result: GateResult, says: &'static str) -> Self {
        self.gate = Some(result);
        self.says = says;
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
}

#[test]
fn controller_definitions_table() {
    use EventReason::{ControllerDefinitionsAllowed, ControllerDefinitionsDenied};
    use GateResult::{Allowed, Denied, WouldDeny};
    let listed = policy("forceReapply:\n  controllerDefinitions: {users: [alice], groups: []}\n");
    let elsewhere = policy("numaplane:\n  namespace: platform-numaplane\n");
    let cases = [
        case("an editor's own namespace: refused", "team-a", None, definitions())
            .gate(Denied, "user \"alice\" may not write Numaflow controller definitions (a ConfigMap labelled numaplane.numaproj.io/config: numaflow-controller-definitions) in namespace \"team-a\": Numaplane prefers them to its own and applies a definition's fullSpec with its own account, which can grant any permission; it is not in forceReapply.controllerDefinitions.users"),
        case("adding the label: refused", "team-a", Some(unlabelled()), definitions())
            .gate(Denied, "keep the definitions in \"numaplane-system\" (Numaplane's namespace)")
            .event(ControllerDefinitionsDenied, "refused by the admission webhook: user \"alice\" may not write Numaflow controller definitions"),
        case("changing one: refused", "team-a", Some(definitions()), definitions())
            .gate(Denied, "ask a platform admin to add you to forceReapply.controllerDefinitions")
            .event(ControllerDefinitionsDenied, "in namespace \"team-a\""),
        case("removing the label: allowed", "team-a", Some(definitions()), unlabelled()),
        case("an unlabelled ConfigMap: not judged", "team-a", None, unlabelled()),
        case("Numaplane's namespace: allowed", "numaplane-system", None, definitions()),
        case("Numaplane's namespace as the policy names it", "numaplane-system", None, definitions())
            .under(elsewhere.clone())
            .gate(Denied, "keep the definitions in \"platform-numaplane\""),
        case("the policy's Numaplane namespace: allowed", "platform-numaplane", None, definitions())
            .under(elsewhere),
        case("Numaplane's controller: allowed anywhere", "team-a", None, definitions())
            .by(numaplane()),
        case("a listed user: allowed, recorded", "team-a", None, definitions())
            .under(listed)
            .gate(Allowed, "")
            .event(ControllerDefinitionsAllowed, "allowed by the admission webhook: user \"alice\" set Numaflow controller definitions in namespace \"team-a\", which Numaplane prefers to those of \"numaplane-system\" and applies with its own account"),
        case("system:masters (forceReapply's groups by default): allowed", "team-a", None, definitions())
            .by(admin())
            .gate(Allowed, "")
            .event(ControllerDefinitionsAllowed, "user \"admin\""),
        case("warn mode: allowed with the would-be denial", "team-a", None, definitions())
            .under(warn_mode())
            .gate(WouldDeny, "warn mode, would deny: alice may not write Numaflow controller definitions outside Numaplane's namespace")
            .event(ControllerDefinitionsAllowed, "in warn mode (enforce would deny"),
    ];
    run_table("controller definitions", &cases, |c, found| {
        let write = StrategyWrite {
            operation: if c.old.is_some() {
                Operation::Update
            } else {
                Operation::Create
            },
            namespace: c.namespace,
            user: &c.user,
            object: read(&c.new),
            old_object: c.old.as_ref().map(read),
            fallback: None,
            origin: Origin::Request,
        };
        let verdict = by_static_lists(validate(&c.policy, write), &c.policy, &c.user);
        let denied_by: Vec<u8> = verdict.denials.iter().map(|v| v.rule().number()).collect();
        let want: Vec<u8> = if c.gate == Some(Denied) {
            vec![Rule::ControllerDefinitions.number()]
        } else {
            Vec::new()
        };
        found.equal("denied by", denied_by, want);
        let text = format!(
            "{} | {}",
            verdict.denial_message().unwrap_or_default(),
            verdict.warnings.join(" | ")
        );
        found.check(text.contains(c.says), || {
            format!("{text:?} lacks {:?}", c.says)
        });
        gate_recorded(
            found,
            &verdict,
            Gate::ControllerDefinitions,
            c.gate,
            c.event,
        );
    });
}
