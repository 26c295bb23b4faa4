//! The `cel` interpreter set up as the API server's CEL environment for
//! one request: the standard library, the strings extension, `matches` for
//! the export's wildcard patterns, and `object`, `oldObject`, `request` and
//! `variables` as the API server binds them.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use serde_json::Value;

use super::Request;
use super::webhook::go_round_trip;

/// The interpreter's context for one request: Kubernetes' functions, the
/// request's variables, and the policy's variables as they are added.
pub struct Context {
    env: Arc<cel::Env>,
    context: cel::Context<'static, 'static>,
    variables: HashMap<String, cel::Value>,
}

impl Context {
    pub fn new(request: &Request) -> Self {
        let mut env = cel::Env::stdlib();
        env.add_extension(cel::extensions::strings)
            .expect("the strings extension");
        let env = Arc::new(env);
        let mut context = cel::Context::with_env(Arc::clone(&env));
        context
            .add_function(
                "matches",
                |cel::extractors::This(s): cel::extractors::This<Arc<String>>,
                 regex: Arc<String>| wildcard(&regex, &s),
            )
            .expect("matches is not the interpreter's without regex");
        context.add_variable_from_value("object", to_cel(&request.object));
        // The stored object comes from etcd, as Go wrote it.
        context.add_variable_from_value("oldObject", to_cel(&go_round_trip(&request.old_object)));
        context.add_variable_from_value("request", to_cel(&request.cel_request()));
        context.add_variable_from_value("variables", HashMap::<String, cel::Value>::new());
        Self {
            env,
            context,
            variables: HashMap::new(),
        }
    }

    /// `text` evaluated; an error as the interpreter words it. A text that
    /// does not parse is a defect of the export, not a verdict.
    pub fn run(&self, text: &str, what: &str) -> Result<cel::Value, String> {
        // Parsing is most of the cost: each text is parsed once per thread.
        thread_local! {
            static PARSED: RefCell<HashMap<String, Rc<cel::Program>>> = RefCell::default();
        }
        let program = PARSED.with(|parsed| {
            let mut parsed = parsed.borrow_mut();
            if let Some(p) = parsed.get(text) {
                return Rc::clone(p);
            }
            let program = Rc::new(
                self.env
                    .compile(text)
                    .unwrap_or_else(|e| panic!("{what} does not parse: {e}\n{text}")),
            );
            parsed.insert(text.to_owned(), Rc::clone(&program));
            program
        });
        program.execute(&self.context).map_err(|e| e.to_string())
    }

    pub fn boolean(&self, text: &str, what: &str) -> Result<bool, String> {
        match self.run(text, what)? {
            cel::Value::Bool(b) => Ok(b),
            other => panic!("{what}: not a bool: {other:?}"),
        }
    }

    /// Adds `variables.NAME`; one that fails to evaluate is left out, so
    /// that a validation reading it fails (the API server evaluates
    /// variables lazily: only their readers fail).
    pub fn variable(&mut self, name: &str, text: &str) {
        if let Ok(value) = self.run(text, &format!("variables.{name}")) {
            self.variables.insert(name.to_owned(), value);
            self.context
                .add_variable_from_value("variables", self.variables.clone());
        }
    }
}

/// `regex`, one the export writes for a namespace pattern (`^a.*b$`: only
/// literal characters and `.*` runs, anchored), matched against `s`.
fn wildcard(regex: &str, s: &str) -> bool {
    let inner = regex
        .strip_prefix('^')
        .and_then(|r| r.strip_suffix('$'))
        .unwrap_or_else(|| panic!("not an anchored pattern: {regex}"));
    let parts: Vec<&str> = inner.split(".*").collect();
    assert!(
        parts
            .iter()
            .all(|p| p.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')),
        "not a wildcard pattern: {regex}"
    );
    let (first, rest) = parts.split_first().expect("split yields a part");
    let Some(mut left) = s.strip_prefix(first) else {
        return false;
    };
    let Some((last, middle)) = rest.split_last() else {
        return left.is_empty();
    };
    for part in middle {
        match left.find(part) {
            Some(at) => left = &left[at + part.len()..],
            None => return false,
        }
    }
    left.len() >= last.len() && left.ends_with(last)
}

/// A JSON value as the API server hands it to CEL: an integer that fits
/// int64 is an `int` (`cel::to_value` makes a positive one a `uint`, which
/// Kubernetes never does), any other number a `double`.
pub fn to_cel(v: &Value) -> cel::Value {
    match v {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => (*b).into(),
        Value::Number(n) => n
            .as_i64()
            .map_or_else(|| n.as_f64().unwrap_or(f64::NAN).into(), Into::into),
        Value::String(s) => s.clone().into(),
        Value::Array(items) => items.iter().map(to_cel).collect::<Vec<_>>().into(),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| (k.clone(), to_cel(v)))
            .collect::<HashMap<_, _>>()
            .into(),
    }
}

#[test]
fn wildcards_match_as_the_policy_reads_them() {
    for (regex, s, want) in [
        ("^team-.*-prod$", "team-a-prod", true),
        ("^team-.*-prod$", "team--prod", true),
        ("^team-.*-prod$", "team-prod", false),
        ("^team-.*$", "team-", true),
        ("^.*$", "", true),
        ("^a.*b.*c$", "abc", true),
        ("^a.*b.*c$", "acb", false),
        ("^ab$", "ab", true),
        ("^ab$", "abc", false),
    ] {
        assert_eq!(wildcard(regex, s), want, "{regex} on {s}");
    }
}
