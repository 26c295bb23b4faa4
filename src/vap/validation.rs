//! One validation of an exported policy, and the pieces several policies
//! share: who a grant (users, groups, an RBAC verb) permits, as CEL.

use super::cel;
use crate::policy::model::Grant;

/// One validation: the request is denied (or warned about) when
/// `expression` is false.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assertion {
    /// Which rule it expresses, for the comment block and tests.
    pub rule: &'static str,
    /// The CEL condition that must hold.
    pub expression: String,
    /// The static message (shown if `message_expression` fails).
    pub message: String,
    /// The CEL expression building the message.
    pub message_expression: String,
}

/// An [`Assertion`] from its parts.
pub fn assertion(
    rule: &'static str,
    expression: String,
    message: &str,
    message_expression: String,
) -> Assertion {
    Assertion {
        rule,
        expression,
        message: message.to_owned(),
        message_expression,
    }
}

/// Who a grant permits, as CEL: its users, its groups, and where it names
/// an RBAC verb, whoever RBAC allows that verb on `target` (CEL text such
/// as `authorizer.group('g').resource('r')`) in the request's namespace and
/// name. The grant is the policy's own (the permission check reads the
/// same).
#[derive(Debug, Clone, Copy)]
pub struct Grantees<'a>(pub Grant<'a>);

impl Grantees<'_> {
    /// The CEL condition: the requester is permitted (`false` when the
    /// grant names nobody). `target` selects the resource RBAC is asked
    /// about; it must end before `.namespace(...)`.
    pub fn permitted(&self, target: &str) -> String {
        let mut permitted = Vec::new();
        let grant = &self.0;
        if !grant.users.is_empty() {
            permitted.push(format!(
                "variables.user in {}",
                cel::string_list(grant.users)
            ));
        }
        if !grant.groups.is_empty() {
            permitted.push(format!(
                "(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in {}))",
                cel::string_list(grant.groups)
            ));
        }
        if let Some(rbac) = grant.rbac {
            permitted.push(format!(
                "{target}\n    .namespace(variables.ns).name(variables.name).check({}).allowed()",
                cel::string(&rbac.verb)
            ));
        }
        if permitted.is_empty() {
            "false".to_owned()
        } else {
            permitted.join(" ||\n  ")
        }
    }

    /// Why a requester is refused, as CEL text: the lists, and RBAC on
    /// `what` (CEL text naming the resource, e.g. `'configmaps'`).
    pub fn refused(&self, what: &str) -> String {
        let key = self.0.key;
        let lists = cel::string(&format!(
            "it is not in {key}.users and none of its groups is in {key}.groups"
        ));
        match self.0.rbac {
            None => lists,
            Some(rbac) => format!(
                "{lists} + ', and RBAC does not allow verb \"{verb}\" on ' + {what} + ' \"' + \
                 variables.name + '\" in namespace \"' + variables.ns + '\"; ask for a Role or ClusterRole granting it'",
                verb = rbac.verb
            ),
        }
    }
}
