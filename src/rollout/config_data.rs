//! The `data` of a ConfigMap, as the lenient view reads it for Numaplane's
//! namespace-level configuration (`crate::namespace_config` judges it).
//!
//! Numaplane decodes `data` into its `NamespaceConfig` struct with Go's
//! `encoding/json`, which matches keys case-insensitively
//! ([`crate::go_keys`]): `UpgradeStrategy` and `UPGRADESTRATEGY` set the
//! same field as `upgradeStrategy`, and of several such keys the greatest
//! in byte order wins. The view keeps the key Numaplane reads and its value,
//! and another matching key when there is one.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

use crate::go_keys::Matched;
use crate::kinds::UPGRADE_STRATEGY_KEY;

/// The `data` of a ConfigMap, as far as the namespace-level configuration
/// reads it: the one field Numaplane takes from it, found as Go finds it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConfigData {
    upgrade_strategy: Option<Matched<Value>>,
}

impl ConfigData {
    /// `data` holding `upgradeStrategy: value` (the audit builds it from a
    /// stored ConfigMap, whose values are strings).
    pub fn with_strategy(value: Option<&str>) -> Self {
        Self {
            upgrade_strategy: value.map(|v| Matched {
                kept: (UPGRADE_STRATEGY_KEY.to_owned(), Value::String(v.to_owned())),
                also: None,
            }),
        }
    }

    /// The value Numaplane reads as `upgradeStrategy` (any JSON value).
    pub fn upgrade_strategy(&self) -> Option<&Value> {
        self.upgrade_strategy.as_ref().map(|m| &m.kept.1)
    }

    /// The key Numaplane reads `upgradeStrategy` from, when it is spelled
    /// otherwise (`UpgradeStrategy`, `UPGRADESTRATEGY`).
    pub fn strategy_key(&self) -> Option<&str> {
        self.upgrade_strategy
            .as_ref()
            .map(|m| m.kept.0.as_str())
            .filter(|k| *k != UPGRADE_STRATEGY_KEY)
    }

    /// Two keys Numaplane reads as `upgradeStrategy`, when `data` has more
    /// than one: the one it keeps, and another.
    pub fn strategy_clash(&self) -> Option<(&str, &str)> {
        let m = self.upgrade_strategy.as_ref()?;
        m.also.as_deref().map(|also| (m.kept.0.as_str(), also))
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
        let mut found = None;
        while let Some(key) = map.next_key_seed(KeyText)? {
            if crate::go_keys::matches_field(&key, UPGRADE_STRATEGY_KEY) {
                let value = map.next_value::<Value>()?;
                Matched::offer(&mut found, key.into_owned(), value);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(ConfigData {
            upgrade_strategy: found,
        })
    }
}

/// A key of `data`, borrowed from the request's bytes where it can be: only
/// the keys read as `upgradeStrategy` are copied.
struct KeyText;

impl<'de> DeserializeSeed<'de> for KeyText {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyText {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}
