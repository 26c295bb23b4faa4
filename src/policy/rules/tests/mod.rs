//! Table-driven tests of the pure admission rules: rules 1 to 12 of
//! `/validate`, `/mutate`, and the force lifecycle, one file per topic.
//! The documents and users come from the `test-builders` crate, which the
//! end-to-end tables share; every case has a name, and a failing table
//! lists each failing case by name with what differed ([`runner`]).

mod fixtures;
mod runner;
mod validate_case;

mod bookkeeping_and_templates;
mod child_edits;
mod controller_definitions;
mod controller_version;
mod defaulting;
mod deletes;
mod deletion_timeouts;
mod force;
mod force_promote;
mod force_promote_record;
mod force_promote_reset;
mod lifecycle;
mod made_objects;
mod messages;
mod namespace_strategy;
mod numaplane_keys;
mod ratcheting;
mod timeouts;
mod warnings;
