//! Numaplane's namespace-level ConfigMap: a ConfigMap in a user namespace
//! labelled `numaplane.numaproj.io/config: namespace-level-config`, whose
//! `data.upgradeStrategy` sets the upgrade strategy of every rollout there
//! (Numaplane 75c9dd5, `internal/util/kubernetes/config_watcher.go`,
//! `internal/controller/config/user_config.go`). [`StrategyRead`] reads it
//! the way Numaplane does: an empty or blank value is `no-strategy`, a value
//! outside the three is dropped (with a log line only Numaplane's operators
//! see), a ConfigMap without `data` is ignored. [`ConfigRead`] adds the
//! key the strategy is read from: Numaplane decodes `data` with Go's
//! `encoding/json`, which takes `UpgradeStrategy` or `UPGRADESTRATEGY` for
//! `upgradeStrategy` and, of several such keys, keeps the greatest in byte
//! order ([`crate::go_keys`]).
//!
//! The request's object is read by the same lenient view as the guarded
//! kinds ([`crate::rollout::GuardedObject`], which keeps Numaplane's labels
//! and this `data`), so a ConfigMap costs one pass like any other object.

use serde_json::Value;

use crate::kinds::{
    CONFIG_LABEL, CONTROLLER_DEFINITIONS, NAMESPACE_CONFIG, NO_STRATEGY, UPGRADE_STRATEGIES,
    UPGRADE_STRATEGY_KEY,
};
use crate::lenient::{JsonKind, Obj};
use crate::rollout::{ConfigData, GuardedObject};

/// What a ConfigMap says about its namespace's upgrade strategy, read as
/// Numaplane reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StrategyRead {
    /// Not labelled `namespace-level-config`: not the namespace's
    /// configuration (or no longer).
    NotNamespaceConfig,
    /// No `data` (missing or null): Numaplane logs an error and keeps what
    /// it had for the namespace.
    NoData,
    /// `data` is not an object (only a file, never the API server, can
    /// hold that).
    DataMalformed(JsonKind),
    /// `data` has no `upgradeStrategy`: Numaplane uses its cluster-wide
    /// default for the namespace.
    Unset,
    /// `upgradeStrategy` is not a string: the value as JSON, cut short.
    NotString(String),
    /// A string Numaplane drops: the value, cut short.
    Unknown(String),
    /// One of the three strategies; `blank`: written empty or blank, which
    /// Numaplane reads as `no-strategy`.
    Strategy {
        /// `progressive`, `pause-and-drain` or `no-strategy`.
        name: &'static str,
        /// Whether the value was empty or blank.
        blank: bool,
    },
}

impl StrategyRead {
    /// Reads the strategy of `object` (a ConfigMap as the lenient view
    /// holds it).
    pub fn of(object: &GuardedObject) -> Self {
        Self::from_parts(object.label(CONFIG_LABEL), object.config_data())
    }

    /// Reads the strategy from the label's value and `data`.
    pub fn from_parts(label: Option<&Value>, data: &Obj<ConfigData>) -> Self {
        if label.and_then(Value::as_str) != Some(NAMESPACE_CONFIG) {
            return Self::NotNamespaceConfig;
        }
        let data = match data {
            Obj::Missing | Obj::Null => return Self::NoData,
            Obj::Wrong(kind) => return Self::DataMalformed(*kind),
            Obj::Present(data) => data,
        };
        let value = match data.upgrade_strategy() {
            None | Some(Value::Null) => return Self::Unset,
            Some(Value::String(text)) => text,
            Some(other) => return Self::NotString(cut(&other.to_string(), 40)),
        };
        // Go's strings.TrimSpace and Rust's trim agree on Unicode spaces.
        if value.trim().is_empty() {
            return Self::Strategy {
                name: NO_STRATEGY,
                blank: true,
            };
        }
        match UPGRADE_STRATEGIES.into_iter().find(|s| s == value) {
            Some(name) => Self::Strategy { name, blank: false },
            None => Self::Unknown(cut(value, 40)),
        }
    }

    /// Whether every rollout of the namespace upgrades by plain apply (no
    /// pause, no drain, no assessment).
    pub fn skips_draining(&self) -> bool {
        matches!(self, Self::Strategy { name, .. } if *name == NO_STRATEGY)
    }

