//! Request bodies the benches share: real fixtures, and fixture 07 grown to
//! large objects (the same recipe as `bench/load.sh`'s generator).
#![allow(dead_code)]

use std::path::Path;

use serde_json::Value;

pub const FIXTURES: &str = "tests/fixtures/admission";
pub const MAIN: &str = "07-allow-data-loss-true-kubectl-annotate-alice-validate.json";

pub fn fixture(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(FIXTURES)
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Fixture 07 with `spec.pipeline.spec.vertices` of both the object and the
/// old object grown (copies of its `cat` vertex under new names) until each
/// object serialises to at least `object_bytes`. The same recipe as
/// `bench/load.sh`'s generator.
pub fn grown(object_bytes: usize) -> Vec<u8> {
    let mut review: Value = serde_json::from_slice(&fixture(MAIN)).expect("fixture 07 is JSON");
    for key in ["object", "oldObject"] {
        let object = &mut review["request"][key];
        let vertices = object
            .pointer_mut("/spec/pipeline/spec/vertices")
            .and_then(Value::as_array_mut)
            .expect("fixture 07 has vertices");
        let template = vertices
            .iter()
            .find(|v| v["name"] == "cat")
            .cloned()
            .expect("fixture 07 has a cat vertex");
        let one = serde_json::to_vec(&template).expect("serialisable").len() + 1;
        let size = serde_json::to_vec(&*object).expect("serialisable").len();
        let needed = object_bytes.saturating_sub(size).div_ceil(one);
        let vertices = object
            .pointer_mut("/spec/pipeline/spec/vertices")
            .and_then(Value::as_array_mut)
            .expect("still there");
        for i in 0..needed {
            let mut vertex = template.clone();
            vertex["name"] = Value::from(format!("cat-{i:05}"));
            vertices.push(vertex);
        }
    }
    serde_json::to_vec(&review).expect("serialisable")
}
