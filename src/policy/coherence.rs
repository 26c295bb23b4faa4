//! The start-up checks: values a policy cannot mean and contradictions
//! between its keys, each reported with the key it names.

use super::duration::format_seconds;
use super::model::{
    DefaultTimeout, DrainTimeout, MAX_CLOCK_SECONDS, MAX_NO_TIMEOUT_SECONDS, Policy, Scope,
    TimeoutRules,
};
use super::rules::{Drain, Need, OverflowReading, TimeoutField, check_timeout};

/// The longest minimum pause age a policy may ask for.
const MAX_MIN_PAUSE_AGE_SECONDS: u64 = 86_400;

pub(super) fn check(policy: &Policy, problems: &mut Vec<String>) {
    if policy.numaplane.controller_account.trim().is_empty() {
        problems.push(
            "numaplane.controllerAccount is empty: name the Numaplane controller's username, e.g. system:serviceaccount:numaplane-system:numaplane-sa".to_owned(),
        );
    }
    let ns = &policy.numaplane.namespace;
    let label = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    if ns.is_empty()
        || ns.len() > 63
        || !ns.chars().all(label)
        || ns.starts_with('-')
        || ns.ends_with('-')
    {
        problems.push(format!(
            "numaplane.namespace {ns:?} is not a namespace name: name Numaplane's own namespace, e.g. numaplane-system"
        ));
    }
    if policy.numaflow.controller_account.trim().is_empty() {
        problems.push(
            "numaflow.controllerAccount is empty: name the Numaflow controller's username, e.g. system:serviceaccount:numaflow-system:numaflow-sa".to_owned(),
        );
    }
    // Each gate's verb as resolved (written, or inherited from
    // forceReapply.rbac, whose own verb is judged below).
    for need in [
        Need::DeleteUndrained,
        Need::NamespaceStrategy,
        Need::EditChildren,
        Need::ControllerDefinitions,
    ] {
        let grant = need.grant(policy);
        if let Some(rbac) = grant.rbac.filter(|r| !is_verb(&r.verb)) {
            problems.push(format!(
                "{}.rbacVerb \"{}\" is not a verb (letters, digits, '-', '_', '.')",
                grant.key, rbac.verb
            ));
        }
    }
    let dt = &policy.drain_timeout;
    let s = dt.default_recycle_scale_factor;
    if !(1..=100).contains(&s) {
        problems.push(format!(
            "drainTimeout.defaultRecycleScaleFactor {s} must be a percent from 1 to 100"
        ));
    }
    check_section(TimeoutField::ROLLOUT_PAUSE, dt, problems);
    check_section(
        TimeoutField::ROLLOUT_DELETION,
        &policy.deletion_timeout,
        problems,
    );
    if let Some(rbac) = &policy.force_reapply.rbac {
        if !is_verb(&rbac.verb) {
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
    let ages = std::iter::once((
        "forceReapply.minPauseAge".to_owned(),
        policy.force_reapply.min_pause_age_seconds,
    ))
    .chain(
        policy
            .drain_timeout
            .namespaces
            .iter()
            .enumerate()
            .filter_map(|(i, ns)| {
                ns.min_pause_age_seconds
                    .map(|s| (format!("drainTimeout.namespaces[{i}].minPauseAge"), s))
            }),
    );
    for (key, seconds) in ages {
        if seconds > MAX_MIN_PAUSE_AGE_SECONDS {
            problems.push(format!(
                "{key} {} is above {}: a pause that long is not stuck but abandoned; set at most 1 day",
                format_seconds(seconds),
                format_seconds(MAX_MIN_PAUSE_AGE_SECONDS)
            ));
        }
    }
    for grant in Need::ALL.map(|need| need.grant(policy)) {
        for (list, which) in [(grant.users, "users"), (grant.groups, "groups")] {
            if list.iter().any(|s| s.trim().is_empty()) {
                problems.push(format!("{}.{which} has an empty name", grant.key));
            }
        }
    }
}

/// An RBAC verb: letters, digits, '-', '_' and '.'.
fn is_verb(verb: &str) -> bool {
    !verb.is_empty()
        && verb
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
}

/// The checks of one drain-timeout section (`drainTimeout` or
/// `deletionTimeout`), named by the field it judges.
fn check_section(field: TimeoutField, dt: &DrainTimeout, problems: &mut Vec<String>) {
    let section = field.section();
    let no_timeout = dt.no_timeout_seconds;
    match field.drain {
        Drain::Pause if no_timeout > MAX_NO_TIMEOUT_SECONDS => problems.push(format!(
            "{section}.noTimeoutSeconds {no_timeout} is above {MAX_NO_TIMEOUT_SECONDS}: \
             multiplied by the largest recycle multiplier (100) it overflows Numaflow's clock"
        )),
        Drain::Deletion if no_timeout > MAX_CLOCK_SECONDS => problems.push(format!(
            "{section}.noTimeoutSeconds {no_timeout} is above {MAX_CLOCK_SECONDS}: it overflows Numaflow's clock"
        )),
        _ => {}
    }
    check_scope(section, field, &dt.rules, dt, problems);
    for (i, ns) in dt.namespaces.iter().enumerate() {
        let key = format!("{section}.namespaces[{i}]");
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
        check_scope(&key, field, &ns.rules, dt, problems);
    }
}

fn check_scope(
    key: &str,
    field: TimeoutField,
    rules: &TimeoutRules,
    dt: &DrainTimeout,
    problems: &mut Vec<String>,
) {
    let section = field.section();
    let (min, max) = (rules.min, rules.max);
    if min < 1 {
        problems.push(format!(
            "{key}.min must be at least 1s (0 or less ends a {} at once, without draining)",
            match field.drain {
                Drain::Pause => "pause",
                Drain::Deletion => "deletion's drain",
            }
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
            "{section}.noTimeoutSeconds ({}) must be above {key}.max ({max}), or a timeout within policy would mean \"no timeout\"",
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
            let scope = Scope {
                rules,
                matched: None,
            };
            let overflow = match field.drain {
                Drain::Pause => OverflowReading::Recycle(dt.default_recycle_scale_factor),
                Drain::Deletion => OverflowReading::Clock,
            };
            if let Some(v) = check_timeout(i128::from(seconds), field, &scope, dt, overflow).first()
            {
                problems.push(format!(
                    "{key}.default ({seconds}) would be denied by the same policy: {}",
                    v.summary()
                ));
            }
        }
    }
}
