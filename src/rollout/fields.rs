//! The fields of the guarded objects that the rules, the match conditions,
//! the CEL export, the audit's shape and the messages name, each spelled
//! once as its keys ([`FieldPath`]); the dotted form users read, the CEL
//! selection and the JSON Pointer are derived from them.

use std::fmt;

/// A field of a guarded object: its keys, outermost first, and the dotted
/// path users write (`spec.strategy.progressive.forcePromote`), derived
/// from the keys at compile time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldPath {
    keys: &'static [&'static str],
    dotted: &'static str,
}

/// The length of `keys` joined with dots.
const fn dotted_len(keys: &[&str]) -> usize {
    let mut len = 0;
    let mut i = 0;
    while i < keys.len() {
        len += keys[i].len();
        if i > 0 {
            len += 1;
        }
        i += 1;
    }
    len
}

/// `keys` joined with dots, as bytes (`N` is [`dotted_len`] of them).
const fn dotted_bytes<const N: usize>(keys: &[&str]) -> [u8; N] {
    let mut out = [0u8; N];
    let (mut at, mut i) = (0, 0);
    while i < keys.len() {
        if i > 0 {
            out[at] = b'.';
            at += 1;
        }
        let key = keys[i].as_bytes();
        let mut j = 0;
        while j < key.len() {
            out[at] = key[j];
            at += 1;
            j += 1;
        }
        i += 1;
    }
    assert!(at == N, "N is not the dotted length of the keys");
    out
}

/// The keys of `head`, then those of `tail` (`C` is `A + B`).
const fn concat<const A: usize, const B: usize, const C: usize>(
    head: [&'static str; A],
    tail: [&'static str; B],
) -> [&'static str; C] {
    assert!(A + B == C, "C is not A + B");
    let mut out = [""; C];
    let mut i = 0;
    while i < A {
        out[i] = head[i];
        i += 1;
    }
    while i < C {
        out[i] = tail[i - A];
        i += 1;
    }
    out
}

/// The [`FieldPath`] of a constant array of keys.
macro_rules! field_path {
    ($keys:expr) => {{
        const KEYS: &[&str] = $keys;
        const BYTES: [u8; dotted_len(KEYS)] = dotted_bytes(KEYS);
        FieldPath::from_parts(KEYS, &BYTES)
    }};
}

impl FieldPath {
    /// The path of `keys`, whose dotted form is `dotted` (what
    /// `field_path!` gives).
    const fn from_parts(keys: &'static [&'static str], dotted: &'static [u8]) -> Self {
        match std::str::from_utf8(dotted) {
            Ok(dotted) => Self { keys, dotted },
            Err(_) => panic!("a key is not UTF-8"),
        }
    }

    /// The keys, outermost first.
    pub const fn keys(self) -> &'static [&'static str] {
        self.keys
    }

    /// The dotted path, as users write it.
    pub(crate) const fn dotted(self) -> &'static str {
        self.dotted
    }

    /// The last key: the field's own name.
    pub const fn name(self) -> &'static str {
        match self.keys.last() {
            Some(key) => key,
            None => "",
        }
    }

    /// The path of the first `n` keys (the objects on the way).
    pub(crate) const fn prefix(self, n: usize) -> Self {
        let keys = self.keys.split_at(n).0;
        Self {
            keys,
            dotted: self.dotted.split_at(dotted_len(keys)).0,
        }
    }

    /// The path of the object the field is in.
    pub const fn parent(self) -> Self {
        self.prefix(self.keys.len().saturating_sub(1))
    }

    /// The entry `key` of the map at this path, as messages show it
    /// (`metadata.annotations["key"]`).
    pub(crate) fn entry(self, key: &str) -> String {
        format!("{}[\"{key}\"]", self.dotted)
    }

    /// The keys of the entry `key` of the map at this path, for a JSON Patch.
    pub(crate) fn entry_keys(self, key: &str) -> impl Iterator<Item = &str> {
        self.keys.iter().copied().chain([key])
    }

    /// The CEL selection of the field in `root` (`object.spec.x`).
    pub fn cel(self, root: &str) -> String {
        format!("{root}.{}", self.dotted)
    }

    /// The JSON Pointer of the field (`/spec/x`).
    pub(crate) fn pointer(self) -> String {
        self.keys
            .iter()
            .map(|k| format!("/{}", k.replace('~', "~0").replace('/', "~1")))
            .collect()
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.dotted)
    }
}

const PIPELINE_TEMPLATE: [&str; 2] = ["spec", "pipeline"];
/// A child Pipeline's own lifecycle.
const CHILD_LIFECYCLE: [&str; 2] = ["spec", "lifecycle"];
/// A PipelineRollout's embedded pipeline lifecycle (the template's
/// `spec.lifecycle`), where its drain timeouts are.
const ROLLOUT_LIFECYCLE: [&str; 4] = concat(PIPELINE_TEMPLATE, CHILD_LIFECYCLE);
const LABEL_KEYS: [&str; 2] = ["metadata", "labels"];
const ANNOTATION_KEYS: [&str; 2] = ["metadata", "annotations"];

pub(super) const PAUSE_KEY: &str = "pauseGracePeriodSeconds";
pub(super) const DELETION_KEY: &str = "deletionGracePeriodSeconds";
pub(super) const DEPRECATED_DELETION_KEY: &str = "deleteGracePeriodSeconds";

