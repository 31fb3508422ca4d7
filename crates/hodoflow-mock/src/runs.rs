//! Workflow runs: created by an accepted delivery, read at
//! `GET /api/json/v1/workflow_runs/<id>`.
//!
//! A run's state is computed from its age, so it moves queued -> running ->
//! its outcome on whatever clock the server was given.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::config::{RunOutcome, Scope};
use crate::reply::{api_document, api_error, rfc3339};
use crate::state::Shared;

#[derive(Debug, Clone)]
struct Run {
    organization: String,
    created_at: SystemTime,
    outcome: RunOutcome,
}

/// Every run, forgotten after the delivery retention.
#[derive(Debug, Default)]
pub(crate) struct Runs {
    runs: HashMap<String, Run>,
    /// (created at, run ID), in time order.
    created: VecDeque<(SystemTime, String)>,
}

impl Runs {
    /// Creates a run and returns its ID.
    pub(crate) fn create(
        &mut self,
        organization: &str,
        outcome: RunOutcome,
        now: SystemTime,
        retention: Duration,
    ) -> String {
        while let Some((at, _)) = self.created.front() {
            if *at + retention > now {
                break;
            }
            if let Some((_, id)) = self.created.pop_front() {
                self.runs.remove(&id);
            }
        }
        let id = uuid::Uuid::new_v4().to_string();
        self.runs.insert(
            id.clone(),
            Run {
                organization: organization.to_owned(),
                created_at: now,
                outcome,
            },
        );
        self.created.push_back((now, id.clone()));
        id
    }
}

/// `GET /api/json/v1/workflow_runs/<id>`.
pub(crate) async fn show(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    // A JSON:API read: it counts against the credential's rate budget too.
    let principal = match crate::jsonapi::api_gate(&shared, &headers, Scope::ApiRead) {
        Ok(p) => p,
        Err(refused) => return refused.into_response(),
    };
    let run = crate::lock(&shared.runs).runs.get(&id).cloned();
    let Some(run) = run.filter(|r| r.organization == principal.organization) else {
        return api_error(StatusCode::NOT_FOUND, "not_found", "Workflow run not found");
    };
    let limits = &shared.limits;
    let age = shared
        .clock
        .now()
        .duration_since(run.created_at)
        .unwrap_or_default();
    let (state, changed_after) = if age < limits.run_queued_for {
        ("queued", Duration::ZERO)
    } else if age < limits.run_queued_for + limits.run_running_for {
        ("running", limits.run_queued_for)
    } else {
        (
            run.outcome.as_str(),
            limits.run_queued_for + limits.run_running_for,
        )
    };
    let body = json!({"data": {
        "type": "workflow_runs",
        "id": id,
        "attributes": {
            "state": state,
            "created_at": rfc3339(run.created_at),
            "updated_at": rfc3339(run.created_at + changed_after),
        }
    }});
    api_document(StatusCode::OK, &body)
}
