//! The generated expressions as text: every judged key is in them, and a
//! rollout's reads its own template.

use super::*;

#[test]
fn every_judged_key_is_in_the_expressions() {
    for kind in FILTERED {
        let text = expression(kind).expect("an expression");
        for key in label_keys().iter().chain(&annotation_keys()) {
            assert!(text.contains(&format!("'{key}'")), "{kind:?}: {key}");
        }
        assert_eq!(text.contains("forcePromote"), !kind.is_child(), "{kind:?}");
        assert_eq!(
            text.contains("deletionGracePeriodSeconds"),
            kind.is_child(),
            "{kind:?}"
        );
    }
    assert_eq!(expression(Kind::PipelineRollout), None);
}

#[test]
fn a_rollouts_expression_reads_its_own_template() {
    let text = expression(Kind::MonoVertexRollout).expect("an expression");
    assert!(
        text.contains("has(object.spec.monoVertex.metadata.labels)"),
        "{text}"
    );
    assert!(!text.contains("interStepBufferService"), "{text}");
}
