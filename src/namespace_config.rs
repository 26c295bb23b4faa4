//! Numaplane's ConfigMaps as Numaplane reads them (Numaplane 75c9dd5,
//! `internal/util/kubernetes/config_watcher.go`,
//! `internal/controller/config/user_config.go`): the label it watches them
//! by, the namespace-level ConfigMap's `data` and its upgrade strategy, and
//! its own ConfigMap's cluster-wide default. The rules, `check`, the audit
//! and the CEL export read them here.
//!
//! A ConfigMap in a user namespace labelled `numaplane.numaproj.io/config:
//! namespace-level-config` sets, with `data.upgradeStrategy`, the upgrade
//! strategy of every rollout there; [`ConfigRead`] reads it as Numaplane does.
//!
//! Numaplane decodes `data` with Go's `encoding/json`
//! (`util.StructToStruct`), which looks a key up by its exact name first,
//! then case-insensitively under Unicode simple case folding, and lets
//! every key that matches set the field: the last one decoded wins.
//! `StructToStruct` marshals a Go map before it decodes it, and Go marshals
//! a map with its keys sorted by their bytes, so of several matching keys
//! the greatest in byte order is the one Numaplane keeps, whatever order
//! the user wrote them in. Simple case folding joins an ASCII letter with a
//! non-ASCII character in two places only: `s` with `ſ` (U+017F, long s)
//! and `k` with `K` (U+212A, Kelvin sign); every other non-ASCII character
//! folds only with non-ASCII ones (`ı` and `İ` fold with nothing), so a key
//! matches a field whose name is ASCII exactly when, character by
//! character, it is that name up to ASCII case and those two
//! ([`matches_field`]).
//!
//! The request's object is read by the same lenient view as the guarded
//! kinds (`rollout::GuardedObject`, which keeps Numaplane's labels and this
//! `data` as [`ConfigData`]), so a ConfigMap costs one pass like any other
//! object.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

use crate::lenient::{JsonKind, Obj};
use crate::logtext::cut;

/// The label Numaplane watches ConfigMaps by (its watch selects every
/// ConfigMap that has the key; the value says what the ConfigMap is).
pub const CONFIG_LABEL: &str = "numaplane.numaproj.io/config";
/// The value of [`CONFIG_LABEL`] that makes a ConfigMap in a user namespace
/// Numaplane's namespace-level configuration (`config_watcher.go`).
pub const NAMESPACE_CONFIG: &str = "namespace-level-config";
/// The value of [`CONFIG_LABEL`] that makes a ConfigMap hold Numaflow
/// controller definitions: Numaplane reads them from every namespace,
/// preferring a user namespace's own, and applies a definition's
/// `fullSpec` with its own account (`config_watcher.go`,
/// `numaflowcontroller_controller.go`).
pub const CONTROLLER_DEFINITIONS: &str = "numaflow-controller-definitions";
/// The label selector of the ConfigMaps labelled namespace-level config or
/// controller definitions (`CONFIG_LABEL in (NAMESPACE_CONFIG,
/// CONTROLLER_DEFINITIONS)`, which a test checks): what the audit lists.
pub(crate) const LABELLED_SELECTOR: &str =
    "numaplane.numaproj.io/config in (namespace-level-config,numaflow-controller-definitions)";
/// The key of the namespace-level ConfigMap's `data` that names the upgrade
/// strategy of every rollout in its namespace.
pub(crate) const UPGRADE_STRATEGY_KEY: &str = "upgradeStrategy";
/// The upgrade strategies Numaplane accepts (`user_config.go`); an empty
/// or blank value reads as `no-strategy`, anything else is dropped.
pub(crate) const UPGRADE_STRATEGIES: [&str; 3] = ["progressive", "pause-and-drain", "no-strategy"];
/// The strategy that upgrades by plain apply: no pause, no drain, no
/// assessment.
pub(crate) const NO_STRATEGY: &str = "no-strategy";
pub(crate) const STRATEGIES_SHOWN: &str = "\"progressive\", \"pause-and-drain\" or \"no-strategy\"";
/// The name of Numaplane's own ConfigMap, in its namespace, whose
/// `config.yaml` holds `defaultUpgradeStrategy`.
pub(crate) const CONTROLLER_CONFIG: &str = "numaplane-controller-config";

/// What messages add to a key of `data` that Numaplane reads as
/// [`UPGRADE_STRATEGY_KEY`] although it is spelled otherwise.
pub(crate) fn folded_key_note() -> String {
    format!(" (which Numaplane reads as {UPGRADE_STRATEGY_KEY}: Go matches keys in any case)")
}

/// What a ConfigMap says about its namespace's upgrade strategy, read as
/// Numaplane reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StrategyRead {
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
    Strategy { name: &'static str, blank: bool },
}

