//! Rule 27 on the versions: a NumaflowController or
//! NumaflowControllerRollout naming a version Numaplane would install from
//! a user namespace's definitions needs forceReapply.controllerDefinitions.
//! The definitions are a table standing in for the server's watch: 9.9.9
//! is `team-a`'s own, 2.0.0 only `team-b`'s, 1.8.1 Numaplane's (and
//! `team-b`'s), and nothing can be told of 0.0.0.

use super::fixtures::by_static_lists;
use serde_json::{Value, json};

use super::fixtures::{admin, alice, built_in, parse, warn_mode};
use crate::kinds::{ControllerKind, NUMAPLANE_CONTROLLER};
use crate::policy::rules::controller_version::{self, DefinitionLookup, Definitions, VersionWrite};
use crate::policy::rules::{EventReason, Operation, Verdict};
use crate::policy::{Policy, UserInfo};

#[derive(Debug)]
struct Table;

impl DefinitionLookup for Table {
    fn definitions(&self, namespace: &str, numaplane: &str, version: &str) -> Definitions {
        assert_eq!(numaplane, "numaplane-system");
        let defined_in: &[&str] = match version {
            "9.9.9" => &["team-a"],
            "2.0.0" => &["team-b"],
            "1.8.1" => &["numaplane-system", "team-b"],
            "0.0.0" => return Definitions::Unknown("not listed yet".to_owned()),
            _ => &[],
        };
        Definitions::Found {
            own: defined_in.contains(&namespace),
            numaplane: defined_in.contains(&numaplane),
            elsewhere: defined_in
                .iter()
                .find(|ns| **ns != namespace && **ns != numaplane)
                .map(|ns| (*ns).to_owned()),
        }
    }
}

fn controller(kind: ControllerKind, version: &str) -> Value {
    let spec = match kind {
        ControllerKind::NumaflowController => json!({"version": version}),
        ControllerKind::NumaflowControllerRollout => json!({"controller": {"version": version}}),
    };
    json!({"apiVersion": "numaplane.numaproj.io/v1alpha1", "kind": kind.kind(),
        "metadata": {"name": "numaflow-controller"}, "spec": spec})
}

/// Judges a write in `namespace` (an UPDATE from `old`, else a CREATE),
/// the permission answered from the policy's static lists.
fn judge(
    policy: &Policy,
    kind: ControllerKind,
    (namespace, user): (&str, &UserInfo),
    old: Option<&str>,
    new: &str,
) -> Verdict {
    let object = parse(&controller(kind, new));
    let old_object = old.map(|v| parse(&controller(kind, v)));
    let mut write = VersionWrite {
        kind,
        operation: if old.is_some() {
            Operation::Update
        } else {
            Operation::Create
        },
        namespace,
        user,
        object: &object,
        old_object: old_object.as_ref(),
        definitions: Definitions::Unknown("not looked up".to_owned()),
    };
    write.look_up(Some(&Table), &policy.numaplane.namespace);
    by_static_lists(controller_version::validate(policy, write), policy, user)
}

/// One case: what, namespace, user, the old version (`None`: a CREATE),
/// the new one, and what a denial says (`None`: allowed).
type Row<'a> = (
    &'a str,
    &'a str,
    &'a UserInfo,
    Option<&'a str>,
    &'a str,
    Option<&'a str>,
);

#[test]
fn a_version_from_a_user_namespace_is_gated_by_either_kind() {
    let (alice, admin) = (alice(), admin());
    let numaplane = UserInfo::new(NUMAPLANE_CONTROLLER, &["system:serviceaccounts"]);
    let policy = built_in();
    // (what, namespace, user, old version, new version, what a denial says)
    let cases: [Row<'_>; 10] = [
        (
            "its namespace's own",
            "team-a",
            &alice,
            None,
            "9.9.9",
            Some("from namespace \"team-a\"'s own definition"),
        ),
        (
            "only another user namespace's",
            "team-a",
            &alice,
            None,
            "2.0.0",
            Some("only namespace \"team-b\" defines it, not \"numaplane-system\""),
        ),
        (
            "changed to its namespace's own",
            "team-a",
            &alice,
            Some("1.8.1"),
            "9.9.9",
            Some("version \"9.9.9\""),
        ),
        (
            "not yet listed",
            "team-a",
            &alice,
            None,
            "0.0.0",
            Some("it could not be told where it is defined: not listed yet"),
        ),
        ("Numaplane's", "team-a", &alice, None, "1.8.1", None),
        ("defined nowhere", "team-a", &alice, None, "3.0.0", None),
        (
            "kept as it was",
            "team-a",
            &alice,
            Some("9.9.9"),
            "9.9.9",
            None,
        ),
        ("by a holder", "team-a", &admin, None, "9.9.9", None),
        (
            "by Numaplane's controller",
            "team-a",
            &numaplane,
            None,
            "9.9.9",
            None,
        ),
        (
            "in Numaplane's namespace",
            "numaplane-system",
            &alice,
            None,
            "9.9.9",
            None,
        ),
    ];
    for kind in ControllerKind::ALL {
        for (what, namespace, user, old, new, denied) in cases {
            let verdict = judge(&policy, kind, (namespace, user), old, new);
            let message = verdict.denial_message();
            match denied {
                Some(says) => {
                    let text = message.unwrap_or_else(|| panic!("{kind:?} {what}: allowed"));
                    assert!(text.contains(says), "{kind:?} {what}: {text}");
                    assert!(
                        text.contains("forceReapply.controllerDefinitions")
                            && text.contains(&format!("in this {}", kind.kind())),
                        "{kind:?} {what}: {text}"
                    );
                    assert!(
                        verdict
                            .audit
                            .get("controller-definitions")
                            .is_some_and(|v| v.starts_with("denied by rule 27")),
                        "{kind:?} {what}: {:?}",
                        verdict.audit
                    );
                }
                None => assert!(message.is_none(), "{kind:?} {what}: {message:?}"),
            }
        }
    }
}

#[test]
fn a_holder_is_recorded_and_warn_mode_denies_nothing() {
    let kind = ControllerKind::NumaflowController;
    let allowed = judge(
        &built_in(),
        kind,
        ("team-a", &admin()),
        Some("1.8.1"),
        "9.9.9",
    );
    let reasons: Vec<EventReason> = allowed.events.iter().map(|e| e.reason).collect();
    assert_eq!(reasons, [EventReason::ControllerDefinitionsAllowed]);
    let refused = judge(
        &built_in(),
        kind,
        ("team-a", &alice()),
        Some("1.8.1"),
        "9.9.9",
    );
    let reasons: Vec<EventReason> = refused.events.iter().map(|e| e.reason).collect();
    assert_eq!(reasons, [EventReason::ControllerDefinitionsDenied]);
    let warned = judge(&warn_mode(), kind, ("team-a", &alice()), None, "9.9.9");
    assert!(warned.denials.is_empty());
    assert!(
        warned.warnings.iter().any(|w| w
            == "warn mode, would deny: alice may not name controller version \"9.9.9\", defined outside Numaplane's namespace"),
        "{:?}",
        warned.warnings
    );
}