    /// The value as users wrote it, for messages: `"no-strategy"`, or
    /// `"" (blank, read as no-strategy)`.
    pub fn shown(&self) -> String {
        match self {
            Self::Strategy { name, blank: false } => format!("\"{name}\""),
            Self::Strategy { blank: true, .. } => {
                format!("empty or blank (Numaplane reads it as \"{NO_STRATEGY}\")")
            }
            Self::Unknown(text) => format!("\"{text}\""),
            Self::NotString(json) => json.clone(),
            Self::NotNamespaceConfig | Self::NoData | Self::DataMalformed(_) | Self::Unset => {
                "not set".to_owned()
            }
        }
    }
}

/// A namespace-level ConfigMap's `data` as Numaplane reads it: the
/// strategy, and the keys it is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigRead {
    /// The strategy Numaplane reads.
    pub strategy: StrategyRead,
    /// The key the strategy is read from, when it is not spelled
    /// `upgradeStrategy`.
    pub key: Option<String>,
    /// Two keys of `data` that Numaplane both reads as `upgradeStrategy`:
    /// the one whose value it keeps (the greatest in byte order), and
    /// another.
    pub clash: Option<(String, String)>,
    /// Labelled as Numaflow controller definitions (rule 27).
    pub definitions: bool,
}

impl ConfigRead {
    /// Reads `object` (a ConfigMap as the lenient view holds it).
    pub fn of(object: &GuardedObject) -> Self {
        Self::from_parts(object.label(CONFIG_LABEL), object.config_data())
    }

    /// Reads the label's value and `data`.
    pub fn from_parts(label: Option<&Value>, data: &Obj<ConfigData>) -> Self {
        let strategy = StrategyRead::from_parts(label, data);
        let data = match (&strategy, data) {
            (StrategyRead::NotNamespaceConfig, _) => None,
            (_, Obj::Present(data)) => Some(data),
            _ => None,
        };
        Self {
            definitions: label.and_then(Value::as_str) == Some(CONTROLLER_DEFINITIONS),
            strategy,
            key: data.and_then(|d| d.strategy_key().map(cut_key)),
            clash: data
                .and_then(ConfigData::strategy_clash)
                .map(|(kept, also)| (cut_key(kept), cut_key(also))),
        }
    }

    /// Whether every rollout of the namespace upgrades by plain apply.
    pub fn skips_draining(&self) -> bool {
        self.strategy.skips_draining()
    }

    /// The value as users wrote it, for messages ([`StrategyRead::shown`]).
    pub fn shown(&self) -> String {
        self.strategy.shown()
    }

    /// The field as messages name it: `data.upgradeStrategy`, or the key
    /// written and how Numaplane reads it.
    pub fn field(&self) -> String {
        match &self.key {
            None => format!("data.{UPGRADE_STRATEGY_KEY}"),
            Some(key) => format!(
                "data.{key} (which Numaplane reads as {UPGRADE_STRATEGY_KEY}: Go matches keys in any case)"
            ),
        }
    }
}

/// A key cut short for messages (an API server allows 253 characters).
fn cut_key(key: &str) -> String {
    cut(key, 64)
}

/// The name of Numaplane's own ConfigMap, in its namespace, whose
/// `config.yaml` holds `defaultUpgradeStrategy`.
pub const CONTROLLER_CONFIG: &str = "numaplane-controller-config";

/// Numaplane's cluster-wide default upgrade strategy, which a namespace
/// falls back to when its namespace-level ConfigMap is deleted, loses its
/// label, or sets no `upgradeStrategy` (Numaplane 75c9dd5, `usde.go`
/// `GetUserStrategy`: an empty default is `no-strategy`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterDefault {
    /// Read: one of the three strategies.
    Strategy(&'static str),
    /// Read, but no strategy Numaplane knows: it then fails the
    /// namespace's upgrades rather than apply them.
    Invalid(String),
    /// Not read, and why: taken as `no-strategy`.
    Unknown(String),
}

