//! The policy file: parsing, defaults, the start-up checks, and rendering.

use std::collections::BTreeSet;
use std::fmt::{self, Write as _};
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

use super::rules::check_timeout;
use super::{
    BUILT_IN_POLICY, DefaultTimeout, DrainTimeout, ForceReapply, MAX_NO_TIMEOUT_SECONDS, Mode,
    NamespaceRules, Policy, RbacPolicy, TimeoutRules,
};

/// Why a policy cannot be used. The message is what the operator reads at
/// start-up, on reload and from `check-policy`.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file could not be read.
    #[error("cannot read policy file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The text is not a policy: bad YAML, an unknown key, a wrong type.
    #[error("{where_}invalid policy: {message}")]
    Parse {
        /// "policy file X: " or empty.
        where_: String,
        /// The parser's words, with the line and column.
        message: String,
    },
    /// The policy parses but cannot be right.
    #[error("{where_}invalid policy: {}", problems.join("; "))]
    Invalid {
        /// "policy file X: " or empty.
        where_: String,
        /// Every problem found, each naming its key.
        problems: Vec<String>,
    },
}

impl PolicyError {
    /// Names the file the error came from.
    pub(super) fn in_file(self, path: &Path) -> Self {
        let where_ = format!("policy file {}: ", path.display());
        match self {
            Self::Parse { message, .. } => Self::Parse { where_, message },
            Self::Invalid { problems, .. } => Self::Invalid { where_, problems },
            read @ Self::Read { .. } => read,
        }
    }
}

/// A number of seconds, written as an integer or a duration such as `45s`,
/// `5m`, `1h30m`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seconds(u64);

fn parse_duration(text: &str) -> Result<u64, String> {
    let text = text.trim();
    if let Ok(n) = text.parse::<u64>() {
        return Ok(n);
    }
    let d = humantime::parse_duration(text).map_err(|e| {
        format!(
            "\"{text}\" is not a duration ({e}); write e.g. 45s, 5m, 1h30m or a number of seconds"
        )
    })?;
    if d.subsec_nanos() != 0 {
        return Err(format!("\"{text}\" is not a whole number of seconds"));
    }
    Ok(d.as_secs())
}

/// Renders seconds the way the file accepts them: `30s`, `1h`, `1h 30m`.
pub fn format_seconds(seconds: u64) -> String {
    humantime::format_duration(Duration::from_secs(seconds)).to_string()
}

struct SecondsVisitor;

impl Visitor<'_> for SecondsVisitor {
    type Value = Seconds;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a duration such as 45s, 5m or 1h30m, or an integer number of seconds")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Seconds, E> {
        Ok(Seconds(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Seconds, E> {
        u64::try_from(v)
            .map(Seconds)
            .map_err(|_| E::custom(format!("{v} is negative; durations are positive")))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Seconds, E> {
        parse_duration(v).map(Seconds).map_err(E::custom)
    }
}

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SecondsVisitor)
    }
}

struct DefaultVisitor;

