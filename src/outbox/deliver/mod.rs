//! The built-in [`Deliver`](super::Deliver)s: Hodoflow's webhook deliveries and JSON:API writes
//! (a [`HodoflowClient`](crate::HodoflowClient)), Modulify's method calls (a
//! [`ModulifyClient`](crate::ModulifyClient)), and a vendor of your own described by a
//! [`Profile`](crate::Profile), each written with the SDK's public API only, as yours would be.

mod hodoflow;
mod modulify;
pub(crate) mod profile;
