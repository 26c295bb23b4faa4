use super::*;
use crate::rollout::GuardedObject;
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
        GuardedObject::from_json(&object.to_string())
            .expect("json")
            .config_read()
            .strategy
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
        GuardedObject::from_json(&other_label.to_string())
            .expect("json")
            .config_read()
            .strategy,
        StrategyRead::NotNamespaceConfig
    );
    assert!(strategy(NO_STRATEGY, true).skips_draining());
    // Keys are read as Go's encoding/json reads them.
    let read = |data: Value| {
        let object =
            json!({"metadata": {"labels": {CONFIG_LABEL: NAMESPACE_CONFIG}}, "data": data});
        GuardedObject::from_json(&object.to_string())
            .expect("json")
            .config_read()
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

#[test]
fn keys_match_fields_as_go_folds_them() {
    let cases = [
        ("upgradeStrategy", true),
        ("UpgradeStrategy", true),
        ("UPGRADESTRATEGY", true),
        ("upgradestrategy", true),
        ("upgradeſtrategy", true),
        ("UPGRADEſTRATEGY", true),
        ("upgradeStrategy ", false),
        ("upgrade-strategy", false),
        ("upgrade_strategy", false),
        ("upgradeStrateg", false),
        ("upgradeStrategyy", false),
        ("", false),
        ("upgradeStrateġy", false),
        ("upgradeStrategı", false),
    ];
    for (key, want) in cases {
        assert_eq!(matches_field(key, "upgradeStrategy"), want, "{key:?}");
    }
    // The Kelvin sign folds with k and K; ı and İ fold with nothing.
    for (key, want) in [
        ("\u{212A}ind", true),
        ("KIND", true),
        ("kınd", false),
        ("kİnd", false),
    ] {
        assert_eq!(matches_field(key, "kind"), want, "{key:?}");
    }
    // Only those two non-ASCII characters fold with an ASCII one.
    let folding: Vec<char> = ('\u{80}'..=char::MAX)
        .filter(|c| fold_to_ascii(*c).is_some())
        .collect();
    assert_eq!(folding, ['\u{17F}', '\u{212A}']);
}

#[test]
fn of_several_matching_keys_the_greatest_in_byte_order_is_kept() {
    let offer_all = |keys: &[(&str, i32)]| {
        let mut data = ConfigData::default();
        for (k, v) in keys {
            data.offer((*k).to_owned(), Value::from(*v));
        }
        data
    };
    /// A case: its name, the keys offered with their values, and the
    /// key kept, its value and another key.
    type Case<'a> = (
        &'a str,
        &'a [(&'a str, i32)],
        Option<(&'a str, i32, Option<&'a str>)>,
    );
    let cases: [Case; 6] = [
        ("none", &[], None),
        (
            "one",
            &[("UPGRADESTRATEGY", 1)],
            Some(("UPGRADESTRATEGY", 1, None)),
        ),
        (
            "lower case sorts after upper case",
            &[("upgradestrategy", 1), ("upgradeStrategy", 2)],
            Some(("upgradestrategy", 1, Some("upgradeStrategy"))),
        ),
        (
            "whatever the order written",
            &[("upgradeStrategy", 2), ("upgradestrategy", 1)],
            Some(("upgradestrategy", 1, Some("upgradeStrategy"))),
        ),
        (
            "a non-ASCII key sorts after every ASCII one",
            &[
                ("upgradeſtrategy", 3),
                ("upgradestrategy", 1),
                ("UpgradeStrategy", 2),
            ],
            Some(("upgradeſtrategy", 3, Some("upgradestrategy"))),
        ),
        (
            "the same key twice keeps the last value",
            &[("upgradeStrategy", 1), ("upgradeStrategy", 2)],
            Some(("upgradeStrategy", 2, None)),
        ),
    ];
    for (name, keys, want) in cases {
        let want = ConfigData {
            strategy: want.map(|(k, v, _)| (k.to_owned(), Value::from(v))),
            also: want.and_then(|(_, _, also)| also.map(str::to_owned)),
        };
        assert_eq!(offer_all(keys), want, "{name}");
    }
}
