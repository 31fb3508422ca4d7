//! Modulify (`docs/wire-contract.md`, "Modulify"): its table and the catalogue of methods, and its
//! client.

pub(crate) mod builder;
pub(crate) mod client;
#[cfg(feature = "outbox")]
pub(crate) mod outbox;
pub(crate) mod requests;
pub(crate) mod tables;
