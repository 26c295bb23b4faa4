//! docs/rules.md and the `Rule` type agree: the table of rules lists every
//! rule with its number and name, in order, and every numbered rule the page
//! describes is one the type has.

use std::collections::BTreeSet;

use pipelinerollout_webhook::policy::rules::Rule;

const PAGE: &str = include_str!("../../docs/rules.md");
const TABLE_HEADING: &str = "## Every rule, by number and name";

/// The (number, name) rows of the page's table of rules.
fn table_rows() -> Vec<(u8, String)> {
    let section = PAGE
        .split_once(TABLE_HEADING)
        .map(|(_, rest)| rest)
        .expect("docs/rules.md has a table of rules");
    let section = section.split("\n## ").next().unwrap_or_default();
    section
        .lines()
        .filter(|line| line.starts_with('|'))
        .filter_map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            let number = cells.first()?.parse::<u8>().ok()?;
            let name = cells.get(1)?.trim_matches('`').to_owned();
            Some((number, name))
        })
        .collect()
}

/// The numbers of the rules the page describes as numbered items
/// (`N. **...**`).
fn described_numbers() -> BTreeSet<u8> {
    PAGE.lines()
        .filter_map(|line| {
            let (number, _) = line.trim_start().split_once(". **")?;
            number.parse::<u8>().ok()
        })
        .collect()
}

#[test]
fn the_table_lists_every_rule_with_its_number_and_name_in_order() {
    let want: Vec<(u8, String)> = Rule::ALL
        .iter()
        .map(|rule| (rule.number(), rule.name().to_owned()))
        .collect();
    assert_eq!(
        table_rows(),
        want,
        "docs/rules.md's table against Rule::ALL"
    );
}

#[test]
fn every_rule_described_is_a_rule_and_every_rule_is_described() {
    let numbers: BTreeSet<u8> = Rule::ALL.iter().map(|rule| rule.number()).collect();
    let described = described_numbers();
    let unknown: Vec<&u8> = described.difference(&numbers).collect();
    assert!(
        unknown.is_empty(),
        "docs/rules.md describes rules Rule lacks: {unknown:?}"
    );
    // Rule 0 is the denial of what cannot be judged, described in rule 9
    // and the table; every other rule has its own numbered item.
    let missing: Vec<u8> = numbers
        .iter()
        .copied()
        .filter(|n| *n != Rule::Judgeable.number() && !described.contains(n))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/rules.md does not describe rules {missing:?}"
    );
}