impl ClusterDefault {
    /// Reads `data` of Numaplane's ConfigMap as Numaplane's viper reads
    /// its `config.yaml`: keys in any case, an absent or empty
    /// `defaultUpgradeStrategy` is `no-strategy`.
    pub fn from_config_map(data: Option<&std::collections::BTreeMap<String, String>>) -> Self {
        let Some(text) = data.and_then(|d| d.get("config.yaml")) else {
            return Self::Unknown(format!("{CONTROLLER_CONFIG} has no data.config.yaml"));
        };
        let parsed: Value = match serde_saphyr::from_str(text) {
            Ok(value) => value,
            Err(e) => {
                return Self::Unknown(format!(
                    "{CONTROLLER_CONFIG}'s config.yaml is not YAML: {}",
                    cut(&e.to_string(), 80)
                ));
            }
        };
        let Value::Object(map) = parsed else {
            return Self::Unknown(format!("{CONTROLLER_CONFIG}'s config.yaml is not a map"));
        };
        let value = map
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("defaultUpgradeStrategy"))
            .map(|(_, v)| v);
        match value {
            None | Some(Value::Null) => Self::Strategy(NO_STRATEGY),
            Some(Value::String(s)) if s.is_empty() => Self::Strategy(NO_STRATEGY),
            Some(Value::String(s)) => match UPGRADE_STRATEGIES.iter().find(|k| **k == s) {
                Some(known) => Self::Strategy(known),
                None => Self::Invalid(cut(s, 40)),
            },
            Some(other) => Self::Invalid(cut(&other.to_string(), 40)),
        }
    }

    /// Whether a namespace that falls back to it upgrades without
    /// draining (an unknown default is taken as `no-strategy`).
    pub fn skips_draining(&self) -> bool {
        matches!(self, Self::Strategy(NO_STRATEGY) | Self::Unknown(_))
    }

    /// The default as messages name it.
    pub fn described(&self) -> String {
        match self {
            Self::Strategy(name) => format!("Numaplane's cluster default \"{name}\""),
            Self::Invalid(value) => {
                format!("Numaplane's cluster default \"{value}\", which is no strategy it knows")
            }
            Self::Unknown(why) => format!(
                "Numaplane's cluster default, which the webhook cannot read ({why}) and so takes as \"{NO_STRATEGY}\""
            ),
        }
    }
}

