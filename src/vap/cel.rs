//! Pieces of CEL text: literals, guarded paths, the integer view of a JSON
//! number, and how a value is shown in a message. Every function returns
//! CEL source; none evaluates anything.
//!
//! The guards follow what the API server hands a ValidatingAdmissionPolicy:
//! `object` and `oldObject` are plain JSON maps (not schema-typed values),
//! so any value on a path may have any JSON type at run time. A field is
//! only selected after `has()` and a `type(...) == map` check of its parent,
//! so a wrongly typed value never raises a CEL runtime error.

/// A CEL string literal: single-quoted, with `\`, `'` and line breaks escaped.
pub fn string(text: &str) -> String {
    // The backslashes first: the other escapes add some.
    let escaped = text
        .replace('\\', "\\\\")
        .replace('\'', "\\'")
        .replace('\n', "\\n");
    format!("'{escaped}'")
}

/// A CEL list of string literals.
pub fn string_list<'a>(items: impl IntoIterator<Item = &'a String>) -> String {
    let items: Vec<String> = items.into_iter().map(|s| string(s)).collect();
    format!("[{}]", items.join(", "))
}

/// Whether the namespace `ns` (CEL text) matches a policy pattern, where
/// `*` stands for any run of characters (as `wildcard_match` reads it):
/// equality without a `*`, else an anchored regular expression. Namespace
/// patterns hold only lowercase letters, digits, `-` and `*` (the policy
/// checks), so nothing needs escaping.
pub fn namespace_matches(ns: &str, pattern: &str) -> String {
    if pattern.contains('*') {
        let regex = format!("^{}$", pattern.replace('*', ".*"));
        format!("{ns}.matches({})", string(&regex))
    } else {
        format!("{ns} == {}", string(pattern))
    }
}

/// One step of a path: the CEL that selects it, and its dotted name for
/// messages.
#[derive(Debug, Clone)]
pub struct Step {
    /// The CEL selection, e.g. `object.spec.pipeline`.
    pub select: String,
    /// The dotted path, e.g. `spec.pipeline`.
    pub dotted: String,
}

/// The steps from `root` along `keys`. Keys from `schemaless` on are below
/// `spec.pipeline.spec`, which the CRD leaves schemaless
/// (`x-kubernetes-preserve-unknown-fields`): the type checker knows no
/// fields there, so the selection goes through `dyn()`.
pub fn steps(root: &str, keys: &[&str], schemaless: Option<usize>) -> Vec<Step> {
    let mut out = Vec::with_capacity(keys.len());
    let mut select = root.to_owned();
    for (i, key) in keys.iter().enumerate() {
        select = if schemaless == Some(i) {
            format!("dyn({select}).{key}")
        } else {
            format!("{select}.{key}")
        };
        out.push(Step {
            select: select.clone(),
            dotted: keys[..=i].join("."),
        });
    }
    out
}

/// True when every step is present and a map: `has(a) && type(a) == map &&
/// has(a.b) && ...`. A map is never null, so null counts as absent.
pub fn all_maps(steps: &[Step]) -> String {
    steps
        .iter()
        .map(|s| format!("has({0}) && type({0}) == map", s.select))
        .collect::<Vec<_>>()
        .join(" && ")
}

/// The first step that is present, not null and not a map, as the text
/// `PATH is KIND` (`''` when there is none), its JSON kind worded as the
/// webhook words it (`a string`, `an array`, ...): the webhook's "blocked"
/// path.
/// An absent or null step ends the walk with `''`. A null is found by its
/// type: `x == null` does not type-check where the schema makes `x` a map
/// (`metadata.annotations` is a `map(string, string)`).
pub fn first_non_map(steps: &[Step]) -> String {
    let mut expr = "''".to_owned();
    for step in steps.iter().rev() {
        let s = &step.select;
        expr = format!(
            "(!has({s}) || type({s}) == null_type) ? '' :\n  type({s}) != map ? {} + \
             (type({s}) == string ? 'a string' : type({s}) == list ? 'an array' : \
             type({s}) == bool ? 'a boolean' : 'a number') :\n  {expr}",
            string(&format!("{} is ", step.dotted)),
        );
    }
    expr
}

