//! What `cargo xtask generate` renders that the tests also read: the CEL
//! `matchConditions` of the webhook configurations ([`conditions`]).

pub mod conditions;
