//! `GET /api/json/v1/workflow_runs/<id>`: a workflow run that an accepted delivery created
//! (kept in `stores/runs.rs`).
//!
//! A run's state is computed from its age, so it moves queued -> running ->
//! its outcome on whatever clock the server was given.

use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::config::Scope;
use crate::reply::{api_document, api_error, rfc3339};
use crate::state::RunsState;

/// `GET /api/json/v1/workflow_runs/<id>`.
pub(crate) async fn show(
    State(shared): State<RunsState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    // A JSON:API read: it counts against the credential's rate budget too.
    let principal = match shared.gate.api(&headers, Scope::ApiRead) {
        Ok(p) => p,
        Err(refused) => return refused.into_response(),
    };
    let run = crate::lock(&shared.runs).get(&id).cloned();
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
