//! Following a workflow run from `accepted` to a terminal state.

use std::time::Duration;

use http::Method;
use serde::Deserialize;
use tokio::time::Instant;

use crate::core::attempt::Attempt;
use crate::core::budget::Budget;
use crate::core::error::{Error, ErrorKind, Result};
use crate::core::runtime;
use crate::core::shared::Shared;
use crate::vendors::hodoflow::call::{Call, Operation};
use crate::vendors::hodoflow::tables::WORKFLOW_RUNS;

/// The state of a workflow run.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunState {
    /// Committed and enqueued.
    Queued,
    /// Running.
    Running,
    /// Finished successfully (terminal).
    Succeeded,
    /// Finished with a failure (terminal).
    Failed,
    /// Cancelled (terminal).
    Cancelled,
}

impl RunState {
    /// The state's name on the wire, such as `"succeeded"`.
    pub const fn as_str(&self) -> &'static str {
        match self {
            RunState::Queued => "queued",
            RunState::Running => "running",
            RunState::Succeeded => "succeeded",
            RunState::Failed => "failed",
            RunState::Cancelled => "cancelled",
        }
    }

    /// Whether the run has ended.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            RunState::Succeeded | RunState::Failed | RunState::Cancelled
        )
    }
}

/// A workflow run as `GET /api/json/v1/workflow_runs/<id>` shows it.
#[derive(Debug, Clone)]
pub struct WorkflowRun {
    id: String,
    state: RunState,
    polls: u32,
    attempts: Vec<Attempt>,
}

impl WorkflowRun {
    /// The run ID.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The state at the last poll.
    pub fn state(&self) -> &RunState {
        &self.state
    }

    /// How many polls it took.
    pub fn polls(&self) -> u32 {
        self.polls
    }

    /// The attempts of the last poll.
    pub fn attempts(&self) -> &[Attempt] {
        &self.attempts
    }
}

#[derive(Deserialize)]
struct Document {
    data: Data,
}

#[derive(Deserialize)]
struct Data {
    attributes: Attributes,
}

#[derive(Deserialize)]
struct Attributes {
    state: RunState,
}

/// Polls a run, sent with [`send`](FollowRun::send).
#[derive(Debug)]
#[must_use = "following does nothing until it is sent"]
pub struct FollowRun<'a> {
    shared: &'a Shared,
    run_id: String,
    interval: Duration,
    max_elapsed: Duration,
}

impl<'a> FollowRun<'a> {
    pub(crate) fn new(shared: &'a Shared, interval: Duration, run_id: &str) -> Self {
        Self {
            shared,
            run_id: run_id.to_owned(),
            interval,
            max_elapsed: shared.policy.budget.max_elapsed,
        }
    }

    /// Time between polls.
    ///
    /// Default: the client's poll interval (1 s).
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// How long to follow before giving up with `budget_exhausted`.
    ///
    /// Default: the client budget's elapsed time (60 s).
    pub fn max_elapsed(mut self, max_elapsed: Duration) -> Self {
        self.max_elapsed = max_elapsed;
        self
    }

    /// Polls until the run reaches a terminal state. Each poll is a read retried within
    /// what remains of the budget (and the client's attempt budget); a `budget_exhausted`
    /// error carries the attempts of the last poll.
    ///
    /// # Errors
    ///
    /// `invalid_input` for a malformed run ID, `budget_exhausted` when the run is still going
    /// when the time is up, or the error of a poll that failed for good.
    pub async fn send(self) -> Result<WorkflowRun> {
        let id_ok = !self.run_id.is_empty()
            && self.run_id.len() <= 255
            && self
                .run_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !id_ok {
            return Err(Error::invalid_input(
                "a run ID is 1 to 255 letters, digits, '-' or '_'",
            ));
        }
        if self.interval.is_zero() || self.max_elapsed.is_zero() {
            return Err(Error::invalid_input(
                "the poll interval and the budget must be positive",
            ));
        }
        let path = format!("{WORKFLOW_RUNS}{}", self.run_id);
        // `None`: a budget past any instant never ends.
        let end = runtime::now().checked_add(self.max_elapsed);
        let remaining = |end: Option<Instant>| {
            end.map_or(Duration::MAX, |end| {
                end.saturating_duration_since(runtime::now())
            })
        };
        let client_budget = self.shared.policy.budget;
        let mut polls = 0;
        loop {
            let left = remaining(end);
            if left.is_zero() {
                let message = format!("follow budget ended after {polls} polls");
                return Err(Error::new(ErrorKind::BudgetExhausted, message));
            }
            // One poll is one call: at most a call's longest budget, however long the follow.
            let budget = Budget {
                max_elapsed: left.min(Budget::MAX),
                ..client_budget
            };
            let poll = Operation::Read {
                method: Method::GET,
                path: path.clone(),
            };
            let response = Call::new(self.shared, poll).budget(budget).send().await?;
            polls += 1;
            let document: Document = response.json()?;
            let state = document.data.attributes.state;
            if state.is_terminal() {
                let attempts = response.attempts().to_vec();
                return Ok(WorkflowRun {
                    id: self.run_id,
                    state,
                    polls,
                    attempts,
                });
            }
            if self.interval >= remaining(end) {
                let message =
                    format!("run still {state:?} when the follow budget ended after {polls} polls");
                let error = Error::new(ErrorKind::BudgetExhausted, message.to_lowercase());
                return Err(error.with_attempts(response.attempts().to_vec()));
            }
            runtime::sleep(self.interval).await;
        }
    }
}
