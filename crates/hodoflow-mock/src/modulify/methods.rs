//! The reference methods and the workspace they change: sites, jobs, messages, emails and
//! backups.
//!
//! The effects are real so a test can tell a replay from a second run by reading the state
//! (two `create_site` runs leave two sites; a replay leaves one), not only by the ledger.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

/// Everything the methods change, shared by every token.
#[derive(Debug, Default)]
pub(crate) struct Workspace {
    /// Site ID -> name.
    sites: BTreeMap<String, String>,
    /// Job ID -> enabled.
    jobs: BTreeMap<String, bool>,
    /// (message ID, project ID) of each message sent.
    messages: Vec<(String, String)>,
    /// (email ID, project ID) of each site email sent.
    emails: Vec<(String, Option<String>)>,
    /// (backup ID, project ID) of each backup taken.
    backups: Vec<(String, Option<String>)>,
}

/// Why a run did not succeed; each answer releases the key.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// 422 `validation_failed`.
    Invalid(String),
    /// 404 `not_found`: the object named does not exist.
    Missing(String),
}

type Outcome = Result<Value, Failure>;

fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::new_v4().simple())
}

/// A string parameter; `non_empty` refuses `""`.
fn string<'a>(
    params: &'a Map<String, Value>,
    name: &str,
    non_empty: bool,
) -> Result<&'a str, Failure> {
    match params.get(name).and_then(Value::as_str) {
        Some(text) if !(non_empty && text.is_empty()) => Ok(text),
        _ => {
            let kind = if non_empty {
                "a non-empty string"
            } else {
                "a string"
            };
            Err(Failure::Invalid(format!("{name} must be {kind}")))
        }
    }
}

/// An optional string parameter.
fn optional_string(params: &Map<String, Value>, name: &str) -> Result<Option<String>, Failure> {
    match params.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(Failure::Invalid(format!("{name} must be a string"))),
    }
}

impl Workspace {
    fn site(&self, id: &str) -> Value {
        let count = |list: &[(String, Option<String>)]| {
            list.iter()
                .filter(|(_, p)| p.as_deref() == Some(id))
                .count()
        };
        json!({
            "id": id,
            "name": self.sites.get(id),
            "messages": self.messages.iter().filter(|(_, p)| p == id).count(),
            "emails": count(&self.emails),
            "backups": count(&self.backups),
        })
    }

    /// The site named by `projectId`, which must exist.
    fn existing<'a>(&self, params: &'a Map<String, Value>) -> Result<&'a str, Failure> {
        let id = string(params, "projectId", true)?;
        if self.sites.contains_key(id) {
            Ok(id)
        } else {
            Err(Failure::Missing(format!("no site {id}")))
        }
    }

    /// Runs the reference method `method`: its answer's `data`. `None`: not a reference method.
    pub(crate) fn run(&mut self, method: &str, params: &Map<String, Value>) -> Option<Outcome> {
        let outcome = match method {
            "get_site" => self
                .existing(params)
                .map(|id| json!({"site": self.site(id)})),
            "list_sites" => {
                let sites: Vec<Value> = self.sites.keys().map(|id| self.site(id)).collect();
                Ok(json!({ "sites": sites }))
            }
            "rename_site" => self.rename(params),
            "set_job_enabled" => self.set_job(params),
            "create_site" => string(params, "name", true).map(|name| {
                let id = new_id("site");
                self.sites.insert(id.clone(), name.to_owned());
                json!({"site": self.site(&id)})
            }),
            "duplicate_site" => self.duplicate(params),
            "send_message" => self.send_message(params),
            "send_site_email" => optional_string(params, "projectId").map(|project| {
                let id = new_id("email");
                self.emails.push((id.clone(), project.clone()));
                json!({"email": {"id": id, "projectId": project}})
            }),
            "create_backup" => optional_string(params, "projectId").map(|project| {
                let id = new_id("backup");
                self.backups.push((id.clone(), project.clone()));
                json!({"backup": {"id": id, "projectId": project}})
            }),
            "delete_site" => self.existing(params).map(|id| {
                let id = id.to_owned();
                self.sites.remove(&id);
                json!({"deleted": id})
            }),
            _ => return None,
        };
        Some(outcome)
    }

    fn rename(&mut self, params: &Map<String, Value>) -> Outcome {
        let id = self.existing(params)?.to_owned();
        let name = string(params, "name", true)?;
        self.sites.insert(id.clone(), name.to_owned());
        Ok(json!({"site": self.site(&id)}))
    }

    fn set_job(&mut self, params: &Map<String, Value>) -> Outcome {
        let id = string(params, "jobId", true)?;
        let Some(enabled) = params.get("enabled").and_then(Value::as_bool) else {
            return Err(Failure::Invalid("enabled must be true or false".to_owned()));
        };
        self.jobs.insert(id.to_owned(), enabled);
        Ok(json!({"job": {"id": id, "enabled": enabled}}))
    }

    fn duplicate(&mut self, params: &Map<String, Value>) -> Outcome {
        let from = self.existing(params)?;
        let name = match optional_string(params, "name")? {
            Some(name) if !name.is_empty() => name,
            _ => format!("{} (copy)", self.sites[from]),
        };
        let id = new_id("site");
        self.sites.insert(id.clone(), name);
        Ok(json!({"site": self.site(&id), "from": from}))
    }

    fn send_message(&mut self, params: &Map<String, Value>) -> Outcome {
        let project = string(params, "projectId", false)?;
        let prompt = string(params, "prompt", false)?;
        let id = new_id("msg");
        self.messages.push((id.clone(), project.to_owned()));
        Ok(json!({"message": {"id": id, "projectId": project, "prompt": prompt}}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn sites_are_created_renamed_duplicated_counted_and_deleted() {
        let mut workspace = Workspace::default();
        let created = workspace
            .run("create_site", &params(json!({"name": "a"})))
            .unwrap()
            .unwrap();
        let id = created["site"]["id"].as_str().unwrap().to_owned();
        let site = || params(json!({"projectId": id}));
        let renamed = params(json!({"projectId": id, "name": "b"}));
        workspace.run("rename_site", &renamed).unwrap().unwrap();
        let message = params(json!({"projectId": id, "prompt": "hi"}));
        workspace.run("send_message", &message).unwrap().unwrap();
        workspace.run("create_backup", &site()).unwrap().unwrap();
        let copy = workspace.run("duplicate_site", &site()).unwrap().unwrap();
        assert_eq!(copy["site"]["name"], "b (copy)");
        let read = workspace.run("get_site", &site()).unwrap().unwrap();
        assert_eq!(
            read["site"],
            json!({"id": id, "name": "b", "messages": 1, "emails": 0, "backups": 1})
        );
        workspace.run("delete_site", &site()).unwrap().unwrap();
        assert!(matches!(
            workspace.run("get_site", &site()),
            Some(Err(Failure::Missing(_)))
        ));
        assert_eq!(workspace.sites.len(), 1, "the copy is left");
    }

    #[test]
    fn refuses_missing_parameters_and_knows_only_its_methods() {
        let mut workspace = Workspace::default();
        let empty = Map::new();
        for method in [
            "create_site",
            "send_message",
            "rename_site",
            "set_job_enabled",
        ] {
            assert!(
                matches!(
                    workspace.run(method, &empty),
                    Some(Err(Failure::Invalid(_)))
                ),
                "{method}"
            );
        }
        assert_eq!(workspace.run("publish_site", &empty), None);
    }
}
