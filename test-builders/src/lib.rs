//! What the webhook's tests build, as plain `serde_json::Value` documents:
//! PipelineRollouts ([`rollout`]), their statuses ([`status`]) and the
//! users who write them ([`users`]).
//!
//! The unit tables in `src/policy/rules/tests/` and the end-to-end tables
//! in `tests/apiserver/apiserver_vap_support/` build their requests here, so both
//! judge the same documents. This crate does not depend on the webhook: it spells
//! the field paths out itself, and each side turns the documents into its
//! own types.

#![forbid(unsafe_code)]

pub mod rollout;
pub mod status;
pub mod users;

pub use rollout::{PipelineRolloutDoc, pipeline_rollout, set_field};
