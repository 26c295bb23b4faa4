//! What the bench binaries share: the reference servers' routers
//! ([`reference`]) and the bare transport floor ([`floor`]), served by `reference_server` for the load benchmark and
//! counted by `counted` as the transport floor.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod floor;
pub mod reference;