impl Visitor<'_> for DefaultVisitor {
    type Value = DefaultTimeout;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"none\" (no timeout) or a duration such as 5m")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<DefaultTimeout, E> {
        Ok(DefaultTimeout::Seconds(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<DefaultTimeout, E> {
        SecondsVisitor
            .visit_i64(v)
            .map(|s| DefaultTimeout::Seconds(s.0))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<DefaultTimeout, E> {
        if v.trim() == "none" {
            return Ok(DefaultTimeout::NoTimeout);
        }
        parse_duration(v)
            .map(DefaultTimeout::Seconds)
            .map_err(|e| E::custom(format!("{e}, or \"none\" for no timeout")))
    }
}

#[derive(Debug, Clone, Copy)]
struct DefaultSpec(DefaultTimeout);

impl<'de> Deserialize<'de> for DefaultSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(DefaultVisitor).map(DefaultSpec)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PolicyFile {
    mode: Option<ModeSpec>,
    drain_timeout: Option<DrainTimeoutFile>,
    force_reapply: Option<ForceReapplyFile>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum ModeSpec {
    Enforce,
    Warn,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct DrainTimeoutFile {
    default: Option<DefaultSpec>,
    no_timeout_seconds: Option<u64>,
    allow_no_timeout: Option<bool>,
    min: Option<Seconds>,
    max: Option<Seconds>,
    default_recycle_scale_factor: Option<u64>,
    namespaces: Option<Vec<NamespaceFile>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct NamespaceFile {
    #[serde(rename = "match")]
    patterns: Vec<String>,
    default: Option<DefaultSpec>,
    allow_no_timeout: Option<bool>,
    min: Option<Seconds>,
    max: Option<Seconds>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ForceReapplyFile {
    rbac: Option<RbacFile>,
    users: Option<Vec<String>>,
    groups: Option<Vec<String>>,
    require_pausing: Option<bool>,
    gate_force_promote: Option<bool>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RbacFile {
    verb: Option<String>,
    #[serde(rename = "cacheTTL")]
    cache_ttl: Option<Seconds>,
    timeout: Option<Seconds>,
}

fn parse_file(text: &str) -> Result<PolicyFile, PolicyError> {
    // An empty file (or one with only comments) is the built-in policy.
    if text.lines().all(|l| {
        let l = l.trim();
        l.is_empty() || l.starts_with('#') || l == "---"
    }) {
        return Ok(PolicyFile {
            mode: None,
            drain_timeout: None,
            force_reapply: None,
        });
    }
    serde_saphyr::from_str(text).map_err(|e| PolicyError::Parse {
        where_: String::new(),
        message: e.to_string(),
    })
}

/// Parses a policy; keys left out take the built-in policy's values.
pub(super) fn parse(text: &str) -> Result<Policy, PolicyError> {
    let given = parse_file(text)?;
    let base = if text == BUILT_IN_POLICY {
        None
    } else {
        Some(parse_file(BUILT_IN_POLICY)?)
    };
    let base_dt = base.as_ref().and_then(|b| b.drain_timeout.as_ref());
    let base_fr = base.as_ref().and_then(|b| b.force_reapply.as_ref());
    let dt = given.drain_timeout.unwrap_or_default();
    let fr = given.force_reapply.unwrap_or_default();

    // Each key: the file's value, else the built-in one. The built-in text
    // sets every key (a unit test checks it), so `missing` never shows.
    let mut problems = Vec::new();
    macro_rules! pick {
        ($given:expr, $base:expr, $key:literal) => {
            match $given.or($base) {
                Some(v) => v,
                None => {
                    problems.push(format!("{} is missing", $key));
                    Default::default()
                }
            }
        };
    }
    let mode = match given
        .mode
        .or(base.as_ref().and_then(|b| b.mode))
        .unwrap_or(ModeSpec::Enforce)
    {
        ModeSpec::Enforce => Mode::Enforce,
        ModeSpec::Warn => Mode::Warn,
    };
    let default: Option<DefaultSpec> = dt.default.or(base_dt.and_then(|b| b.default));
    let rules = TimeoutRules {
        default: default.map_or(DefaultTimeout::NoTimeout, |d| d.0),
        allow_no_timeout: pick!(
            dt.allow_no_timeout,
            base_dt.and_then(|b| b.allow_no_timeout),
            "drainTimeout.allowNoTimeout"
        ),
        min: pick!(
            dt.min.map(|s| s.0),
            base_dt.and_then(|b| b.min).map(|s| s.0),
            "drainTimeout.min"
        ),
        max: pick!(
            dt.max.map(|s| s.0),
            base_dt.and_then(|b| b.max).map(|s| s.0),
            "drainTimeout.max"
        ),
    };
    let namespaces = dt
        .namespaces
        .unwrap_or_default()
        .into_iter()
        .map(|ns| NamespaceRules {
            patterns: ns.patterns,
            rules: TimeoutRules {
                default: ns.default.map_or(rules.default, |d| d.0),
                allow_no_timeout: ns.allow_no_timeout.unwrap_or(rules.allow_no_timeout),
                min: ns.min.map_or(rules.min, |s| s.0),
                max: ns.max.map_or(rules.max, |s| s.0),
            },
        })
        .collect();
    let policy = Policy {
        mode,
        drain_timeout: DrainTimeout {
            rules,
            no_timeout_seconds: pick!(
                dt.no_timeout_seconds,
                base_dt.and_then(|b| b.no_timeout_seconds),
                "drainTimeout.noTimeoutSeconds"
            ),
            default_recycle_scale_factor: pick!(
                dt.default_recycle_scale_factor,
                base_dt.and_then(|b| b.default_recycle_scale_factor),
                "drainTimeout.defaultRecycleScaleFactor"
            ),
            namespaces,
        },
        force_reapply: ForceReapply {
            users: pick!(
                fr.users,
                base_fr.and_then(|b| b.users.clone()),
                "forceReapply.users"
            )
            .into_iter()
            .collect(),
            groups: pick!(
                fr.groups,
                base_fr.and_then(|b| b.groups.clone()),
                "forceReapply.groups"
            )
            .into_iter()
            .collect(),
            require_pausing: pick!(
                fr.require_pausing,
                base_fr.and_then(|b| b.require_pausing),
                "forceReapply.requirePausing"
            ),
            gate_force_promote: pick!(
                fr.gate_force_promote,
                base_fr.and_then(|b| b.gate_force_promote),
                "forceReapply.gateForcePromote"
            ),
            rbac: fr
                .rbac
                .or_else(|| base_fr.and_then(|b| b.rbac.clone()))
                .map(|r| RbacPolicy {
                    verb: r.verb.unwrap_or_else(|| "force-reapply".to_owned()),
                    cache_ttl_seconds: r.cache_ttl.map_or(10, |s| s.0),
                    timeout_seconds: r.timeout.map_or(2, |s| s.0),
                }),
        },
    };
    check(&policy, &mut problems);
    if problems.is_empty() {
        Ok(policy)
    } else {
        Err(PolicyError::Invalid {
            where_: String::new(),
            problems,
        })
    }
}

/// The start-up checks: impossible values and contradictions.
fn check(policy: &Policy, problems: &mut Vec<String>) {
    let dt = &policy.drain_timeout;
    let no_timeout = dt.no_timeout_seconds;
    if no_timeout > MAX_NO_TIMEOUT_SECONDS {
        problems.push(format!(
            "drainTimeout.noTimeoutSeconds {no_timeout} is above {MAX_NO_TIMEOUT_SECONDS}: \
             multiplied by the largest recycle multiplier (100) it overflows Numaflow's clock"
        ));
    }
    let s = dt.default_recycle_scale_factor;
    if !(1..=100).contains(&s) {
        problems.push(format!(
            "drainTimeout.defaultRecycleScaleFactor {s} must be a percent from 1 to 100"
        ));
    }
    check_scope("drainTimeout", &dt.rules, policy, problems);
    for (i, ns) in dt.namespaces.iter().enumerate() {
        let key = format!("drainTimeout.namespaces[{i}]");
        if ns.patterns.is_empty() {
            problems.push(format!(
                "{key}.match is empty; list namespace names or patterns"
            ));
        }
        for p in &ns.patterns {
            let valid = !p.is_empty()
                && p.len() <= 63
                && p.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '*');
            if !valid {
                problems.push(format!(
                    "{key}.match: \"{p}\" is not a namespace name or pattern (lowercase letters, digits, '-', and '*' as a wildcard)"
                ));
            }
        }
        check_scope(&key, &ns.rules, policy, problems);
    }
    if let Some(rbac) = &policy.force_reapply.rbac {
        let verb_ok = !rbac.verb.is_empty()
            && rbac
                .verb
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
        if !verb_ok {
            problems.push(format!(
                "forceReapply.rbac.verb \"{}\" is not a verb (letters, digits, '-', '_', '.')",
                rbac.verb
            ));
        }
        if !(1..=10).contains(&rbac.timeout_seconds) {
            problems.push(format!(
                "forceReapply.rbac.timeout {}s must be from 1s to 10s (the API server waits at most 30s for the whole webhook)",
                rbac.timeout_seconds
            ));
        }
        if rbac.cache_ttl_seconds > 300 {
            problems.push(format!(
                "forceReapply.rbac.cacheTTL {}s is above 5m: a revoked permission would keep working that long",
                rbac.cache_ttl_seconds
            ));
        }
    }
    for (list, key) in [
        (&policy.force_reapply.users, "forceReapply.users"),
        (&policy.force_reapply.groups, "forceReapply.groups"),
    ] {
        if list.iter().any(|s| s.trim().is_empty()) {
            problems.push(format!("{key} has an empty name"));
        }
    }
}

fn check_scope(key: &str, rules: &TimeoutRules, policy: &Policy, problems: &mut Vec<String>) {
    let dt = &policy.drain_timeout;
    let (min, max) = (rules.min, rules.max);
    if min < 1 {
        problems.push(format!(
            "{key}.min must be at least 1s (0 or less ends a pause at once, without draining)"
        ));
    }
    if min > max {
        problems.push(format!(
            "{key}.min ({}) is above {key}.max ({})",
            format_seconds(min),
            format_seconds(max)
        ));
    }
    if dt.no_timeout_seconds <= max {
        problems.push(format!(
            "drainTimeout.noTimeoutSeconds ({}) must be above {key}.max ({max}), or a timeout within policy would mean \"no timeout\"",
            dt.no_timeout_seconds
        ));
    }
    match rules.default {
        DefaultTimeout::NoTimeout if !rules.allow_no_timeout => problems.push(format!(
            "{key}.default is none (no timeout) but {key}.allowNoTimeout is false: set a default from {} to {}, or allow no timeout",
            format_seconds(min),
            format_seconds(max)
        )),
        default => {
            let seconds = dt.default_seconds(default);
            let scope = super::Scope {
                rules,
                matched: None,
            };
            if let Some(v) = check_timeout(
                i128::from(seconds),
                &scope,
                dt,
                Some(dt.default_recycle_scale_factor),
            )
            .first()
            {
                problems.push(format!(
                    "{key}.default ({seconds}) would be denied by the same policy: {}",
                    v.summary()
                ));
            }
        }
    }
}

/// Renders a policy in the file format, every key spelled out.
pub(super) fn render(policy: &Policy) -> String {
    fn list(items: &BTreeSet<String>) -> String {
        let quoted: Vec<String> = items
            .iter()
            .map(|s| serde_json::Value::String(s.clone()).to_string())
            .collect();
        format!("[{}]", quoted.join(", "))
    }
    fn default_text(d: DefaultTimeout) -> String {
        match d {
            DefaultTimeout::NoTimeout => "none".to_owned(),
            DefaultTimeout::Seconds(s) => format_seconds(s),
        }
    }
    let dt = &policy.drain_timeout;
    let fr = &policy.force_reapply;
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = writeln!(out, "mode: {}", policy.mode);
    let _ = writeln!(out, "drainTimeout:");
    let _ = writeln!(out, "  default: {}", default_text(dt.rules.default));
    let _ = writeln!(out, "  noTimeoutSeconds: {}", dt.no_timeout_seconds);
    let _ = writeln!(out, "  allowNoTimeout: {}", dt.rules.allow_no_timeout);
    let _ = writeln!(out, "  min: {}", format_seconds(dt.rules.min));
    let _ = writeln!(out, "  max: {}", format_seconds(dt.rules.max));
    let _ = writeln!(
        out,
        "  defaultRecycleScaleFactor: {}",
        dt.default_recycle_scale_factor
    );
    if dt.namespaces.is_empty() {
        let _ = writeln!(out, "  namespaces: []");
    } else {
        let _ = writeln!(out, "  namespaces:");
        for ns in &dt.namespaces {
            let patterns: BTreeSet<String> = ns.patterns.iter().cloned().collect();
            let _ = writeln!(out, "  - match: {}", list(&patterns));
            let _ = writeln!(out, "    default: {}", default_text(ns.rules.default));
            let _ = writeln!(out, "    allowNoTimeout: {}", ns.rules.allow_no_timeout);
            let _ = writeln!(out, "    min: {}", format_seconds(ns.rules.min));
            let _ = writeln!(out, "    max: {}", format_seconds(ns.rules.max));
        }
    }
    let _ = writeln!(out, "forceReapply:");
    let _ = writeln!(out, "  users: {}", list(&fr.users));
    let _ = writeln!(out, "  groups: {}", list(&fr.groups));
    let _ = writeln!(out, "  requirePausing: {}", fr.require_pausing);
    let _ = writeln!(out, "  gateForcePromote: {}", fr.gate_force_promote);
    if let Some(rbac) = &fr.rbac {
        let _ = writeln!(out, "  rbac:");
        let _ = writeln!(
            out,
            "    verb: {}",
            serde_json::Value::String(rbac.verb.clone())
        );
        let _ = writeln!(out, "    cacheTTL: {}", rbac.cache_ttl_seconds);
        let _ = writeln!(out, "    timeout: {}", rbac.timeout_seconds);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(yaml: &str) -> String {
        match Policy::from_yaml(yaml) {
            Ok(p) => panic!("expected an error for {yaml:?}, got {p:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn built_in_text_sets_every_key() {
        let raw = parse_file(BUILT_IN_POLICY).expect("built-in parses");
        let dt = raw.drain_timeout.expect("drainTimeout");
        let fr = raw.force_reapply.expect("forceReapply");
        assert!(raw.mode.is_some());
        assert!(dt.default.is_some() && dt.no_timeout_seconds.is_some());
        assert!(dt.allow_no_timeout.is_some() && dt.min.is_some() && dt.max.is_some());
        assert!(dt.default_recycle_scale_factor.is_some() && dt.namespaces.is_some());
        assert!(fr.users.is_some() && fr.groups.is_some());
        assert!(fr.require_pausing.is_some() && fr.gate_force_promote.is_some());
    }

    #[test]
    fn durations_in_every_accepted_form() {
        let cases = [
            ("45s", 45),
            ("5m", 300),
            ("1h", 3600),
            ("1h30m", 5400),
            ("1h 30m", 5400),
            ("90", 90),
        ];
        for (text, want) in cases {
            assert_eq!(parse_duration(text), Ok(want), "{text}");
        }
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("1.5s").is_err());
        assert!(parse_duration("").is_err());
        let p = Policy::from_yaml("drainTimeout:\n  min: 45\n  max: 1h30m\n").expect("valid");
        assert_eq!(
            (p.drain_timeout.rules.min, p.drain_timeout.rules.max),
            (45, 5400)
        );
    }

    #[test]
    fn empty_file_is_the_built_in_policy() {
        assert_eq!(Policy::from_yaml("").expect("empty"), Policy::built_in());
        assert_eq!(
            Policy::from_yaml("# nothing\n").expect("comments"),
            Policy::built_in()
        );
    }

    #[test]
    fn json_is_accepted() {
        let p = Policy::from_yaml(r#"{"mode": "warn", "drainTimeout": {"max": "2h"}}"#)
            .expect("json policy");
        assert_eq!(p.mode, Mode::Warn);
        assert_eq!(p.drain_timeout.rules.max, 7200);
    }

    #[test]
    fn start_up_errors_are_precise() {
        let cases = [
            ("mode: strict\n", "strict"),
            ("drainTimeout:\n  maxx: 1h\n", "maxx"),
            ("forceReapply:\n  user: [a]\n", "user"),
            (
                "drainTimeout:\n  min: 2h\n  max: 1h\n",
                "drainTimeout.min (2h) is above drainTimeout.max (1h)",
            ),
            (
                "drainTimeout:\n  noTimeoutSeconds: 3600\n",
                "must be above drainTimeout.max",
            ),
            (
                "drainTimeout:\n  noTimeoutSeconds: 92233721\n",
                "92233721 is above 92233720",
            ),
            (
                "drainTimeout:\n  allowNoTimeout: false\n",
                "default is none (no timeout) but drainTimeout.allowNoTimeout is false",
            ),
            (
                "drainTimeout:\n  default: 10s\n",
                "drainTimeout.default (10) would be denied",
            ),
            (
                "drainTimeout:\n  default: 2h\n",
                "drainTimeout.default (7200) would be denied",
            ),
            ("drainTimeout:\n  min: 0\n", "min must be at least 1s"),
            ("drainTimeout:\n  min: -5\n", "negative"),
            ("drainTimeout:\n  max: soon\n", "\"soon\" is not a duration"),
            (
                "drainTimeout:\n  defaultRecycleScaleFactor: 0\n",
                "from 1 to 100",
            ),
            (
                "drainTimeout:\n  defaultRecycleScaleFactor: 101\n",
                "from 1 to 100",
            ),
            (
                "drainTimeout:\n  namespaces:\n  - match: [pay]\n    allowNoTimeout: false\n",
                "drainTimeout.namespaces[0].default is none",
            ),
            (
                "drainTimeout:\n  namespaces:\n  - match: [pay]\n    maxx: 1h\n",
                "maxx",
            ),
            (
                "drainTimeout:\n  namespaces:\n  - match: []\n    max: 2h\n",
                "match is empty",
            ),
            (
                "drainTimeout:\n  namespaces:\n  - match: [\"Pay_1\"]\n",
                "not a namespace name",
            ),
            (
                "forceReapply:\n  users: [\"\"]\n",
                "forceReapply.users has an empty name",
            ),
            ("mode: [\n", "invalid policy"),
        ];
        for (yaml, want) in cases {
            let got = problems(yaml);
            assert!(got.contains(want), "{yaml:?}: {got:?} lacks {want:?}");
        }
    }

    #[test]
    fn default_seconds_at_or_above_no_timeout_need_allow_no_timeout() {
        let yaml = "drainTimeout:\n  default: 40000000\n  allowNoTimeout: false\n";
        assert!(problems(yaml).contains("no timeout"));
        let ok = Policy::from_yaml("drainTimeout:\n  default: 40000000\n").expect("allowed");
        assert_eq!(
            ok.drain_timeout.rules.default,
            DefaultTimeout::Seconds(40_000_000)
        );
    }

    #[test]
    fn rbac_settings() {
        let p = Policy::from_yaml("forceReapply:\n  rbac: {verb: force-reapply}\n").expect("valid");
        let rbac = p.force_reapply.rbac.clone().expect("rbac");
        assert_eq!(
            (
                rbac.verb.as_str(),
                rbac.cache_ttl_seconds,
                rbac.timeout_seconds
            ),
            ("force-reapply", 10, 2)
        );
        assert_eq!(Policy::from_yaml(&p.to_yaml()).expect("round trip"), p);
        let p =
            Policy::from_yaml("forceReapply:\n  rbac: {verb: approve, cacheTTL: 0, timeout: 1s}\n")
                .expect("valid");
        assert_eq!(
            p.force_reapply
                .rbac
                .map(|r| (r.cache_ttl_seconds, r.timeout_seconds)),
            Some((0, 1))
        );
        assert!(Policy::built_in().force_reapply.rbac.is_none());
        for (yaml, want) in [
            (
                "forceReapply:\n  rbac: {verb: \"force reapply\"}\n",
                "is not a verb",
            ),
            ("forceReapply:\n  rbac: {timeout: 30s}\n", "from 1s to 10s"),
            ("forceReapply:\n  rbac: {cacheTTL: 1h}\n", "above 5m"),
            ("forceReapply:\n  rbac: {verbs: [x]}\n", "verbs"),
        ] {
            assert!(problems(yaml).contains(want), "{yaml}: {}", problems(yaml));
        }
    }

    #[test]
    fn rendering_round_trips() {
        let p = Policy::from_yaml(
            "mode: warn\ndrainTimeout:\n  default: 5m\n  max: 1h30m\n  namespaces:\n  - match: [\"pay-*\"]\n    allowNoTimeout: false\nforceReapply:\n  users: [a, \"b:c\"]\n",
        )
        .expect("valid");
        let text = p.to_yaml();
        assert_eq!(
            Policy::from_yaml(&text).expect("rendered text parses"),
            p,
            "{text}"
        );
        assert_eq!(
            Policy::from_yaml(&Policy::built_in().to_yaml()).expect("built-in renders"),
            Policy::built_in()
        );
    }
}
