//! AdmissionReview bodies for the admission path: the captured fixtures
//! mutated in their parsed form and in their text, raw JSON that a
//! `serde_json::Value` cannot hold, and the nastiest bodies of all. The
//! property tests (tests/https/admission_properties.rs) and the HTTPS test of
//! malformed bodies (tests/https/bodies.rs) share them; each test file that
//! declares this module also declares `https_support`.
// Not every item is used by every test file.
#![allow(dead_code)]

pub mod build;
pub mod nasty;
pub mod strategy;
