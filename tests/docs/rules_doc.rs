//! docs/rules.md and the `Rule` type agree: the table of rules lists every
//! rule with its number and name, in order, and every numbered rule the page
//! describes is one the type has; the map of what the controllers read names
//! in every row a rule the type has, or why there is none.

use std::collections::BTreeSet;

use pipelinerollout_webhook::policy::rules::Rule;

const PAGE: &str = include_str!("../../docs/rules.md");
const TABLE_HEADING: &str = "## Every rule, by number and name";

/// The text of the page's section under `heading`, up to the next one.
fn section(heading: &str) -> &'static str {
    let rest = PAGE
        .split_once(heading)
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("docs/rules.md has no section {heading:?}"));
    rest.split("\n## ").next().unwrap_or_default()
}

/// The (number, name) rows of the page's table of rules.
fn table_rows() -> Vec<(u8, String)> {
    section(TABLE_HEADING)
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

const MAP_HEADING: &str = "## What the controllers read to decide a drain";

/// The rows of the map of what the controllers read, as cells.
fn map_rows() -> Vec<Vec<String>> {
    section(MAP_HEADING)
        .lines()
        .filter(|line| line.starts_with('|') && !line.starts_with("| ---"))
        .skip(1)
        .map(|line| {
            line.trim_matches('|')
                .split('|')
                .map(|cell| cell.trim().to_owned())
                .collect()
        })
        .collect()
}

/// The rule numbers a cell names: each number after `rule` or `rules`,
/// `N to M` as the whole range.
fn named_rules(cell: &str) -> Vec<u8> {
    let words: Vec<&str> = cell
        .split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')' || c == ';')
        .filter(|w| !w.is_empty())
        .collect();
    let mut numbers = Vec::new();
    let mut i = 0;
    while i < words.len() {
        if words[i] == "rule" || words[i] == "rules" {
            i += 1;
            while i < words.len() {
                match (words[i].parse::<u8>(), words[i]) {
                    (Ok(n), _) => {
                        if words.get(i + 1) == Some(&"to")
                            && let Some(Ok(m)) = words.get(i + 2).map(|w| w.parse::<u8>())
                        {
                            numbers.extend(n..=m);
                            i += 2;
                        } else {
                            numbers.push(n);
                        }
                    }
                    (_, "and") => {}
                    _ => break,
                }
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    numbers
}

#[test]
fn the_map_of_what_the_controllers_read_names_a_rule_or_a_reason_in_every_row() {
    let numbers: BTreeSet<u8> = Rule::ALL.iter().map(|rule| rule.number()).collect();
    let rows = map_rows();
    assert!(rows.len() >= 15, "the map has {} rows", rows.len());
    for row in &rows {
        assert_eq!(row.len(), 4, "a row of four cells: {row:?}");
        assert!(
            row[1].contains("Numaplane") || row[1].contains("Numaflow"),
            "the row says which controller reads it: {row:?}"
        );
        let judged = &row[3];
        let named = named_rules(judged);
        assert!(
            !named.is_empty() || judged.starts_with("no rule") || judged.starts_with("none needed"),
            "the row names a rule, or says there is none and why: {row:?}"
        );
        let unknown: Vec<&u8> = named.iter().filter(|n| !numbers.contains(n)).collect();
        assert!(
            unknown.is_empty(),
            "rules the webhook lacks {unknown:?}: {row:?}"
        );
    }
    for needed in [
        "permittedRiders",
        "numaflow-controller-definitions",
        "daemon",
        "Vertices",
    ] {
        assert!(
            section(MAP_HEADING).contains(needed),
            "the map leaves out {needed}"
        );
    }
}

#[test]
fn a_cell_names_single_rules_lists_and_ranges() {
    assert_eq!(
        named_rules("rules 1 to 4, and `/mutate`'s default"),
        vec![1, 2, 3, 4]
    );
    assert_eq!(named_rules("rules 5, 6 and 11"), vec![5, 6, 11]);
    assert_eq!(
        named_rules("rule 20 (and rule 21's warning on a rollout's DELETE)"),
        vec![20]
    );
    assert_eq!(named_rules("no rule: an extra Vertex"), Vec::<u8>::new());
}
