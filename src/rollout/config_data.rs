//! The `data` of a ConfigMap, as the lenient view reads it for Numaplane's
//! namespace-level configuration (`crate::namespace_config` judges it).

use serde::Deserialize;
use serde_json::Value;

/// The `data` of a ConfigMap, as far as the namespace-level configuration
/// reads it: the one key Numaplane takes from it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ConfigData {
    #[serde(default, rename = "upgradeStrategy")]
    upgrade_strategy: Option<Value>,
}

impl ConfigData {
    /// `data` holding `upgradeStrategy: value` (the audit builds it from a
    /// stored ConfigMap, whose values are strings).
    pub fn with_strategy(value: Option<&str>) -> Self {
        Self {
            upgrade_strategy: value.map(|v| Value::String(v.to_owned())),
        }
    }

    /// `data.upgradeStrategy`, as found (any JSON value).
    pub fn upgrade_strategy(&self) -> Option<&Value> {
        self.upgrade_strategy.as_ref()
    }
}
