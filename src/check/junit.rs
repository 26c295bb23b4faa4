//! The JUnit XML rendering of a report, written with quick-xml: one
//! `<testsuite>` per file, one `<testcase>` per PipelineRollout (a
//! `<failure>` when it would be denied, `<system-out>` for warnings and
//! defaults) and one per unreadable input (an `<error>`). This is the format
//! Jenkins' JUnit plugin, GitLab, Azure Pipelines and most CI systems
//! display.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io;

use quick_xml::Writer;
use quick_xml::escape::partial_escape;
use quick_xml::events::attributes::Attribute;
use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};
use quick_xml::name::QName;

use super::report::{CheckEntry, CheckReport, JudgedManifest, Severity};
use crate::check::input::{Location, Problem};

const SUITES_NAME: &str = "pipelinerollout-webhook check";

/// Escapes text for XML 1.0 content with quick-xml (`&`, `<`, `>`, and a
/// carriage return as a reference); `attribute`: for a double-quoted
/// attribute value, where `"` is escaped too and line breaks and tabs are
/// kept as references (a reader would otherwise turn them into spaces).
/// Characters XML 1.0 cannot hold at all become U+FFFD.
pub fn escape(text: &str, attribute: bool) -> String {
    let forbidden = |c: char| {
        (c < ' ' && !matches!(c, '\t' | '\n' | '\r')) || matches!(c, '\u{fffe}' | '\u{ffff}')
    };
    let content = partial_escape(text.replace(forbidden, "\u{fffd}")).into_owned();
    if !attribute {
        return content;
    }
    content
        .replace('"', "&quot;")
        .replace('\n', "&#10;")
        .replace('\t', "&#9;")
}

/// An attribute whose value is escaped by [`escape`].
fn attribute<'a>(key: &'a str, value: &str) -> Attribute<'a> {
    Attribute {
        key: QName(key),
        value: Cow::Owned(escape(value, true)),
    }
}

/// A `<testsuites>` or `<testsuite>` start tag named `name`, with the
/// counts of `entries`.
fn suite_start<'a>(tag: &'a str, name: &str, entries: &[CheckEntry]) -> BytesStart<'a> {
    let count = |f: fn(&CheckEntry) -> bool| entries.iter().filter(|e| f(e)).count().to_string();
    BytesStart::new(tag).with_attributes([
        attribute("name", name),
        attribute("tests", &entries.len().to_string()),
        attribute(
            "failures",
            &count(|e| matches!(e, CheckEntry::Rollout(judged) if judged.denied())),
        ),
        attribute("errors", &count(|e| matches!(e, CheckEntry::Problem(_)))),
    ])
}

type Xml = Writer<Vec<u8>>;

pub fn render(report: &CheckReport) -> String {
    let mut xml = Writer::new_with_indent(Vec::new(), b' ', 2);
    // Writing to a Vec does not fail.
    let _ = write_report(&mut xml, report);
    let mut out = String::from_utf8(xml.into_inner())
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    out.push('\n');
    out
}

fn write_report(xml: &mut Xml, report: &CheckReport) -> io::Result<()> {
    xml.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
    let all = suite_start("testsuites", SUITES_NAME, &report.entries);
    xml.write_event(Event::Start(all))?;
    // Entries are in input order, so each file's entries are together.
    for group in report.entries.chunk_by(|a, b| a.file() == b.file()) {
        let file = group[0].file();
        let suite = suite_start("testsuite", file, group)
            .with_attributes([attribute("skipped", "0"), attribute("time", "0")]);
        xml.write_event(Event::Start(suite))?;
        for entry in group {
            match entry {
                CheckEntry::Rollout(judged) => rollout_case(xml, judged)?,
                CheckEntry::Problem(problem) => problem_case(xml, problem)?,
            }
        }
        xml.write_event(Event::End(BytesEnd::new("testsuite")))?;
    }
    xml.write_event(Event::End(BytesEnd::new("testsuites")))
}

fn case_start<'a>(name: &str, at: &Location) -> BytesStart<'a> {
    let mut case = BytesStart::new("testcase").with_attributes([
        attribute("name", name),
        // The path with dots replaced, as Jenkins would read `a.yaml` as
        // package `a`, class `yaml`.
        attribute("classname", &at.file.replace('.', "_")),
        attribute("file", &at.file),
    ]);
    if let Some(line) = at.line {
        case.push_attribute(attribute("line", &line.to_string()));
    }
    case.push_attribute(attribute("time", "0"));
    case
}

