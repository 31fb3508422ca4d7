//! Fault injection and the ledger over HTTP, for rehearsals from any language.
//! Served only when enabled (`--control`), outside the fault and ledger middleware.

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRef, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};

use crate::fault::Fault;
use crate::state::ControlState;

pub(crate) fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    ControlState: FromRef<S>,
{
    Router::new()
        .route("/_mock/faults", post(add_fault).delete(clear_faults))
        .route("/_mock/ledger", get(ledger))
}

/// `POST /_mock/faults` with a [`Fault`] as JSON.
async fn add_fault(
    State(shared): State<ControlState>,
    fault: Result<Json<Fault>, JsonRejection>,
) -> Response {
    match fault {
        Ok(Json(fault)) => {
            crate::lock(&shared.faults).push(fault);
            StatusCode::NO_CONTENT.into_response()
        }
        Err(rejection) => (StatusCode::BAD_REQUEST, rejection.body_text()).into_response(),
    }
}

/// `DELETE /_mock/faults`.
async fn clear_faults(State(shared): State<ControlState>) -> StatusCode {
    crate::lock(&shared.faults).clear();
    StatusCode::NO_CONTENT
}

/// `GET /_mock/ledger`.
async fn ledger(State(shared): State<ControlState>) -> Response {
    let ledger = crate::lock(&shared.ledger).clone();
    Json(ledger).into_response()
}
