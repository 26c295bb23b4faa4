//! Splitting a manifest file into documents, and reading each one, with the
//! line where it starts: pure functions of the text.
//!
//! YAML streams are split on document markers (`---` and `...` at the start
//! of a line) by hand rather than by the parser, so that one broken document
//! does not hide the others and each document's first line is known. YAML
//! forbids those markers inside any content, block scalars included, so a
//! line that starts with one always is one.

use serde_json::Value;
use serde_saphyr::SnippetMode;

/// One document of a YAML stream, not yet parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawDocument<'a> {
    /// 1-based index among the file's non-empty documents.
    pub index: usize,
    /// The file line of `text`'s first line.
    pub first_line: usize,
    /// The file line of the document's first content (not a marker,
    /// comment, directive or blank line).
    pub start_line: usize,
    /// The document's text, its `---` marker and leading comments included.
    pub text: &'a str,
}

/// A document that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentError {
    /// The file line of the error.
    pub line: usize,
    /// What is wrong, with the line and column.
    pub message: String,
}

/// Whether `line` is the document marker `marker` (`---` or `...`): the
/// marker alone, or followed by a space or tab.
fn is_marker(line: &str, marker: &str) -> bool {
    line.strip_prefix(marker)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t']))
}

/// A document being gathered: where it begins, and its first content line.
struct Pending {
    start: usize,
    first_line: usize,
    marker: bool,
    content: Option<usize>,
}

impl Pending {
    fn new(start: usize, first_line: usize) -> Self {
        Self {
            start,
            first_line,
            marker: false,
            content: None,
        }
    }
}

/// Splits a YAML stream into its non-empty documents (a document of only
/// markers, comments, directives and blank lines is left out and not
/// counted).
pub fn split_yaml(text: &str) -> Vec<RawDocument<'_>> {
    let mut docs = Vec::new();
    let mut close = |pending: &Pending, end: usize| {
        if let Some(start_line) = pending.content {
            docs.push(RawDocument {
                index: docs.len() + 1,
                first_line: pending.first_line,
                start_line,
                text: &text[pending.start..end],
            });
        }
    };
    let mut pending = Pending::new(0, 1);
    let mut offset = 0;
    for (i, raw) in text.split_inclusive('\n').enumerate() {
        let (number, line) = (i + 1, raw.trim_end_matches(['\n', '\r']));
        if is_marker(line, "---") {
            // Comments and directives before the first `---` belong to its
            // document.
            if pending.marker || pending.content.is_some() {
                close(&pending, offset);
                pending = Pending::new(offset, number);
            }
            pending.marker = true;
            let rest = line[3..].trim();
            if !rest.is_empty() && !rest.starts_with('#') {
                pending.content = Some(number);
            }
        } else if is_marker(line, "...") {
            close(&pending, offset + raw.len());
            pending = Pending::new(offset + raw.len(), number + 1);
        } else if !line.starts_with('%') // a directive: before a `---` only
            && !line.trim().is_empty()
            && !line.trim_start().starts_with('#')
        {
            pending.content.get_or_insert(number);
        }
        offset += raw.len();
    }
    close(&pending, text.len());
    docs
}

/// Reads one YAML document; errors name the file line.
pub fn parse_yaml(doc: &RawDocument<'_>) -> Result<Value, DocumentError> {
    serde_saphyr::from_str::<Value>(doc.text).map_err(|e| {
        let offset = doc.first_line - 1;
        let line = e
            .location()
            .map_or(doc.start_line, |l| offset + l.line() as usize);
        let rendered = e.render_with_options(serde_saphyr::render_options! {
            snippets: SnippetMode::Off,
            line_offset: offset as u64,
        });
        DocumentError {
            line,
            message: format!("not valid YAML: {rendered}"),
        }
    })
}

