//! The manifests to check: each file's text split into documents,
//! `kind: List`s unpacked, and the guarded objects among them picked out
//! (PipelineRollouts, the other rollouts, Numaplane's children;
//! [`super::files`] finds and reads the files).

use serde_json::Value;

use super::documents::{self, DocumentError, RawDocument};
use crate::kinds::{Kind, Resource};
use crate::namespace_config::{CONFIG_LABEL, CONTROLLER_DEFINITIONS, NAMESPACE_CONFIG};

/// Where something was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The file, as given or found under a directory (`<stdin>` for `-`).
    pub file: String,
    /// The 1-based document index, when known.
    pub document: Option<usize>,
    /// Whether the file holds more than one document (then the index is
    /// shown in text output).
    pub multi: bool,
    /// The file line: where the document (or List item) starts, or where
    /// the error is.
    pub line: Option<usize>,
    /// The 1-based index of the item, for an object inside a `kind: List`.
    pub item: Option<usize>,
}

impl Location {
    pub(super) fn file(file: &str) -> Self {
        Self {
            file: file.to_owned(),
            document: None,
            multi: false,
            line: None,
            item: None,
        }
    }

    /// `FILE` or, in a file of several documents, `FILE:DOC`.
    pub fn label(&self) -> String {
        match (self.multi, self.document) {
            (true, Some(doc)) => format!("{}:{doc}", self.file),
            _ => self.file.clone(),
        }
    }
}

/// A manifest of a kind `check` judges.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub location: Location,
    pub kind: Resource,
    pub object: Value,
}

/// Input that could not be read: a file, or one document of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub location: Location,
    /// What is wrong, and how to fix it.
    pub message: String,
}

/// One thing found in the input (a [`Manifest`]), or judged (a
/// [`super::report::JudgedManifest`]), in input order.
#[derive(Debug, Clone)]
pub enum Entry<T> {
    /// An object to judge (a PipelineRollout or another guarded kind).
    Rollout(T),
    Problem(Problem),
}

pub type Item = Entry<Manifest>;

/// Everything read from the paths given.
#[derive(Debug, Default)]
pub struct Inputs {
    /// The files read (or tried), standard input included.
    pub files: usize,
    /// Documents (and List items) of no guarded kind.
    pub skipped: usize,
    /// The PipelineRollouts and the problems, in input order.
    pub items: Vec<Item>,
    /// Directories given that held no manifest files.
    pub empty_dirs: Vec<String>,
}

/// What a manifest is, if `check` judges it: a guarded kind (by its
/// apiVersion's group and its kind), or a ConfigMap labelled as
/// Numaplane's namespace-level configuration or as Numaflow controller
/// definitions.
pub fn checked_kind(object: &Value) -> Option<Resource> {
    let api_version = object.get("apiVersion").and_then(Value::as_str);
    let kind = object.get("kind").and_then(Value::as_str);
    let group = api_version.and_then(|v| v.split_once('/')).map(|(g, _)| g);
    if let Some(kind) = group.zip(kind).and_then(|(g, k)| Kind::from_kind(g, k)) {
        return Some(Resource::Guarded(kind));
    }
    let core_config_map = api_version == Some(Resource::ConfigMap.version())
        && kind == Some(Resource::ConfigMap.kind());
    let labelled = object
        .pointer(&format!(
            "/metadata/labels/{}",
            CONFIG_LABEL.replace('/', "~1")
        ))
        .and_then(Value::as_str)
        .is_some_and(|v| v == NAMESPACE_CONFIG || v == CONTROLLER_DEFINITIONS);
    (core_config_map && labelled).then_some(Resource::ConfigMap)
}

/// Reads one file's text: JSON (a stream of values) when `json_only` or
/// when it parses as JSON, YAML documents otherwise.
pub fn read_text(inputs: &mut Inputs, file: &str, text: &str, json_only: bool) {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if json_only || documents::looks_like_json(text) {
        let (values, error) = documents::parse_json(text);
        if json_only || error.is_none() {
            let multi = values.len() + usize::from(error.is_some()) > 1;
            let count = values.len();
            for (doc, value) in values {
                let location = doc_location(file, doc.index, multi, doc.start_line);
                add_object(inputs, location, value, &doc);
            }
            if let Some(error) = error {
                inputs
                    .items
                    .push(problem(doc_location(file, count + 1, multi, 0), error));
            }
            return;
        }
    }
    let docs = documents::split_yaml(text);
    let multi = docs.len() > 1;
    for doc in &docs {
        let location = doc_location(file, doc.index, multi, doc.start_line);
        match documents::parse_yaml(doc) {
            Ok(value) => add_object(inputs, location, value, doc),
            Err(error) => inputs.items.push(problem(location, error)),
        }
    }
}

