//! How big a run is: read by every scenario and by the dispatch in `scenario.rs`.

use std::time::Duration;

use hodoflow_retry::Budget;

/// The time budget of one call in a smoke run, where a call can be held (see
/// [`Size::call_budget`]).
const SMOKE_MAX_ELAPSED: Duration = Duration::from_secs(2);
/// The timeout of one attempt in a smoke run.
const SMOKE_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(1);

/// How big a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Size {
    /// The sizes the targets are stated for.
    Full,
    /// A tiny run that walks every code path in a second or two; its figures mean nothing.
    Smoke,
}

impl Size {
    /// `full` at [`Size::Full`], `smoke` otherwise.
    pub(crate) fn pick<T>(self, full: T, smoke: T) -> T {
        match self {
            Size::Full => full,
            Size::Smoke => smoke,
        }
    }

    /// The call budget of the SDK's clients (and of its retry middleware, with its attempts
    /// set apart) in the scenarios whose server is down: the SDK's default at full size, which
    /// is what those scenarios measure. A call against a server that is down is held by the
    /// retry budget for most of its 60 s, whatever the run's size, so at smoke size a short
    /// budget ends it within seconds: the same code paths are walked, and smoke figures mean
    /// nothing anyway.
    pub(crate) fn call_budget(self) -> Budget {
        match self {
            Size::Full => Budget::new(),
            Size::Smoke => Budget::new()
                .max_elapsed(SMOKE_MAX_ELAPSED)
                .attempt_timeout(SMOKE_ATTEMPT_TIMEOUT),
        }
    }

    /// How a report states [`Size::call_budget`] where it is not the SDK's default: `None` at
    /// full size, whose calls have the default budget the report's other parameters imply.
    pub(crate) fn call_budget_change(self) -> Option<String> {
        match self {
            Size::Full => None,
            Size::Smoke => Some(format!(
                "max_elapsed {} s, attempt_timeout {} s at smoke size (a full run: the defaults, {} s and {} s)",
                SMOKE_MAX_ELAPSED.as_secs_f64(),
                SMOKE_ATTEMPT_TIMEOUT.as_secs_f64(),
                Budget::DEFAULT_MAX_ELAPSED.as_secs_f64(),
                Budget::DEFAULT_ATTEMPT_TIMEOUT.as_secs_f64(),
            )),
        }
    }
}
