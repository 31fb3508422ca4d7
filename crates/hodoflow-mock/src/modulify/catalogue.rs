//! The method catalogue of `GET /v1/tools`: which methods only read, which set a value, which
//! add something each time.
//!
//! A retry client decides from these three facts whether a call needs a key, so the catalogue
//! is data the server serves and the handlers obey: a method the catalogue marks read-only is
//! never recorded as an execution. A hint a seed never set is left out of the JSON, so a client
//! meets the Model Context Protocol's defaults (readOnlyHint false, destructiveHint true,
//! idempotentHint false) as it would on a real server.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// A method of the Modulify catalogue and its annotations.
///
/// The reference methods are always served; a seed adds a method that behaves generically (a
/// read-only one answers without recording an execution, any other records one execution a
/// run), or replaces the catalogue entry of a reference method with the same name (its hints,
/// not its behaviour).
///
/// # Examples
///
/// ```
/// use hodoflow_mock::{MockServer, ToolSeed};
///
/// // Only `idempotentHint` is in the catalogue; the other two are absent.
/// let builder = MockServer::builder().modulify_tool(ToolSeed::new("publish_site").idempotent(true));
/// # let _ = builder;
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolSeed {
    /// The method name, as in `POST /v1/<name>`.
    pub name: String,
    /// What it does, for people.
    #[serde(default)]
    pub description: String,
    /// `readOnlyHint`; `None`: absent from the catalogue.
    #[serde(default)]
    pub read_only: Option<bool>,
    /// `destructiveHint`; `None`: absent from the catalogue.
    #[serde(default)]
    pub destructive: Option<bool>,
    /// `idempotentHint`; `None`: absent from the catalogue.
    #[serde(default)]
    pub idempotent: Option<bool>,
}

impl ToolSeed {
    /// A method with no description and no hint.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            description: String::new(),
            read_only: None,
            destructive: None,
            idempotent: None,
        }
    }

    /// Sets the description.
    #[must_use]
    pub fn description(mut self, text: &str) -> Self {
        text.clone_into(&mut self.description);
        self
    }

    /// Sets `readOnlyHint`.
    #[must_use]
    pub fn read_only(mut self, hint: bool) -> Self {
        self.read_only = Some(hint);
        self
    }

    /// Sets `destructiveHint`.
    #[must_use]
    pub fn destructive(mut self, hint: bool) -> Self {
        self.destructive = Some(hint);
        self
    }

    /// Sets `idempotentHint`.
    #[must_use]
    pub fn idempotent(mut self, hint: bool) -> Self {
        self.idempotent = Some(hint);
        self
    }

    /// Whether a run only reads (an absent hint is false, as in the Model Context Protocol).
    pub(crate) fn only_reads(&self) -> bool {
        self.read_only.unwrap_or(false)
    }

    /// The catalogue entry: only the hints that were set.
    fn to_json(&self) -> Value {
        let mut annotations = Map::new();
        let hints = [
            ("readOnlyHint", self.read_only),
            ("destructiveHint", self.destructive),
            ("idempotentHint", self.idempotent),
        ];
        for (name, hint) in hints {
            if let Some(hint) = hint {
                annotations.insert(name.to_owned(), Value::Bool(hint));
            }
        }
        json!({"name": self.name, "description": self.description, "annotations": annotations})
    }
}

/// The reference methods of `docs/wire-contract.md`, "The catalogue": (name, read only,
/// destructive, idempotent, description).
const REFERENCE: [(&str, bool, bool, bool, &str); 10] = [
    ("get_site", true, false, true, "Read one site."),
    ("list_sites", true, false, true, "List every site."),
    ("rename_site", false, false, true, "Set the name of a site."),
    (
        "set_job_enabled",
        false,
        false,
        true,
        "Turn a scheduled job on or off.",
    ),
    ("create_site", false, false, false, "Create a new site."),
    (
        "duplicate_site",
        false,
        false,
        false,
        "Copy a site into a new one.",
    ),
    (
        "send_message",
        false,
        false,
        false,
        "Send a prompt to a site's assistant.",
    ),
    (
        "send_site_email",
        false,
        false,
        false,
        "Send an email from a site.",
    ),
    (
        "create_backup",
        false,
        false,
        false,
        "Take a new backup of a site.",
    ),
    ("delete_site", false, true, true, "Delete a site."),
];

/// The methods served: the reference ones, then the seeds (a seed with a reference name
/// takes that entry's place).
#[derive(Debug, Clone)]
pub(crate) struct Catalogue {
    tools: Vec<ToolSeed>,
}

impl Catalogue {
    pub(crate) fn new(seeds: Vec<ToolSeed>) -> Self {
        let mut tools: Vec<ToolSeed> = REFERENCE
            .iter()
            .map(|&(name, read_only, destructive, idempotent, description)| {
                ToolSeed::new(name)
                    .description(description)
                    .read_only(read_only)
                    .destructive(destructive)
                    .idempotent(idempotent)
            })
            .collect();
        for seed in seeds {
            match tools.iter_mut().find(|t| t.name == seed.name) {
                Some(entry) => *entry = seed,
                None => tools.push(seed),
            }
        }
        Self { tools }
    }

    pub(crate) fn get(&self, name: &str) -> Option<&ToolSeed> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// `{"tools": [...]}`.
    pub(crate) fn to_json(&self) -> Value {
        let tools: Vec<Value> = self.tools.iter().map(ToolSeed::to_json).collect();
        json!({ "tools": tools })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_with_a_reference_name_replaces_its_entry_and_others_are_appended() {
        let catalogue = Catalogue::new(vec![
            ToolSeed::new("send_message").read_only(true),
            ToolSeed::new("publish_site"),
        ]);
        let listed = catalogue.to_json();
        let tools = listed["tools"].as_array().unwrap();
        assert_eq!(tools.len(), REFERENCE.len() + 1);
        assert_eq!(tools[6]["name"], "send_message");
        assert_eq!(tools[6]["annotations"], json!({"readOnlyHint": true}));
        assert_eq!(tools[REFERENCE.len()]["annotations"], json!({}));
        assert!(catalogue.get("send_message").unwrap().only_reads());
        assert!(!catalogue.get("publish_site").unwrap().only_reads());
    }
}
