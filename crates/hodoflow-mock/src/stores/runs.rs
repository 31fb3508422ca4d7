//! Workflow runs: started by an accepted delivery (`webhook.rs`), read by
//! `GET /api/json/v1/workflow_runs/<id>` (`runs.rs`).

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, SystemTime};

use crate::config::RunOutcome;

/// A run as the delivery that started it left it; its state follows from its age.
#[derive(Debug, Clone)]
pub(crate) struct Run {
    pub organization: String,
    pub created_at: SystemTime,
    pub outcome: RunOutcome,
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

    /// The run `id`, unless it was forgotten.
    pub(crate) fn get(&self, id: &str) -> Option<&Run> {
        self.runs.get(id)
    }
}
