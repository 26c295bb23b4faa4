//! Tests that hold the documentation to the code: the project layout of
//! docs/development.md (`docs_map`) and the rule table of docs/rules.md
//! (`rules_doc`): one test binary.

mod docs_map;
mod rules_doc;