/// An element holding only `content`.
fn element(xml: &mut Xml, start: BytesStart<'_>, content: &str) -> io::Result<()> {
    let end = start.to_end().into_owned();
    xml.write_event(Event::Start(start))?;
    xml.write_event(Event::Text(BytesText::from_escaped(escape(content, false))))?;
    xml.write_event(Event::End(end))
}

fn rollout_case(xml: &mut Xml, judged: &JudgedManifest) -> io::Result<()> {
    let case = case_start(&judged.id(), &judged.location);
    let (denials, notes): (Vec<_>, Vec<_>) = judged
        .remarks
        .iter()
        .partition(|f| f.severity == Severity::Error);
    if denials.is_empty() && notes.is_empty() && judged.deployed.is_none() {
        return xml.write_event(Event::Empty(case));
    }
    xml.write_event(Event::Start(case))?;
    if !denials.is_empty() {
        let message: Vec<&str> = denials.iter().map(|f| f.message.as_str()).collect();
        let mut body = String::new();
        for f in &denials {
            let rule = f.rule.map(|r| format!("rule {}", r.number()));
            let mut place: Vec<String> = rule.into_iter().chain(f.field.clone()).collect();
            place.retain(|s| !s.is_empty());
            let _ = writeln!(body, "error ({}): {}", place.join(", "), f.message);
        }
        let failure = BytesStart::new("failure").with_attributes([
            attribute("type", "denied"),
            attribute("message", &message.join("; ")),
        ]);
        element(xml, failure, &body)?;
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
        element(xml, BytesStart::new("system-out"), &system_out)?;
    }
    xml.write_event(Event::End(BytesEnd::new("testcase")))
}

fn problem_case(xml: &mut Xml, problem: &Problem) -> io::Result<()> {
    let case = case_start(&problem.location.label(), &problem.location);
    xml.write_event(Event::Start(case))?;
    let error = BytesStart::new("error").with_attributes([
        attribute("type", "unreadable"),
        attribute("message", &problem.message),
    ]);
    element(xml, error, &problem.message)?;
    xml.write_event(Event::End(BytesEnd::new("testcase")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::report::tests::{location, remark, sample};

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
            render(&CheckReport::default()),
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"pipelinerollout-webhook check\" tests=\"0\" failures=\"0\" errors=\"0\">\n</testsuites>\n"
        );
    }

    #[test]
    fn markup_quotes_and_control_characters_parse_back() {
        let message = "a <b> & \"c\" 'd'\u{1}\tline\nnext\r";
        let judged = JudgedManifest {
            kind: crate::kinds::Resource::Guarded(crate::kinds::Kind::PipelineRollout),
            location: location("odd <&\".yaml", 1, false, 1),
            namespace: "team-a".into(),
            name: Some("p".into()),
            operation: "CREATE",
            deployed: None,
            remarks: vec![
                remark(Severity::Error, Some(3), message),
                remark(Severity::Warning, None, message),
            ],
        };
        let report = CheckReport {
            entries: vec![CheckEntry::Rollout(judged)],
            ..CheckReport::default()
        };
        let xml = render(&report);
        let doc = roxmltree::Document::parse(&xml).expect("well-formed XML");
        // The control character cannot be in XML 1.0: it is replaced.
        let kept = message.replace('\u{1}', "\u{fffd}");
        let failure = doc
            .descendants()
            .find(|n| n.has_tag_name("failure"))
            .expect("a failure");
        assert_eq!(failure.attribute("message"), Some(kept.as_str()), "{xml}");
        assert_eq!(
            failure.text(),
            Some(format!("error (rule 3, spec.x): {kept}\n").as_str()),
            "{xml}"
        );
        let out = doc
            .descendants()
            .find(|n| n.has_tag_name("system-out"))
            .expect("system-out");
        assert_eq!(out.text(), Some(format!("warning: {kept}\n").as_str()));
        let suite = doc
            .descendants()
            .find(|n| n.has_tag_name("testsuite"))
            .expect("a suite");
        assert_eq!(suite.attribute("name"), Some("odd <&\".yaml"));
    }
}
