//! The three output formats: text is in main.rs; JSON and JUnit here.

use super::*;

#[test]
fn json_findings_carry_their_place() {
    let run = check(&["--output", "json", &fixture("repo")]);
    assert_eq!(run.code, 1);
    let records = json(&run);
    assert_eq!(records.len(), 4, "{}", run.stdout);
    let list_item = &records[0];
    assert_eq!(list_item["file"], fixture("repo/platform/rollouts.json"));
    assert_eq!(
        (list_item["document"].as_u64(), list_item["item"].as_u64()),
        (Some(1), Some(2))
    );
    // The line of the item's opening brace in the kubectl-style JSON List.
    let text =
        std::fs::read_to_string(fixtures().join("repo/platform/rollouts.json")).expect("fixture");
    let brace = text.lines().position(|l| l == "    {").expect("items") + 1;
    let second = text
        .lines()
        .skip(brace)
        .position(|l| l == "    {")
        .expect("second item")
        + brace
        + 1;
    assert_eq!(list_item["line"].as_u64(), Some(second as u64));

    let enrich = &records[1];
    assert_eq!(enrich["name"], "enrich");
    assert_eq!(enrich["document"], 3);
    assert_eq!(enrich["severity"], "info");
    assert_eq!(
        enrich["field"],
        "spec.pipeline.spec.lifecycle.pauseGracePeriodSeconds"
    );
    // Document 3 starts after its comment, at `apiVersion:`.
    let text =
        std::fs::read_to_string(fixtures().join("repo/team-a/pipelines.yaml")).expect("fixture");
    let starts: Vec<usize> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.starts_with("apiVersion:"))
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(enrich["line"].as_u64(), Some(starts[2] as u64));

    let forced = &records[2];
    assert_eq!(
        (
            forced["namespace"].as_str(),
            forced["name"].as_str(),
            forced["operation"].as_str()
        ),
        (Some("team-b"), Some("replay"), Some("CREATE"))
    );
    assert_eq!(
        (forced["document"].as_u64(), forced["line"].as_u64()),
        (Some(1), Some(2))
    );
    assert_eq!(forced["severity"], "error");
    assert_eq!(forced["rule"], 6);
    assert_eq!(
        forced["field"],
        "metadata.annotations[\"numaplane.numaproj.io/allow-data-loss\"]"
    );
    assert!(
        forced["message"]
            .as_str()
            .is_some_and(|m| m.contains(DENY_ADDED_FORCE))
    );
    assert_eq!(records[3]["rule"], 3);
    assert_eq!(records[3]["namespace"], "default");
}

#[test]
fn junit_has_a_case_per_rollout() {
    let run = check(&["-o", "junit", &fixture("repo")]);
    assert_eq!(run.code, 1);
    let doc = roxmltree::Document::parse(&run.stdout).expect("well-formed XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    assert_eq!(
        (
            root.attribute("tests"),
            root.attribute("failures"),
            root.attribute("errors")
        ),
        (Some("5"), Some("2"), Some("0"))
    );
    let suites: Vec<_> = root
        .children()
        .filter(|n| n.has_tag_name("testsuite"))
        .collect();
    assert_eq!(suites.len(), 4);
    let cases: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    let names: Vec<_> = cases.iter().filter_map(|c| c.attribute("name")).collect();
    assert_eq!(
        names,
        [
            "platform/metrics",
            "team-a/ingest",
            "team-a/enrich",
            "team-b/replay",
            "default/short-drain"
        ]
    );
    let failures: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("failure"))
        .collect();
    assert_eq!(failures.len(), 2);
    let replay = failures[0].parent().expect("testcase");
    assert_eq!(replay.attribute("name"), Some("team-b/replay"));
    assert_eq!(
        replay.attribute("file"),
        Some(fixture("repo/team-b/forced.yaml").as_str())
    );
    assert!(
        failures[0]
            .attribute("message")
            .is_some_and(|m| m.contains(DENY_ADDED_FORCE))
    );
    assert!(failures[0].text().is_some_and(|t| t.contains("rule 6")));
    let enrich = cases[2];
    let out = enrich
        .children()
        .find(|n| n.has_tag_name("system-out"))
        .and_then(|n| n.text())
        .unwrap_or_default();
    assert_eq!(
        out,
        "info: pauseGracePeriodSeconds will be set to 31536000 (no timeout)\n"
    );
    assert!(run.stderr.is_empty(), "{}", run.stderr);
}