/// The integer view of a JSON number, or `null`: an int as it is, and a
/// double with an integral value inside int64's range as that int. The
/// webhook reads the API server's JSON, where Go writes a double such as
/// `30.0` as `30`, so for it that value is the integer 30; CEL sees the
/// double the API server decoded from the request. Anything else
/// (strings, fractions, out-of-range doubles) is `null`. The bounds are
/// strict because `int()` fails at exactly -2^63 and 2^63; `dyn()` lets the
/// branches of `?:` (int and null) agree.
pub fn int_view(x: &str) -> String {
    format!(
        "{x} == null ? null : type({x}) == int ? {x} :\n  \
         (type({x}) == double && {x} > -9223372036854775808.0 && {x} < 9223372036854775807.0 \
         && double(int({x})) == {x}) ? dyn(int({x})) : null"
    )
}

/// Whether two present values are the same for ratcheting, as the webhook
/// compares JSON values: by their integer views when both have one, else
/// by type and value (CEL's `==` alone says `10 == 10.0`).
pub fn same(a: &str, a_int: &str, b: &str, b_int: &str) -> String {
    format!(
        "{a_int} != null ? ({b_int} != null && {a_int} == {b_int}) :\n  \
         ({b_int} == null && type({a}) == type({b}) && {a} == {b})"
    )
}

/// A present value as a message shows it, as the webhook shows a JSON
/// value (its JSON text, cut to 32 characters, the cut marked `…`): a
/// string quoted, its backslashes, quotes, newlines, carriage returns and
/// tabs escaped as JSON escapes them, and cut after 30 escaped characters
/// with no closing quote; a number or boolean as written; a list or map
/// by its kind (CEL cannot write JSON). Only the first 31 characters are
/// escaped: the cut needs no more, and the cost stays constant. Other
/// control characters are left as they are (JSON writes them `\u00XX`).
pub fn show(x: &str) -> String {
    let head = format!("({x}.size() > 30 ? {x}.substring(0, 31) : {x})");
    let escaped = format!(
        "{head}.replace('\\\\', '\\\\\\\\').replace('\"', '\\\\\"')\
         .replace('\\n', '\\\\n').replace('\\r', '\\\\r').replace('\\t', '\\\\t')"
    );
    format!(
        "(type({x}) == string ? ({escaped}.size() > 30 ? '\"' + {escaped}.substring(0, 30) + '…' : '\"' + {escaped} + '\"') : \
         type({x}) == list ? 'an array' : type({x}) == map ? 'an object' : string({x}))"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_escape() {
        assert_eq!(string("a'b\\c"), "'a\\'b\\\\c'");
        assert_eq!(string_list(&["x".to_owned(), "y".to_owned()]), "['x', 'y']");
    }

    #[test]
    fn patterns() {
        assert_eq!(namespace_matches("ns", "ledger"), "ns == 'ledger'");
        assert_eq!(
            namespace_matches("ns", "team-*-prod"),
            "ns.matches('^team-.*-prod$')"
        );
    }

    #[test]
    fn a_null_on_the_way_is_found_by_its_type() {
        // `annotations == null` does not type-check: the schema makes it a
        // map(string, string).
        let text = first_non_map(&steps("object", &["metadata", "annotations"], None));
        assert!(text.contains("type(object.metadata.annotations) == null_type"));
        assert!(!text.contains("== null)"), "{text}");
    }

    #[test]
    fn schemaless_steps_go_through_dyn() {
        let s = steps(
            "object",
            &["spec", "pipeline", "spec", "lifecycle"],
            Some(3),
        );
        assert_eq!(s[2].select, "object.spec.pipeline.spec");
        assert_eq!(s[3].select, "dyn(object.spec.pipeline.spec).lifecycle");
        assert_eq!(s[3].dotted, "spec.pipeline.spec.lifecycle");
    }
}