fn doc_location(file: &str, document: usize, multi: bool, line: usize) -> Location {
    Location {
        document: Some(document),
        multi,
        line: (line > 0).then_some(line),
        ..Location::file(file)
    }
}

fn problem(mut location: Location, error: DocumentError) -> Item {
    location.line = Some(error.line);
    Item::Problem(Problem {
        location,
        message: error.message,
    })
}

/// Files one parsed document: a PipelineRollout, a List's items, or a
/// skipped document (`null` documents are not counted).
fn add_object(inputs: &mut Inputs, location: Location, mut value: Value, doc: &RawDocument) {
    if value.is_null() {
        return;
    }
    let kind = value.get("kind").and_then(Value::as_str);
    let is_list = kind.is_some_and(|kind| kind.ends_with("List"));
    let items = value
        .get_mut("items")
        .filter(|items| is_list && items.is_array());
    let Some(Value::Array(items)) = items.map(Value::take) else {
        return add_manifest(inputs, location, value);
    };
    let lines = documents::list_item_lines(doc);
    for (i, object) in items.into_iter().enumerate() {
        let mut at = location.clone();
        at.item = Some(i + 1);
        if let Some(&line) = lines.get(i).filter(|&&l| l > 0) {
            at.line = Some(line);
        }
        add_manifest(inputs, at, object);
    }
}

fn add_manifest(inputs: &mut Inputs, location: Location, object: Value) {
    match checked_kind(&object) {
        Some(kind) => inputs.items.push(Item::Rollout(Manifest {
            location,
            kind,
            object,
        })),
        None => inputs.skipped += 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Inputs {
        let mut inputs = Inputs::default();
        read_text(&mut inputs, "f.yaml", text, false);
        inputs
    }

    const ROLLOUT: &str =
        "apiVersion: numaplane.numaproj.io/v1alpha1\nkind: PipelineRollout\nmetadata: {name: a}\n";

    #[test]
    fn documents_lists_and_others() {
        let text = format!(
            "{ROLLOUT}---\napiVersion: v1\nkind: ConfigMap\n---\napiVersion: v1\nkind: List\nitems:\n- {{apiVersion: v1, kind: Secret}}\n- apiVersion: numaplane.numaproj.io/v1alpha1\n  kind: PipelineRollout\n"
        );
        let inputs = read(&text);
        assert_eq!(inputs.skipped, 2);
        let rollouts: Vec<&Location> = inputs
            .items
            .iter()
            .filter_map(|item| match item {
                Item::Rollout(m) => Some(&m.location),
                Item::Problem(_) => None,
            })
            .collect();
        assert_eq!(rollouts.len(), 2);
        assert_eq!(
            (rollouts[0].document, rollouts[0].line, rollouts[0].multi),
            (Some(1), Some(1), true)
        );
        assert_eq!(
            (rollouts[1].document, rollouts[1].item, rollouts[1].line),
            (Some(3), Some(2), Some(12))
        );
        assert_eq!(rollouts[1].label(), "f.yaml:3");
    }

    #[test]
    fn a_bad_document_is_a_problem_and_the_others_are_read() {
        let inputs = read(&format!("a: [1\n---\n{ROLLOUT}"));
        assert!(matches!(&inputs.items[0], Item::Problem(p) if p.location.line == Some(1)));
        assert!(matches!(&inputs.items[1], Item::Rollout(_)));
    }

    #[test]
    fn json_is_read_as_json_and_a_single_document_has_no_index_shown() {
        let mut inputs = Inputs::default();
        read_text(
            &mut inputs,
            "f.json",
            "{\"apiVersion\": \"numaplane.numaproj.io/v1\", \"kind\": \"PipelineRollout\"}",
            true,
        );
        match &inputs.items[..] {
            [Item::Rollout(m)] => assert_eq!(m.location.label(), "f.json"),
            other => panic!("{other:?}"),
        }
        let mut inputs = Inputs::default();
        read_text(&mut inputs, "f.json", "kind: List\n", true);
        assert!(
            matches!(&inputs.items[..], [Item::Problem(p)] if p.message.starts_with("not valid JSON"))
        );
    }

    #[test]
    fn a_yaml_flow_document_that_is_not_json_is_read_as_yaml() {
        let inputs = read("{apiVersion: numaplane.numaproj.io/v1alpha1, kind: PipelineRollout}\n");
        assert!(matches!(&inputs.items[..], [Item::Rollout(_)]));
    }
}
