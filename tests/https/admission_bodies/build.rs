//! Applying a case's mutations to its fixture: the body it stands for.

use proptest::sample::Index;
use serde_json::{Map, Value};

use super::strategy::{
    Case, FIXTURES, INTERESTING_KEYS, Mutation, Replacement, SET_PATHS, TextMutation, nested,
};

/// Every pointer in `v` (as tokens), parents before children.
pub fn pointers(v: &Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    out.push(prefix.clone());
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                prefix.push(k.clone());
                pointers(child, prefix, out);
                prefix.pop();
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                prefix.push(i.to_string());
                pointers(child, prefix, out);
                prefix.pop();
            }
        }
        _ => {}
    }
}

pub fn is_interesting(tokens: &[String]) -> bool {
    tokens
        .iter()
        .all(|t| INTERESTING_KEYS.contains(&t.as_str()) || t.parse::<usize>().is_ok())
}

pub fn pick(doc: &Value, at: &Index, interesting: bool, objects_only: bool) -> Option<Vec<String>> {
    let mut all = Vec::new();
    pointers(doc, &mut Vec::new(), &mut all);
    let lookup = |p: &Vec<String>| get(doc, p);
    let mut candidates: Vec<Vec<String>> = all
        .iter()
        .filter(|p| !objects_only || lookup(p).is_some_and(Value::is_object))
        .cloned()
        .collect();
    if interesting {
        let narrowed: Vec<Vec<String>> = candidates
            .iter()
            .filter(|p| is_interesting(p))
            .cloned()
            .collect();
        if !narrowed.is_empty() {
            candidates = narrowed;
        }
    }
    if candidates.is_empty() {
        None
    } else {
        Some(at.get(&candidates).clone())
    }
}

pub fn get<'a>(doc: &'a Value, tokens: &[String]) -> Option<&'a Value> {
    tokens.iter().try_fold(doc, |v, t| match v {
        Value::Object(m) => m.get(t),
        Value::Array(a) => a.get(t.parse::<usize>().ok()?),
        _ => None,
    })
}

pub fn get_mut<'a>(doc: &'a mut Value, tokens: &[String]) -> Option<&'a mut Value> {
    tokens.iter().try_fold(doc, |v, t| match v {
        Value::Object(m) => m.get_mut(t),
        Value::Array(a) => a.get_mut(t.parse::<usize>().ok()?),
        _ => None,
    })
}

/// Builds the body: the document with placeholders, then the placeholders
/// replaced by raw text.
pub struct Builder {
    doc: Value,
    raw: Vec<(Vec<u8>, Vec<u8>)>,
    /// Keys to write with `\u` escapes, done last so that no later
    /// mutation adds the same key again (a duplicate).
    escapes: Vec<(Index, bool, Index)>,
}

impl Builder {
    /// A string that stands for raw text until [`Builder::finish`].
    fn placeholder(&mut self, text: Vec<u8>) -> Value {
        let marker = format!("\u{1}PH{}\u{1}", self.raw.len());
        let pattern = serde_json::to_vec(&Value::String(marker.clone())).expect("string");
        self.raw.push((pattern, text));
        Value::String(marker)
    }

    fn value(&mut self, with: &Replacement) -> Value {
        match with {
            Replacement::Value(v) => v.clone(),
            Replacement::Raw(text) => self.placeholder(text.clone()),
        }
    }

    fn raw_text(with: &Replacement) -> Vec<u8> {
        match with {
            Replacement::Value(v) => serde_json::to_vec(v).expect("value"),
            Replacement::Raw(text) => text.clone(),
        }
    }

