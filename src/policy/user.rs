//! Who is asking, and whether they may force a re-apply: the core owns these
//! types; the authorisation layer fills in [`Permission`].

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::lenient::{List, Text};

/// The requester, as the API server's `request.userInfo` names them.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct UserInfo {
    #[serde(default)]
    username: Text,
    #[serde(default)]
    uid: Text,
    #[serde(default)]
    groups: List<Text>,
    /// Extra attributes, passed on untouched when the API server is asked.
    #[serde(default)]
    extra: Option<serde_json::Value>,
}

impl UserInfo {
    /// A user with a name and groups (for tests and tools).
    pub(crate) fn new(username: &str, groups: &[&str]) -> Self {
        Self {
            username: Text(Some(username.to_owned())),
            uid: Text(None),
            groups: List::Present(groups.iter().map(|g| Text(Some((*g).to_owned()))).collect()),
            extra: None,
        }
    }

    /// The username, or `""` when the request named none.
    pub(crate) fn username(&self) -> &str {
        self.username.as_deref().unwrap_or_default()
    }

    pub(crate) fn uid(&self) -> Option<&str> {
        self.uid.as_deref()
    }

    /// The groups, skipping any entry that is not a string.
    pub(crate) fn groups(&self) -> impl Iterator<Item = &str> {
        self.groups.items().iter().filter_map(Text::as_deref)
    }

    /// The extra attributes as the API server's types hold them (entries
    /// that are not lists of strings are skipped).
    pub(crate) fn extra_map(&self) -> BTreeMap<String, Vec<String>> {
        let Some(serde_json::Value::Object(extra)) = &self.extra else {
            return BTreeMap::new();
        };
        extra
            .iter()
            .filter_map(|(k, v)| {
                let values = v.as_array()?;
                let strings: Option<Vec<String>> = values
                    .iter()
                    .map(|s| s.as_str().map(str::to_owned))
                    .collect();
                Some((k.clone(), strings?))
            })
            .collect()
    }
}

/// The answer to "may this requester force a re-apply of this object?".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Permission {
    /// Nothing in the request needed permission, so nobody was asked.
    NotNeeded,
    /// The request is denied for another reason anyway, the static lists
    /// do not grant it, and only RBAC could: RBAC was not asked, so the
    /// permission is not known (and not given as a reason).
    NotAsked,
    /// Granted; says how (for the audit log).
    Granted(String),
    /// Refused; says why, in words the requester can act on.
    Refused(String),
}

/// Why a permission does not allow a gated change, as a denial says it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotPermitted {
    /// Refused, with the reason the requester can act on.
    #[error("{0}")]
    Refused(String),
    /// Never asked for, so not given.
    #[error("its permission was not checked")]
    NotChecked,
}

impl Permission {
    /// The permission as the outcome of a gate with no state condition
    /// (rules 20, 21 and 24): granted, or why not; one that was not asked
    /// does not allow the change.
    pub(crate) fn outcome(&self) -> Result<(), NotPermitted> {
        match self {
            Self::Granted(_) => Ok(()),
            Self::Refused(why) => Err(NotPermitted::Refused(why.clone())),
            Self::NotAsked | Self::NotNeeded => Err(NotPermitted::NotChecked),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;

    #[test]
    fn static_lists() {
        let policy = Policy::built_in().force_reapply;
        let cases = [
            (
                UserInfo::new("system:serviceaccount:argocd:argocd-server", &[]),
                true,
            ),
            (
                UserInfo::new("admin", &["system:masters", "system:authenticated"]),
                true,
            ),
            (
                UserInfo::new("alice", &["devs", "system:authenticated"]),
                false,
            ),
            (UserInfo::new("system:masters", &[]), false),
            (UserInfo::new("", &[]), false),
        ];
        for (user, granted) in cases {
            let got = policy.static_permission(&user);
            assert_eq!(
                matches!(got, Permission::Granted(_)),
                granted,
                "{user:?}: {got:?}"
            );
        }
    }

    #[test]
    fn reads_user_info_leniently() {
        let user: UserInfo = serde_json::from_str(
            r#"{"username":"bob","uid":"42","groups":["a",7,"b"],"extra":{"k":["v"]}}"#,
        )
        .expect("parses");
        assert_eq!(user.username(), "bob");
        assert_eq!(user.uid(), Some("42"));
        assert_eq!(user.groups().collect::<Vec<_>>(), ["a", "b"]);
        let odd: UserInfo = serde_json::from_str(r#"{"username":5,"groups":"x"}"#).expect("parses");
        assert_eq!(odd.username(), "");
        assert_eq!(odd.groups().count(), 0);
    }
}
