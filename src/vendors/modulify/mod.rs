//! Modulify (`docs/wire-contract.md`, "Modulify"): its table and the catalogue of methods, and its
//! client.

pub(crate) mod builder;
pub(crate) mod client;
pub(crate) mod requests;
pub(crate) mod tables;
