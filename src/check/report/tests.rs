use super::*;

pub fn location(file: &str, document: usize, multi: bool, line: usize) -> Location {
    Location {
        file: file.into(),
        document: Some(document),
        multi,
        line: Some(line),
        item: None,
    }
}

pub fn remark(severity: Severity, rule: Option<u8>, message: &str) -> Remark {
    Remark {
        severity,
        rule: rule.map(|n| Rule::ALL[usize::from(n)]),
        field: rule.map(|_| "spec.x".into()),
        message: message.into(),
    }
}

pub fn sample() -> CheckReport {
    let denied = JudgedManifest {
        kind: crate::kinds::Resource::Guarded(crate::kinds::Kind::PipelineRollout),
        location: location("a.yaml", 2, true, 7),
        namespace: "team-a".into(),
        name: Some("p1".into()),
        operation: "CREATE",
        deployed: None,
        remarks: vec![
            remark(
                Severity::Info,
                None,
                "pauseGracePeriodSeconds will be set to 300 (5m)",
            ),
            remark(Severity::Error, Some(3), "too short\nreally"),
            remark(Severity::Warning, None, "careful"),
        ],
    };
    let clean = JudgedManifest {
        kind: crate::kinds::Resource::Guarded(crate::kinds::Kind::PipelineRollout),
        location: location("b.yaml", 1, false, 1),
        namespace: "default".into(),
        name: None,
        operation: "UPDATE",
        deployed: Some("dump.yaml".into()),
        remarks: vec![],
    };
    CheckReport {
        files: 3,
        skipped: 1,
        against: true,
        entries: vec![
            CheckEntry::Rollout(denied),
            CheckEntry::Problem(Problem {
                location: location("c.yaml", 1, false, 4),
                message: "not valid YAML: oops at line 4, column 1".into(),
            }),
            CheckEntry::Rollout(clean),
        ],
    }
}

#[test]
fn text_has_one_line_per_finding_and_a_summary() {
    let text = sample().text();
    assert_eq!(
        text,
        "a.yaml:2 team-a/p1: info: pauseGracePeriodSeconds will be set to 300 (5m)\n\
         a.yaml:2 team-a/p1: error: too short really\n\
         a.yaml:2 team-a/p1: warning: careful\n\
         c.yaml: error: not valid YAML: oops at line 4, column 1\n\
         checked 2 PipelineRollouts in 3 files (1 other document skipped; 1 judged as an update of deployed objects): 1 denied, 1 warning, 1 unreadable input\n"
    );
}

#[test]
fn summary_without_extras_and_exit_codes() {
    let mut report = sample();
    assert_eq!(report.exit_code(), 2);
    report.entries.remove(1);
    assert_eq!(report.exit_code(), 1);
    report.entries.remove(0);
    assert_eq!(report.exit_code(), 0);
    report.skipped = 0;
    report.against = false;
    report.files = 1;
    assert_eq!(
        report.summary(),
        "checked 1 PipelineRollout in 1 file: 0 denied, 0 warnings"
    );
}

#[test]
fn json_lists_every_finding_with_its_place() {
    let json: serde_json::Value = serde_json::from_str(&sample().json()).expect("valid JSON");
    let records = json.as_array().expect("an array");
    assert_eq!(records.len(), 4);
    assert_eq!(
        records[1],
        serde_json::json!({
            "file": "a.yaml", "document": 2, "item": null, "line": 7,
            "namespace": "team-a", "name": "p1", "operation": "CREATE",
            "severity": "error", "rule": 3, "field": "spec.x",
            "message": "too short\nreally",
        })
    );
    assert_eq!(records[3]["severity"], "error");
    assert_eq!(records[3]["name"], serde_json::Value::Null);
    assert_eq!(records[3]["line"], 4);
}
