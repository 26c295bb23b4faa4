//! The JUnit XML rendering of a report, written by hand: one `<testsuite>`
//! per file, one `<testcase>` per PipelineRollout (a `<failure>` when it
//! would be denied, `<system-out>` for warnings and defaults) and one per
//! unreadable input (an `<error>`). This is the format Jenkins' JUnit
//! plugin, GitLab, Azure Pipelines and most CI systems display.

use std::fmt::Write as _;

use super::report::{Entry, Judged, Report, Severity};
use crate::check::input::Problem;

/// The name of the whole run.
const SUITES_NAME: &str = "pipelinerollout-webhook check";

/// Escapes text for XML 1.0 content (`attribute`: for a double-quoted
/// attribute value, where line breaks and tabs are kept as references).
/// Characters XML 1.0 cannot hold at all become U+FFFD.
pub fn escape(text: &str, attribute: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' if attribute => out.push_str("&quot;"),
            '\n' if attribute => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' if attribute => out.push_str("&#9;"),
            '\t' | '\n' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => {
                out.push('\u{fffd}');
            }
            c => out.push(c),
        }
    }
    out
}

/// The class name of a file's test cases: the path with dots replaced, as
/// Jenkins would read `a.yaml` as package `a`, class `yaml`.
fn class_name(file: &str) -> String {
    file.replace('.', "_")
}

struct Counts {
    tests: usize,
    failures: usize,
    errors: usize,
}

fn counts<'a>(entries: impl Iterator<Item = &'a Entry>) -> Counts {
    let mut counts = Counts {
        tests: 0,
        failures: 0,
        errors: 0,
    };
    for entry in entries {
        counts.tests += 1;
        match entry {
            Entry::Rollout(judged) if judged.denied() => counts.failures += 1,
            Entry::Rollout(_) => {}
            Entry::Problem(_) => counts.errors += 1,
        }
    }
    counts
}

/// Renders the report as a JUnit XML document.
pub fn render(report: &Report) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let all = counts(report.entries.iter());
    let _ = writeln!(
        out,
        "<testsuites name=\"{SUITES_NAME}\" tests=\"{}\" failures=\"{}\" errors=\"{}\">",
        all.tests, all.failures, all.errors
    );
    // Entries are in input order, so each file's entries are together.
    for group in report.entries.chunk_by(|a, b| a.file() == b.file()) {
        let file = group[0].file();
        let c = counts(group.iter());
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"0\" time=\"0\">",
            escape(file, true),
            c.tests,
            c.failures,
            c.errors
        );
        for entry in group {
            match entry {
                Entry::Rollout(judged) => rollout_case(&mut out, judged),
                Entry::Problem(problem) => problem_case(&mut out, problem),
            }
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

fn case_open(out: &mut String, name: &str, file: &str, line: Option<usize>) {
    let line = line.map(|l| format!(" line=\"{l}\"")).unwrap_or_default();
    let _ = write!(
        out,
        "    <testcase name=\"{}\" classname=\"{}\" file=\"{}\"{line} time=\"0\"",
        escape(name, true),
        escape(&class_name(file), true),
        escape(file, true),
    );
}

fn rollout_case(out: &mut String, judged: &Judged) {
    case_open(
        out,
        &judged.id(),
        &judged.location.file,
        judged.location.line,
    );
    let denials: Vec<_> = judged.of(Severity::Error).collect();
    let notes: Vec<_> = judged
        .remarks
        .iter()
        .filter(|f| f.severity != Severity::Error)
        .collect();
    if denials.is_empty() && notes.is_empty() && judged.deployed.is_none() {
        out.push_str("/>\n");
        return;
    }
    out.push_str(">\n");
    if !denials.is_empty() {
        let message: Vec<&str> = denials.iter().map(|f| f.message.as_str()).collect();
        let mut body = String::new();
        for f in &denials {
            let rule = f.rule.map(|r| format!("rule {r}")).unwrap_or_default();
            let field = f.field.as_deref().unwrap_or_default();
            let place = [rule.as_str(), field]
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(", ");
            let _ = writeln!(body, "error ({place}): {}", f.message);
        }
        let _ = writeln!(
            out,
            "      <failure type=\"denied\" message=\"{}\">{}</failure>",
            escape(&message.join("; "), true),
            escape(&body, false)
        );
    }
    let mut system_out = String::new();
    if let Some(deployed) = &judged.deployed {
        let _ = writeln!(
            system_out,
            "judged as an UPDATE of the deployed object in {deployed}"
        );
    }
    for f in notes {
        let _ = writeln!(system_out, "{}: {}", f.severity.as_str(), f.message);
    }
    if !system_out.is_empty() {
        let _ = writeln!(
            out,
            "      <system-out>{}</system-out>",
            escape(&system_out, false)
        );
    }
    out.push_str("    </testcase>\n");
}

fn problem_case(out: &mut String, problem: &Problem) {
    case_open(
        out,
        &problem.location.label(),
        &problem.location.file,
        problem.location.line,
    );
    let _ = writeln!(
        out,
        ">\n      <error type=\"unreadable\" message=\"{}\">{}</error>\n    </testcase>",
        escape(&problem.message, true),
        escape(&problem.message, false)
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::report::tests::sample;

    #[test]
    fn escaping() {
        assert_eq!(
            escape("a<b & \"c\"\n\t'd'>", true),
            "a&lt;b &amp; &quot;c&quot;&#10;&#9;'d'&gt;"
        );
        assert_eq!(escape("a\"b\n\u{1}\r", false), "a\"b\n\u{fffd}&#13;");
        assert_eq!(escape("]]>", false), "]]&gt;");
    }

    #[test]
    fn one_case_per_rollout_and_per_unreadable_input() {
        let xml = render(&sample());
        assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"pipelinerollout-webhook check\" tests=\"3\" failures=\"1\" errors=\"1\">\n"), "{xml}");
        assert_eq!(xml.matches("<testsuite ").count(), 3, "{xml}");
        assert!(xml.contains(
            "<testcase name=\"team-a/p1\" classname=\"a_yaml\" file=\"a.yaml\" line=\"7\" time=\"0\">"
        ));
        assert!(xml.contains("<failure type=\"denied\" message=\"too short&#10;really\">error (rule 3, spec.x): too short\nreally\n</failure>"), "{xml}");
        assert!(xml.contains("<system-out>info: pauseGracePeriodSeconds will be set to 300 (5m)\nwarning: careful\n</system-out>"), "{xml}");
        assert!(xml.contains(
            "<error type=\"unreadable\" message=\"not valid YAML: oops at line 4, column 1\">"
        ));
        assert!(xml.contains("judged as an UPDATE of the deployed object in dump.yaml"));
        assert!(xml.ends_with("</testsuites>\n"));
    }

    #[test]
    fn an_empty_report_is_a_valid_document() {
        assert_eq!(
            render(&Report::default()),
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"pipelinerollout-webhook check\" tests=\"0\" failures=\"0\" errors=\"0\">\n</testsuites>\n"
        );
    }
}
