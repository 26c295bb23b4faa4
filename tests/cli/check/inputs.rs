//! The kinds of input: unreadable files and documents, bad policies,
//! standard input, a kustomize overlay.

use super::*;

#[test]
fn bad_yaml_is_reported_with_file_and_line_and_the_rest_is_checked() {
    let broken = fixture("bad/broken.yaml");
    let text = std::fs::read_to_string(fixtures().join("bad/broken.yaml")).expect("fixture");
    let tab_line = text
        .lines()
        .position(|l| l.starts_with('\t'))
        .expect("a tab")
        + 1;

    let run = check(&[&fixture("bad")]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert_eq!(
        run.stdout.lines().next(),
        Some(
            format!("{broken}:2: error: not valid YAML: tabs disallowed within this context (block indentation) at line {tab_line}, column 2")
                .as_str()
        ),
        "{}",
        run.stdout
    );
    assert_eq!(
        last_line(&run.stdout),
        "checked 3 PipelineRollouts in 2 files: 0 denied, 0 warnings, 1 unreadable input"
    );

    let run = check(&["-o", "json", &fixture("bad")]);
    assert_eq!(run.code, 2);
    let records = json(&run);
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["file"], broken);
    assert_eq!(records[0]["document"], 2);
    assert_eq!(records[0]["line"].as_u64(), Some(tab_line as u64));
    assert_eq!(records[0]["name"], Value::Null);
    // With the report going to a file, the problem is also on stderr.
    assert!(
        run.stderr
            .contains(&format!("{broken}:2: error: not valid YAML")),
        "{}",
        run.stderr
    );

    let run = check(&["-o", "junit", &fixture("bad")]);
    let doc = roxmltree::Document::parse(&run.stdout).expect("well-formed XML");
    let root = doc.root_element();
    assert_eq!(
        (
            root.attribute("tests"),
            root.attribute("failures"),
            root.attribute("errors")
        ),
        (Some("4"), Some("0"), Some("1"))
    );
    let error = doc
        .descendants()
        .find(|n| n.has_tag_name("error"))
        .expect("an error");
    assert_eq!(
        error.parent().and_then(|c| c.attribute("name")),
        Some(format!("{broken}:2").as_str())
    );
}

#[test]
fn unreadable_paths_and_policies() {
    let valid = fixture("bad/valid.yaml");
    let run = check(&["tests/fixtures/check/no-such-dir/x.yaml", &valid]);
    assert_eq!(run.code, 2);
    assert!(
        run.stdout
            .starts_with("tests/fixtures/check/no-such-dir/x.yaml: error: cannot read the file: "),
        "{}",
        run.stdout
    );
    assert_eq!(
        last_line(&run.stdout),
        "checked 1 PipelineRollout in 2 files: 0 denied, 0 warnings, 1 unreadable input"
    );

    let dir = tempfile::tempdir().expect("dir");
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "drainTimeout:\n  allowNoTimeout: false\n").expect("write");
    let run = check(&["--policy", policy.to_str().expect("path"), &valid]);
    assert_eq!(run.code, 2);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert!(
        run.stderr
            .contains(&format!("policy file {}: invalid policy", policy.display())),
        "{}",
        run.stderr
    );

    // A policy whose default is a duration: the info says how long.
    std::fs::write(&policy, "drainTimeout:\n  default: 5m\n").expect("write");
    let run = check(&[
        "--policy",
        policy.to_str().expect("path"),
        &fixture("repo/team-a"),
    ]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(
        run.stdout
            .contains("team-a/enrich: info: pauseGracePeriodSeconds will be set to 300 (5m)\n"),
        "{}",
        run.stdout
    );

    // An empty pipe is most likely a failed command before it.
    let run = check_with_stdin(&["-o", "junit", "-"], Some(b"# nothing\n---\n"));
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .contains("<stdin>: error: standard input holds no documents"),
        "{}",
        run.stderr
    );

    let run = check_with_stdin(&["-", "--against", "-"], Some(b""));
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("can be read only once"),
        "{}",
        run.stderr
    );
}

#[test]
fn standard_input_takes_a_rendered_stream() {
    // What `kubectl kustomize` or `helm template` prints: documents joined by ---.
    let mut stream = Vec::new();
    for file in ["repo/team-a/pipelines.yaml", "repo/team-b/short.yml"] {
        stream.extend(b"---\n");
        stream.extend(std::fs::read(fixtures().join(file)).expect("fixture"));
    }
    let run = check_with_stdin(&["-"], Some(&stream));
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.starts_with("<stdin>:3 team-a/enrich: info: "),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("\n<stdin>:4 default/short-drain: error: "),
        "{}",
        run.stdout
    );
    assert_eq!(
        last_line(&run.stdout),
        "checked 3 PipelineRollouts in 1 file (1 other document skipped): 1 denied, 0 warnings"
    );
}

