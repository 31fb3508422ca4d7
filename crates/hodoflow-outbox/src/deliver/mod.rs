//! The built-in [`Deliver`](super::Deliver)s: Hodoflow's webhook deliveries and JSON:API writes
//! (a [`HodoflowClient`](hodoflow_retry::HodoflowClient)), Modulify's method calls (a
//! [`ModulifyClient`](hodoflow_retry::ModulifyClient)), and a vendor of your own described by a
//! [`Profile`](hodoflow_retry::Profile), each written with the SDK's public API only, as yours would be.

mod hodoflow;
mod modulify;
pub(crate) mod profile;
