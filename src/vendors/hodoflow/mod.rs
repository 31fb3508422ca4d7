//! Hodoflow (`docs/wire-contract.md`): its tables and routes, its request builders and client
//! methods, its OAuth scheme, and how its outcomes and replays are read.

pub(crate) mod builder;
pub(crate) mod call;
pub(crate) mod client;
pub(crate) mod limits;
pub(crate) mod oauth;
pub(crate) mod outcome;
pub(crate) mod requests;
pub(crate) mod routes;
pub(crate) mod run;
pub(crate) mod settings;
pub(crate) mod tables;