/// Cuts a text to `limit` characters, marking the cut with `…`.
fn cut(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        text.to_owned()
    } else {
        let kept: String = text.chars().take(limit - 1).collect();
        format!("{kept}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_cluster_default_is_read_as_numaplanes_viper_reads_it() {
        let read = |yaml: &str| {
            let data = [("config.yaml".to_owned(), yaml.to_owned())].into();
            ClusterDefault::from_config_map(Some(&data))
        };
        let cases = [
            (
                "progressive",
                read("defaultUpgradeStrategy: progressive\n"),
                ClusterDefault::Strategy("progressive"),
            ),
            (
                "any case of the key",
                read("DEFAULTUPGRADESTRATEGY: pause-and-drain\n"),
                ClusterDefault::Strategy("pause-and-drain"),
            ),
            (
                "empty",
                read("defaultUpgradeStrategy: \"\"\n"),
                ClusterDefault::Strategy(NO_STRATEGY),
            ),
            (
                "absent",
                read("logLevel: INFO\n"),
                ClusterDefault::Strategy(NO_STRATEGY),
            ),
            (
                "unknown",
                read("defaultUpgradeStrategy: fast\n"),
                ClusterDefault::Invalid("fast".into()),
            ),
            (
                "a number",
                read("defaultUpgradeStrategy: 3\n"),
                ClusterDefault::Invalid("3".into()),
            ),
        ];
        for (name, got, want) in cases {
            assert_eq!(got, want, "{name}");
        }
        for (name, got) in [
            ("not YAML", read("a: [\n")),
            ("not a map", read("- a\n")),
            (
                "no config.yaml",
                ClusterDefault::from_config_map(Some(&Default::default())),
            ),
            ("no data", ClusterDefault::from_config_map(None)),
        ] {
            assert!(matches!(got, ClusterDefault::Unknown(_)), "{name}: {got:?}");
            assert!(got.skips_draining(), "{name}: taken as no-strategy");
        }
        assert!(!ClusterDefault::Invalid("x".into()).skips_draining());
        assert!(!ClusterDefault::Strategy("progressive").skips_draining());
    }

    #[test]
    fn strategies_are_read_as_numaplane_reads_them() {
        let labelled = |data: Value| {
            let mut object = json!({"metadata": {"labels": {CONFIG_LABEL: NAMESPACE_CONFIG}}});
            if !data.is_null() {
                object["data"] = data;
            }
            StrategyRead::of(&GuardedObject::from_json(&object.to_string()).expect("json"))
        };
        let strategy = |name, blank| StrategyRead::Strategy { name, blank };
        let cases = [
            (
                "progressive",
                labelled(json!({"upgradeStrategy": "progressive"})),
                strategy("progressive", false),
            ),
            (
                "pause-and-drain",
                labelled(json!({"upgradeStrategy": "pause-and-drain"})),
                strategy("pause-and-drain", false),
            ),
            (
                "no-strategy",
                labelled(json!({"upgradeStrategy": "no-strategy"})),
                strategy(NO_STRATEGY, false),
            ),
            (
                "empty",
                labelled(json!({"upgradeStrategy": ""})),
                strategy(NO_STRATEGY, true),
            ),
            (
                "blank",
                labelled(json!({"upgradeStrategy": " \t\n"})),
                strategy(NO_STRATEGY, true),
            ),
            (
                "case matters",
                labelled(json!({"upgradeStrategy": "Progressive"})),
                StrategyRead::Unknown("Progressive".into()),
            ),
            (
                "padded is not trimmed",
                labelled(json!({"upgradeStrategy": " progressive"})),
                StrategyRead::Unknown(" progressive".into()),
            ),
            (
                "a number",
                labelled(json!({"upgradeStrategy": 1})),
                StrategyRead::NotString("1".into()),
            ),
            (
                "no key",
                labelled(json!({"other": "x"})),
                StrategyRead::Unset,
            ),
            ("no data", labelled(Value::Null), StrategyRead::NoData),
            (
                "data a string",
                labelled(json!("x")),
                StrategyRead::DataMalformed(JsonKind::String),
            ),
        ];
        for (name, got, want) in cases {
            assert_eq!(got, want, "{name}");
        }
        let other_label = json!({"metadata": {"labels": {CONFIG_LABEL: "usde-config"}}, "data": {"upgradeStrategy": "no-strategy"}});
        assert_eq!(
            StrategyRead::of(&GuardedObject::from_json(&other_label.to_string()).expect("json")),
            StrategyRead::NotNamespaceConfig
        );
        assert!(strategy(NO_STRATEGY, true).skips_draining());
        // Keys are read as Go's encoding/json reads them.
        let read = |data: Value| {
            let object =
                json!({"metadata": {"labels": {CONFIG_LABEL: NAMESPACE_CONFIG}}, "data": data});
            ConfigRead::of(&GuardedObject::from_json(&object.to_string()).expect("json"))
        };
        let read_as = |strategy, key: Option<&str>, clash: Option<(&str, &str)>| ConfigRead {
            strategy,
            key: key.map(str::to_owned),
            clash: clash.map(|(a, b)| (a.to_owned(), b.to_owned())),
            definitions: false,
        };
        let no = |blank| StrategyRead::Strategy {
            name: NO_STRATEGY,
            blank,
        };
        let folded = [
            (
                read(json!({"UpgradeStrategy": "no-strategy"})),
                read_as(no(false), Some("UpgradeStrategy"), None),
            ),
            (
                read(json!({"UPGRADESTRATEGY": ""})),
                read_as(no(true), Some("UPGRADESTRATEGY"), None),
            ),
            (
                read(json!({"upgradeStrategy": "pause-and-drain", "upgradestrategy": ""})),
                read_as(
                    no(true),
                    Some("upgradestrategy"),
                    Some(("upgradestrategy", "upgradeStrategy")),
                ),
            ),
            (
                read(
                    json!({"upgradestrategy": "pause-and-drain", "upgradeStrategy": "", "other": "x"}),
                ),
                read_as(
                    strategy("pause-and-drain", false),
                    Some("upgradestrategy"),
                    Some(("upgradestrategy", "upgradeStrategy")),
                ),
            ),
            (
                read(json!({"upgradeStrategy": "progressive"})),
                read_as(strategy("progressive", false), None, None),
            ),
        ];
        for (got, want) in folded {
            assert_eq!(got, want);
        }
        assert!(read(json!({"UPGRADESTRATEGY": ""})).skips_draining());
        assert!(!strategy("progressive", false).skips_draining());
    }
}