#[test]
fn a_kustomize_overlay_piped_in() {
    let overlay = fixtures().join("kustomize/overlays/prod");
    let rendered = match Command::new("kubectl")
        .arg("kustomize")
        .arg(&overlay)
        .output()
    {
        Ok(out) if out.status.success() => out.stdout,
        Ok(out) => panic!(
            "kubectl kustomize failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => {
            panic!(
                "tests/cli/check.rs needs kubectl (with its built-in kustomize) on the PATH: {e}"
            )
        }
    };
    let run = check_with_stdin(&["--output", "junit", "-"], Some(&rendered));
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    let doc = roxmltree::Document::parse(&run.stdout).expect("well-formed XML");
    let case = doc
        .descendants()
        .find(|n| n.has_tag_name("testcase"))
        .expect("a case");
    assert_eq!(case.attribute("name"), Some("prod-pipelines/checkout"));
    assert_eq!(case.attribute("file"), Some("<stdin>"));
    let failure = case
        .children()
        .find(|n| n.has_tag_name("failure"))
        .expect("a failure");
    assert!(
        failure
            .attribute("message")
            .is_some_and(|m| m.contains("is 7200, above the maximum of 3600 (1h)")),
        "{:?}",
        failure.attribute("message")
    );
}

#[test]
fn the_other_rollouts_and_the_children_are_judged_too() {
    let run = check(&[&fixture("children")]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    let rollouts = fixture("children/rollouts.yaml");
    let pipeline = fixture("children/pipeline.yaml");
    assert!(
        run.stdout.contains(&format!(
            "{pipeline} team-c/my-pipeline-0: error: user \"pipelinerollout-webhook:check\" may not set metadata.labels[\"numaplane.numaproj.io/upgrade-state\"]"
        )),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains(&format!(
            "{rollouts}:1 team-c/my-monovertex: error: user \"pipelinerollout-webhook:check\" may not set spec.monoVertex.metadata.labels[\"numaplane.numaproj.io/force-promote\"]"
        )),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains("my-isbsvc"), "{}", run.stdout);
    assert_eq!(
        last_line(&run.stdout),
        "checked 0 PipelineRollouts and 3 other guarded objects in 2 files: 2 denied, 0 warnings"
    );
}

#[test]
fn numaplanes_namespace_level_configmaps_are_judged_too() {
    let file = fixture("namespace-config/numaplane-config.yaml");
    let run = check(&[&file]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stdout.contains(&format!(
            "{file}:1 team-c/numaplane-config: error: user \"pipelinerollout-webhook:check\" may not set data.upgradeStrategy to \"no-strategy\" in namespace \"team-c\""
        )),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains(&format!(
            "{file}:2 team-d/numaplane-config: error: data.upgradeStrategy is \"drain\", which Numaplane does not accept"
        )),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains("team-e"), "{}", run.stdout);
    assert_eq!(
        last_line(&run.stdout),
        "checked 0 PipelineRollouts and 3 other guarded objects in 1 file (1 other document skipped): 2 denied, 0 warnings"
    );
    // As an UPDATE of the deployed no-strategy: unchanged, so allowed.
    let deployed = fixture("deployed/namespace-config.yaml");
    let run = check(&["--against", &deployed, &file]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stdout.contains("team-c/numaplane-config: warning: unchanged, so allowed: upgradeStrategy \"no-strategy\""),
        "{}",
        run.stdout
    );
    assert!(
        last_line(&run.stdout).ends_with("1 denied, 1 warning"),
        "{}",
        run.stdout
    );
    // A requester in the policy's groups may.
    let run = check(&["--as-group", "system:masters", &file]);
    assert!(
        !run.stdout.contains("team-c/numaplane-config: error"),
        "{}",
        run.stdout
    );
}

#[test]
fn namespace_level_configmaps_are_read_as_numaplanes_go_decoder_reads_them() {
    let file = fixture("namespace-config/folded-keys.yaml");
    let run = check(&[&file]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    let folded = "(which Numaplane reads as upgradeStrategy: Go matches keys in any case)";
    for (line, says) in [
        (
            "1 team-f/numaplane-config",
            format!("may not set data.UpgradeStrategy {folded} to \"no-strategy\" in namespace \"team-f\""),
        ),
        (
            "2 team-g/numaplane-config",
            "data has both \"upgradestrategy\" and \"upgradeStrategy\", which Numaplane reads as the same field upgradeStrategy".to_owned(),
        ),
        (
            "2 team-g/numaplane-config",
            format!("may not set data.upgradestrategy {folded} to empty or blank"),
        ),
        (
            "3 team-h/numaplane-config",
            format!("data.UPGRADESTRATEGY {folded} is true, not a string"),
        ),
    ] {
        let wanted = format!("{file}:{line}: error: ");
        assert!(
            run.stdout
                .lines()
                .any(|l| l.starts_with(&wanted) && l.contains(&says)),
            "no {wanted}...{says}: {}",
            run.stdout
        );
    }
    assert!(!run.stdout.contains("team-i"), "{}", run.stdout);
    assert_eq!(
        last_line(&run.stdout),
        "checked 0 PipelineRollouts and 4 other guarded objects in 1 file: 3 denied, 0 warnings"
    );
}