    fn apply(&mut self, m: &Mutation) {
        match m {
            Mutation::Replace {
                at,
                interesting,
                with,
            } => {
                let Some(p) = pick(&self.doc, at, *interesting, false) else {
                    return;
                };
                let value = self.value(with);
                if let Some(slot) = get_mut(&mut self.doc, &p) {
                    *slot = value;
                }
            }
            Mutation::Remove { at, interesting } => {
                let Some(mut p) = pick(&self.doc, at, *interesting, false) else {
                    return;
                };
                let Some(last) = p.pop() else { return };
                match get_mut(&mut self.doc, &p) {
                    Some(Value::Object(m)) => {
                        m.remove(&last);
                    }
                    Some(Value::Array(a)) => {
                        if let Ok(i) = last.parse::<usize>()
                            && i < a.len()
                        {
                            a.remove(i);
                        }
                    }
                    _ => {}
                }
            }
            Mutation::Set { path, with } => {
                let tokens = path.get(SET_PATHS);
                let value = self.value(with);
                let mut node = &mut self.doc;
                for key in &tokens[..tokens.len() - 1] {
                    if !node.is_object() {
                        *node = Value::Object(Map::new());
                    }
                    node = node
                        .as_object_mut()
                        .expect("object")
                        .entry(*key)
                        .or_insert_with(|| Value::Object(Map::new()));
                }
                if !node.is_object() {
                    *node = Value::Object(Map::new());
                }
                node.as_object_mut()
                    .expect("object")
                    .insert(tokens[tokens.len() - 1].to_owned(), value);
            }
            Mutation::DuplicateKey {
                at,
                interesting,
                key,
                with,
            } => {
                let Some(p) = pick(&self.doc, at, *interesting, true) else {
                    return;
                };
                let n = self.raw.len();
                let Some(Value::Object(map)) = get_mut(&mut self.doc, &p) else {
                    return;
                };
                let keys: Vec<String> = map.keys().cloned().collect();
                let name = if keys.is_empty() {
                    "uid".to_owned()
                } else {
                    key.get(&keys).clone()
                };
                let marker = format!("\u{1}DUP{n}\u{1}");
                map.insert(marker.clone(), Value::Null);
                let mut pattern = serde_json::to_vec(&Value::String(marker)).expect("key");
                pattern.extend_from_slice(b":null");
                let mut text = serde_json::to_vec(&Value::String(name)).expect("key");
                text.push(b':');
                text.extend_from_slice(&Self::raw_text(with));
                self.raw.push((pattern, text));
            }
            Mutation::RenameKey {
                at,
                interesting,
                key,
                how: 4..,
            } => self.escapes.push((*at, *interesting, *key)),
            Mutation::RenameKey {
                at,
                interesting,
                key,
                how,
            } => {
                let Some(p) = pick(&self.doc, at, *interesting, true) else {
                    return;
                };
                let Some(Value::Object(map)) = get_mut(&mut self.doc, &p) else {
                    return;
                };
                let keys: Vec<String> = map.keys().cloned().collect();
                if keys.is_empty() {
                    return;
                }
                let old = key.get(&keys).clone();
                let value = map.remove(&old).expect("key present");
                let renamed = match how {
                    0 => old.to_uppercase(),
                    1 => format!("{old}\u{0}"),
                    2 => format!("\u{feff}{old}"),
                    _ => format!("{old} "),
                };
                map.insert(renamed, value);
            }
        }
    }

    /// Writes one key as the same name with every character as `\uXXXX`.
    fn escape_key(&mut self, at: &Index, interesting: bool, key: &Index) {
        let Some(p) = pick(&self.doc, at, interesting, true) else {
            return;
        };
        let n = self.raw.len();
        let Some(Value::Object(map)) = get_mut(&mut self.doc, &p) else {
            return;
        };
        let keys: Vec<String> = map
            .keys()
            .filter(|k| !k.starts_with('\u{1}'))
            .cloned()
            .collect();
        if keys.is_empty() {
            return;
        }
        let old = key.get(&keys).clone();
        let value = map.remove(&old).expect("key present");
        let marker = format!("\u{1}KEY{n}\u{1}");
        let pattern = serde_json::to_vec(&Value::String(marker.clone())).expect("key");
        let mut text = String::from("\"");
        for unit in old.encode_utf16() {
            text.push_str(&format!("\\u{unit:04x}"));
        }
        text.push('"');
        self.raw.push((pattern, text.into_bytes()));
        map.insert(marker, value);
    }

    fn finish(mut self) -> Vec<u8> {
        for (at, interesting, key) in std::mem::take(&mut self.escapes) {
            self.escape_key(&at, interesting, &key);
        }
        let mut body = serde_json::to_vec(&self.doc).expect("serialise");
        for (pattern, text) in &self.raw {
            if let Some(at) = find(&body, pattern) {
                body.splice(at..at + pattern.len(), text.iter().copied());
            }
        }
        body
    }
}

pub fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

pub fn apply_text(body: &mut Vec<u8>, m: &TextMutation) {
    match m {
        TextMutation::Truncate(at) => {
            let keep = at.index(body.len().max(1));
            body.truncate(keep);
        }
        TextMutation::Overwrite(at, byte) => {
            if !body.is_empty() {
                let i = at.index(body.len());
                body[i] = *byte;
            }
        }
        TextMutation::Insert(at, bytes) => {
            let i = at.index(body.len() + 1);
            body.splice(i..i, bytes.iter().copied());
        }
        TextMutation::WrapDeep(depth) => {
            let mut wrapped = nested(*depth, "[", "", "");
            wrapped.extend_from_slice(body);
            wrapped.extend(std::iter::repeat_n(b']', *depth));
            *body = wrapped;
        }
        TextMutation::Bom => {
            body.splice(0..0, *b"\xef\xbb\xbf");
        }
        TextMutation::Trailing(bytes) => body.extend_from_slice(bytes),
    }
}

/// The body of a case, and whether it may hold duplicate keys or broken text.
pub fn build(case: &Case) -> (Vec<u8>, bool) {
    let (_, doc) = case.fixture.get(&FIXTURES);
    let mut builder = Builder {
        doc: doc.clone(),
        raw: Vec::new(),
        escapes: Vec::new(),
    };
    for m in &case.mutations {
        builder.apply(m);
    }
    let mut body = builder.finish();
    for m in &case.text {
        apply_text(&mut body, m);
    }
    let tampered = !case.text.is_empty()
        || case
            .mutations
            .iter()
            .any(|m| matches!(m, Mutation::DuplicateKey { .. }));
    (body, tampered)
}
