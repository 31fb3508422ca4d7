//! The stores of the Hodoflow surfaces that more than one module reads: kept apart from the
//! handlers that fill and read them, so the server's state (`state.rs`) holds them without
//! importing a handler, and a handler takes them as its sub-state without importing another.

mod deliveries;
mod resources;
mod runs;

pub(crate) use deliveries::Deliveries;
pub(crate) use resources::Resources;
pub(crate) use runs::Runs;