const ROLLOUT_PAUSE_KEYS: [&str; 5] = concat(ROLLOUT_LIFECYCLE, [PAUSE_KEY]);
const ROLLOUT_DELETION_KEYS: [&str; 5] = concat(ROLLOUT_LIFECYCLE, [DELETION_KEY]);
const ROLLOUT_DEPRECATED_KEYS: [&str; 5] = concat(ROLLOUT_LIFECYCLE, [DEPRECATED_DELETION_KEY]);
const CHILD_PAUSE_KEYS: [&str; 3] = concat(CHILD_LIFECYCLE, [PAUSE_KEY]);
const CHILD_DELETION_KEYS: [&str; 3] = concat(CHILD_LIFECYCLE, [DELETION_KEY]);
const CHILD_DEPRECATED_KEYS: [&str; 3] = concat(CHILD_LIFECYCLE, [DEPRECATED_DELETION_KEY]);
const DESIRED_PHASE_KEYS: [&str; 3] = concat(CHILD_LIFECYCLE, ["desiredPhase"]);
const TEMPLATE_ANNOTATION_KEYS: [&str; 4] = concat(PIPELINE_TEMPLATE, ANNOTATION_KEYS);

/// `spec.pipeline.spec.lifecycle.pauseGracePeriodSeconds`.
pub(super) const ROLLOUT_PAUSE: FieldPath = field_path!(&ROLLOUT_PAUSE_KEYS);
/// `spec.pipeline.spec.lifecycle.deletionGracePeriodSeconds`.
pub(super) const ROLLOUT_DELETION: FieldPath = field_path!(&ROLLOUT_DELETION_KEYS);
/// `spec.pipeline.spec.lifecycle.deleteGracePeriodSeconds`.
pub(super) const ROLLOUT_DEPRECATED_DELETION: FieldPath = field_path!(&ROLLOUT_DEPRECATED_KEYS);
/// `spec.lifecycle.pauseGracePeriodSeconds`.
pub(super) const CHILD_PAUSE: FieldPath = field_path!(&CHILD_PAUSE_KEYS);
/// `spec.lifecycle.deletionGracePeriodSeconds`.
pub(super) const CHILD_DELETION: FieldPath = field_path!(&CHILD_DELETION_KEYS);
/// `spec.lifecycle.deleteGracePeriodSeconds`.
pub(super) const CHILD_DEPRECATED_DELETION: FieldPath = field_path!(&CHILD_DEPRECATED_KEYS);

/// An object's `metadata.labels`.
pub const LABELS: FieldPath = field_path!(&LABEL_KEYS);
/// An object's `metadata.annotations`.
pub const ANNOTATIONS: FieldPath = field_path!(&ANNOTATION_KEYS);
/// A PipelineRollout's template annotations, `spec.pipeline.metadata.annotations`.
pub(crate) const TEMPLATE_ANNOTATIONS: FieldPath = field_path!(&TEMPLATE_ANNOTATION_KEYS);
/// A child Pipeline's `spec.lifecycle.desiredPhase`: pausing and resuming,
/// which anyone may change.
pub const DESIRED_PHASE: FieldPath = field_path!(&DESIRED_PHASE_KEYS);
/// The recycle scale factor, `spec.strategy.recycleStrategy.scaleFactor`.
pub(crate) const SCALE_FACTOR_FIELD: FieldPath =
    field_path!(&["spec", "strategy", "recycleStrategy", "scaleFactor"]);
/// The forced-promotion switch, `spec.strategy.progressive.forcePromote`.
pub const FORCE_PROMOTE_FIELD: FieldPath =
    field_path!(&["spec", "strategy", "progressive", "forcePromote"]);
/// The upgrade a rollout is in, `status.upgradeInProgress`.
pub(crate) const UPGRADE_IN_PROGRESS: FieldPath = field_path!(&["status", "upgradeInProgress"]);
/// The pause's recorded start, `status.pauseStatus.lastPauseBeginTime`.
pub(crate) const PAUSE_BEGIN: FieldPath =
    field_path!(&["status", "pauseStatus", "lastPauseBeginTime"]);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rendering_comes_from_the_keys() {
        let path = ROLLOUT_PAUSE;
        assert_eq!(
            path.keys(),
            [
                "spec",
                "pipeline",
                "spec",
                "lifecycle",
                "pauseGracePeriodSeconds"
            ]
        );
        assert_eq!(
            path.dotted(),
            "spec.pipeline.spec.lifecycle.pauseGracePeriodSeconds"
        );
        assert_eq!(path.to_string(), path.dotted());
        assert_eq!(path.name(), "pauseGracePeriodSeconds");
        assert_eq!(
            path.cel("oldObject"),
            "oldObject.spec.pipeline.spec.lifecycle.pauseGracePeriodSeconds"
        );
        assert_eq!(
            path.pointer(),
            "/spec/pipeline/spec/lifecycle/pauseGracePeriodSeconds"
        );
        assert_eq!(path.prefix(2).dotted(), "spec.pipeline");
        assert_eq!(path.prefix(2).keys(), ["spec", "pipeline"]);
        assert_eq!(path.prefix(0).dotted(), "");
        assert_eq!(path.parent().dotted(), "spec.pipeline.spec.lifecycle");
        let odd = field_path!(&["metadata", "a/b~c"]);
        assert_eq!(odd.pointer(), "/metadata/a~1b~0c");
        assert_eq!(
            CHILD_DEPRECATED_DELETION.dotted(),
            "spec.lifecycle.deleteGracePeriodSeconds"
        );
        assert_eq!(ANNOTATIONS.entry("a/b"), "metadata.annotations[\"a/b\"]");
        assert_eq!(
            ANNOTATIONS.entry_keys("a/b").collect::<Vec<_>>(),
            ["metadata", "annotations", "a/b"]
        );
        assert_eq!(
            TEMPLATE_ANNOTATIONS.dotted(),
            "spec.pipeline.metadata.annotations"
        );
    }
}
