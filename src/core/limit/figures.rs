//! How many deliveries a trigger accepts per window, and where that figure came from: the values
//! the limiter paces by, the `RateLimit-Policy` parser learns, and the stats report. Apart from
//! the limiter (`window.rs`), so the parser and the stats need not import it.

use std::time::Duration;

use tokio::sync::Semaphore;

use crate::core::error::{Error, Result};

/// How many deliveries one trigger accepts per window.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use hodoflow_retry::limit::TriggerLimit;
///
/// assert_eq!(TriggerLimit::DOCUMENTED.requests(), 100);
/// let tighter = TriggerLimit::new(20, Duration::from_secs(60))?;
/// # let _ = tighter;
/// # Ok::<(), hodoflow_retry::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TriggerLimit {
    requests: u32,
    per: Duration,
}

impl TriggerLimit {
    /// `requests` per `per`, unchecked: for a vendor's documented constant, whose figures are
    /// positive (its own test checks them against [`new`](Self::new)).
    pub(crate) const fn from_parts(requests: u32, per: Duration) -> Self {
        Self { requests, per }
    }

    /// `requests` per window of `per`.
    ///
    /// # Errors
    ///
    /// `invalid_input` when `requests` or `per` is zero, or `requests` is above tokio's
    /// semaphore limit (about 2 billion).
    pub fn new(requests: u32, per: Duration) -> Result<Self> {
        if requests == 0 || per.is_zero() || requests as usize > Semaphore::MAX_PERMITS {
            return Err(Error::invalid_input(
                "a trigger limit needs at least one request per positive window",
            ));
        }
        Ok(Self { requests, per })
    }

    /// The requests allowed per window.
    pub fn requests(&self) -> u32 {
        self.requests
    }

    /// The window.
    pub fn per(&self) -> Duration {
        self.per
    }
}

/// Where the limit a trigger is paced at came from (see [`TriggerPacing`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PacingSource {
    /// The caller set it: [`HodoflowBuilder::trigger_limit`](crate::hodoflow::HodoflowBuilder::trigger_limit),
    /// [`trigger_limit_for`](crate::hodoflow::HodoflowBuilder::trigger_limit_for), or an outbox worker's
    /// `trigger_limit`. It wins over the server's figures.
    Caller,
    /// The server's own figures: its `RateLimit-Policy: "trigger";q=…;w=…` field.
    Server,
    /// The vendor's documented default, [`TriggerLimit::DOCUMENTED`]: the server has not stated
    /// its figures (yet).
    Documented,
}

/// The limit a trigger is paced at, and where it came from.
///
/// # Examples
///
/// ```
/// use hodoflow_retry::limit::{PacingSource, TriggerLimit, TriggerPacing};
///
/// let pacing = TriggerPacing::new(TriggerLimit::DOCUMENTED, PacingSource::Documented);
/// assert_eq!(pacing.limit.requests(), 100);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct TriggerPacing {
    /// The requests per window.
    pub limit: TriggerLimit,
    /// Where it came from.
    pub source: PacingSource,
}

impl TriggerPacing {
    /// `limit`, from `source`.
    pub const fn new(limit: TriggerLimit, source: PacingSource) -> Self {
        Self { limit, source }
    }
}
