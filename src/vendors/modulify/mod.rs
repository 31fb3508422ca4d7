//! Modulify (document 004): its table and the catalogue of methods, and its client.

pub(crate) mod client;
pub(crate) mod requests;
pub(crate) mod tables;
