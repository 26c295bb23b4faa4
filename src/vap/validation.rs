//! One validation of an exported policy, and who a grant (users, groups,
//! an RBAC verb) permits, as CEL: the pieces several policies share.

use super::cel;
use crate::policy::model::Grant;

/// One validation: the request is denied (or warned about) when
/// `expression` is false.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assertion {
    /// Which rule it expresses, for the comment block and tests.
    pub rule: &'static str,
    pub expression: String,
    /// Shown if `message_expression` fails.
    pub message: String,
    pub message_expression: String,
}

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

/// Who `grant` permits, as a CEL condition (`false` when it names
/// nobody): its users, its groups, and where it names an RBAC verb,
/// whoever RBAC allows that verb on the resource `on` (group and
/// resource; `None`: the request's) in the request's namespace and name.
/// With it, why a requester is refused, as CEL text.
pub fn permission(grant: Grant<'_>, on: Option<(&str, &str)>) -> (String, String) {
    let (target, what) = match on {
        None => (
            "authorizer.group(request.resource.group).resource(request.resource.resource)"
                .to_owned(),
            "request.resource.resource + '.' + request.resource.group".to_owned(),
        ),
        Some((group, resource)) => (
            format!(
                "authorizer.group({}).resource({})",
                cel::string(group),
                cel::string(resource)
            ),
            cel::string(&if group.is_empty() {
                resource.to_owned()
            } else {
                format!("{resource}.{group}")
            }),
        ),
    };
    let mut permitted = Vec::new();
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
    let permitted = if permitted.is_empty() {
        "false".to_owned()
    } else {
        permitted.join(" ||\n  ")
    };
    let key = grant.key;
    let lists = cel::string(&format!(
        "it is not in {key}.users and none of its groups is in {key}.groups"
    ));
    let refused = match grant.rbac {
        None => lists,
        Some(rbac) => format!(
            "{lists} + ', and RBAC does not allow verb \"{verb}\" on ' + {what} + ' \"' + \
             variables.name + '\" in namespace \"' + variables.ns + '\"; ask for a Role or ClusterRole granting it'",
            verb = rbac.verb
        ),
    };
    (permitted, refused)
}