/// The file line of a byte offset.
pub fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Reads a stream of JSON values (one, usually), each with its start line
/// and text (for [`list_item_lines`]). An error ends the stream: what came
/// before it is kept.
pub fn parse_json(text: &str) -> (Vec<(RawDocument<'_>, Value)>, Option<DocumentError>) {
    let mut values = Vec::new();
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let mut end = 0;
    loop {
        let start = end + text[end..].len() - text[end..].trim_start().len();
        match stream.next() {
            None => return (values, None),
            Some(Ok(value)) => {
                end = stream.byte_offset();
                let line = line_of(text, start);
                let doc = RawDocument {
                    index: values.len() + 1,
                    first_line: line,
                    start_line: line,
                    text: &text[start..end],
                };
                values.push((doc, value));
            }
            Some(Err(e)) => {
                let (line, column) = (e.line(), e.column());
                let message = format!("not valid JSON at line {line}, column {column}: {e}");
                return (values, Some(DocumentError { line, message }));
            }
        }
    }
}

/// Whether a text looks like JSON (its first character opens an object or
/// an array); YAML is tried when it does not parse as JSON.
pub fn looks_like_json(text: &str) -> bool {
    text.trim_start().starts_with(['{', '['])
}

/// The start line of each item of a `kind: List` document, where the
/// parser reports it (0 where it does not).
pub fn list_item_lines(doc: &RawDocument<'_>) -> Vec<usize> {
    #[derive(serde::Deserialize)]
    struct Items {
        #[serde(default)]
        items: Vec<serde_saphyr::Spanned<serde::de::IgnoredAny>>,
    }
    match serde_saphyr::from_str::<Items>(doc.text) {
        Ok(list) => list
            .items
            .iter()
            .map(|item| match item.referenced.line() {
                0 => 0,
                line => doc.first_line - 1 + line as usize,
            })
            .collect(),
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(text: &str) -> Vec<(usize, usize, usize, &str)> {
        split_yaml(text)
            .into_iter()
            .map(|d| (d.index, d.first_line, d.start_line, d.text))
            .collect()
    }

    #[test]
    fn a_single_document_without_markers() {
        assert_eq!(summary("a: 1\nb: 2\n"), [(1, 1, 1, "a: 1\nb: 2\n")]);
    }

    #[test]
    fn documents_split_on_markers_with_start_lines() {
        let text = "---\n# first\nkind: A\n---\n\nkind: B\n--- # c\n---\nkind: C";
        assert_eq!(
            summary(text),
            [
                (1, 1, 3, "---\n# first\nkind: A\n"),
                (2, 4, 6, "---\n\nkind: B\n"),
                (3, 8, 9, "---\nkind: C"),
            ]
        );
    }

    #[test]
    fn leading_comments_belong_to_the_first_document() {
        let text = "# Source: chart/templates/a.yaml\n---\nkind: A\n";
        assert_eq!(summary(text), [(1, 1, 3, text)]);
    }

    #[test]
    fn empty_documents_are_not_counted() {
        assert!(split_yaml("").is_empty());
        assert!(split_yaml("---\n# nothing\n---\n\n").is_empty());
        let docs = split_yaml("---\n---\nkind: A\n---\n");
        assert_eq!(docs.len(), 1);
        assert_eq!((docs[0].index, docs[0].start_line), (1, 3));
    }

    #[test]
    fn markers_need_a_space_or_the_end_of_the_line() {
        let docs = split_yaml("a: |\n  ---not a marker\n----\nb: 1\n");
        // `----` is not a marker either: it is content (and bad YAML).
        assert_eq!(docs.len(), 1);
        let docs = split_yaml("kind: A\n---\t\nkind: B\r\n---\r\nkind: C\r\n");
        assert_eq!(docs.len(), 3);
        assert_eq!(docs[2].text, "---\r\nkind: C\r\n");
    }

    #[test]
    fn content_on_the_marker_line_starts_there() {
        let docs = split_yaml("--- {kind: A}\n--- |\n  text\n");
        assert_eq!((docs[0].start_line, docs[1].start_line), (1, 2));
        assert_eq!(parse_yaml(&docs[1]).ok(), Some(Value::from("text\n")));
    }

    #[test]
    fn an_end_marker_ends_a_document_and_directives_join_the_next() {
        let text = "kind: A\n...\n%YAML 1.2\n---\nkind: B\n";
        let docs = split_yaml(text);
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0].text, "kind: A\n...\n");
        assert_eq!((docs[1].first_line, docs[1].start_line), (3, 5));
        for doc in &docs {
            assert!(parse_yaml(doc).is_ok(), "{doc:?}");
        }
    }

    #[test]
    fn parse_errors_name_the_file_line() {
        let text = "kind: A\n---\nkind: B\nmetadata:\n  name: [unclosed\n---\nkind: C\n";
        let docs = split_yaml(text);
        assert_eq!(docs.len(), 3);
        assert!(parse_yaml(&docs[0]).is_ok());
        let error = parse_yaml(&docs[1]).expect_err("bad YAML");
        assert!(
            (5..=6).contains(&error.line),
            "line {}: {}",
            error.line,
            error.message
        );
        assert!(error.message.starts_with("not valid YAML: "), "{error:?}");
        assert!(
            error.message.contains(&format!("line {}", error.line)),
            "{error:?}"
        );
        assert_eq!(
            parse_yaml(&docs[2]).ok(),
            Some(serde_json::json!({"kind": "C"}))
        );
    }

    #[test]
    fn tab_indentation_is_reported_at_its_line() {
        let docs = split_yaml("a: 1\n---\nb:\n\tc: 1\n");
        let error = parse_yaml(&docs[1]).expect_err("tabs are not indentation");
        assert_eq!(error.line, 4, "{error:?}");
    }

    #[test]
    fn json_streams_with_start_lines() {
        let (values, error) = parse_json("{\"a\": 1}\n\n  {\"b\":\n 2}\n");
        assert!(error.is_none());
        let lines: Vec<(usize, usize, &str)> = values
            .iter()
            .map(|(doc, _)| (doc.index, doc.start_line, doc.text))
            .collect();
        assert_eq!(lines, [(1, 1, "{\"a\": 1}"), (2, 3, "{\"b\":\n 2}")]);
        assert_eq!(values[1].1, serde_json::json!({"b": 2}));
        let (values, error) = parse_json("{\"a\": 1}\n{\"b\": }\n");
        assert_eq!(values.len(), 1);
        let error = error.expect("bad JSON");
        assert_eq!(error.line, 2);
        assert!(
            error
                .message
                .starts_with("not valid JSON at line 2, column"),
            "{error:?}"
        );
        assert!(looks_like_json("  \n{}"));
        assert!(!looks_like_json("kind: List"));
    }

    #[test]
    fn line_of_counts_newlines() {
        assert_eq!(line_of("a\nb\nc", 0), 1);
        assert_eq!(line_of("a\nb\nc", 2), 2);
        assert_eq!(line_of("a\nb\nc", 99), 3);
    }

    #[test]
    fn list_items_have_their_lines() {
        let text = "# dump\napiVersion: v1\nkind: List\nitems:\n- kind: A\n  x: 1\n- kind: B\n";
        let docs = split_yaml(text);
        assert_eq!(list_item_lines(&docs[0]), [5, 7]);
        let text = "kind: X\n---\nkind: List\nitems:\n  - {kind: A}\n";
        let docs = split_yaml(text);
        assert_eq!(list_item_lines(&docs[1]), [5]);
        let text = "{\n  \"kind\": \"List\",\n  \"items\": [\n    {\"kind\": \"A\"},\n    {\n      \"kind\": \"B\"\n    }\n  ]\n}\n";
        let (values, _) = parse_json(text);
        assert_eq!(list_item_lines(&values[0].0), [4, 5]);
    }
}
