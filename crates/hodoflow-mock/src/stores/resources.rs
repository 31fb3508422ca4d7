//! The JSON:API resources: written and read by `jsonapi.rs`, read by GraphQL's `factQuery`.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// Resources by (organization, type, id) -> attributes.
pub(crate) type Resources = BTreeMap<(String, String, String), Map<String, Value>>;