impl StrategyRead {
    fn read(namespace_config: bool, data: &Obj<ConfigData>) -> Self {
        if !namespace_config {
            return Self::NotNamespaceConfig;
        }
        let data = match data {
            Obj::Missing | Obj::Null => return Self::NoData,
            Obj::Wrong(kind) => return Self::DataMalformed(*kind),
            Obj::Present(data) => data,
        };
        let value = match data.strategy.as_ref().map(|(_, value)| value) {
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
    fn skips_draining(&self) -> bool {
        matches!(self, Self::Strategy { name, .. } if *name == NO_STRATEGY)
    }

    /// The value as users wrote it, for messages: `"no-strategy"`, or
    /// `"" (blank, read as no-strategy)`.
    fn shown(&self) -> String {
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

/// A ConfigMap labelled by Numaplane, as Numaplane reads it: the strategy,
/// the keys it is read from, and whether it holds controller definitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConfigRead {
    pub(crate) strategy: StrategyRead,
    /// The key the strategy is read from, when it is not spelled
    /// `upgradeStrategy`.
    key: Option<String>,
    /// Two keys of `data` that Numaplane both reads as `upgradeStrategy`:
    /// the one whose value it keeps (the greatest in byte order), and
    /// another.
    pub(crate) clash: Option<(String, String)>,
    /// Labelled as Numaflow controller definitions (rule 27).
    pub(crate) definitions: bool,
}

impl ConfigRead {
    /// Reads a ConfigMap from the value of its [`CONFIG_LABEL`] and its
    /// `data` (as the lenient view holds them).
    pub(crate) fn of(label: Option<&str>, data: &Obj<ConfigData>) -> Self {
        let strategy = StrategyRead::read(label == Some(NAMESPACE_CONFIG), data);
        let data = match (&strategy, data) {
            (StrategyRead::NotNamespaceConfig, _) => None,
            (_, Obj::Present(data)) => Some(data),
            _ => None,
        };
        let key = data
            .and_then(|d| d.strategy.as_ref())
            .map(|(key, _)| key.as_str())
            .filter(|key| *key != UPGRADE_STRATEGY_KEY);
        let clash = data.and_then(|d| Some((d.strategy.as_ref()?, d.also.as_deref()?)));
        Self {
            definitions: label == Some(CONTROLLER_DEFINITIONS),
            strategy,
            key: key.map(cut_key),
            clash: clash.map(|((kept, _), also)| (cut_key(kept), cut_key(also))),
        }
    }

    pub(crate) fn skips_draining(&self) -> bool {
        self.strategy.skips_draining()
    }

    pub(crate) fn shown(&self) -> String {
        self.strategy.shown()
    }

    /// The field as messages name it: `data.upgradeStrategy`, or the key
    /// written and how Numaplane reads it.
    pub(crate) fn field(&self) -> String {
        match &self.key {
            None => format!("data.{UPGRADE_STRATEGY_KEY}"),
            Some(key) => format!("data.{key}{}", folded_key_note()),
        }
    }
}

/// A key cut short for messages (an API server allows 253 characters).
fn cut_key(key: &str) -> String {
    cut(key, 64)
}

/// The `data` of a ConfigMap, as far as the namespace-level configuration
/// reads it: the one field Numaplane takes from it, found as Go finds it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ConfigData {
    /// The key Numaplane reads as `upgradeStrategy` (the greatest in byte
    /// order of those that match), and its value (any JSON value).
    strategy: Option<(String, Value)>,
    /// Another key that matches, the greatest of the others, to name in a
    /// message.
    also: Option<String>,
}

impl ConfigData {
    /// The value Numaplane reads as `upgradeStrategy`, to cut in place (a
    /// store keeps it bounded; the key it was found under stays).
    pub(crate) fn strategy_value_mut(&mut self) -> Option<&mut Value> {
        self.strategy.as_mut().map(|(_, value)| value)
    }

    /// Adds a key of `data` that matches `upgradeStrategy`, with its value.
    fn offer(&mut self, key: String, value: Value) {
        match &mut self.strategy {
            None => self.strategy = Some((key, value)),
            Some(kept) if key == kept.0 => kept.1 = value,
            Some(kept) if key > kept.0 => {
                let (old, _) = std::mem::replace(kept, (key, value));
                self.also = Some(old);
            }
            Some(_) => {
                if self.also.as_ref().is_none_or(|also| key > *also) {
                    self.also = Some(key);
                }
            }
        }
    }
}

impl<'de> Deserialize<'de> for ConfigData {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(DataVisitor)
    }
}

struct DataVisitor;

impl<'de> Visitor<'de> for DataVisitor {
    type Value = ConfigData;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map of strings")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ConfigData, A::Error> {
        let mut data = ConfigData::default();
        while let Some(key) = map.next_key::<String>()? {
            if matches_field(&key, UPGRADE_STRATEGY_KEY) {
                let value = map.next_value::<Value>()?;
                data.offer(key, value);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(data)
    }
}

/// Whether Go's `encoding/json` decodes `key` into the struct field named
/// `field` (whose name is ASCII, as every field Numaplane names is).
fn matches_field(key: &str, field: &str) -> bool {
    let mut wanted = field.bytes();
    for c in key.chars() {
        let Some(f) = wanted.next() else {
            return false;
        };
        if fold_to_ascii(c) != Some(f.to_ascii_lowercase()) {
            return false;
        }
    }
    wanted.next().is_none()
}

/// The lower-case ASCII letter or character `c` folds with, if any.
fn fold_to_ascii(c: char) -> Option<u8> {
    match c {
        '\u{17F}' => Some(b's'),
        '\u{212A}' => Some(b'k'),
        c if c.is_ascii() => u8::try_from(c).ok().map(|b| b.to_ascii_lowercase()),
        _ => None,
    }
}

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
    pub(crate) fn from_config_map(data: Option<&BTreeMap<String, String>>) -> Self {
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
    pub(crate) fn skips_draining(&self) -> bool {
        matches!(self, Self::Strategy(NO_STRATEGY) | Self::Unknown(_))
    }

    /// The default as messages name it.
    pub(crate) fn described(&self) -> String {
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

#[cfg(test)]
mod tests;
