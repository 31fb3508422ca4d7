//! How many deliveries a route accepts per window, and where that figure came from: the values
//! the limiter paces by, the `RateLimit-Policy` parser learns, and the stats report. Apart from
//! the limiter (`window.rs`), so the parser and the stats need not import it.

use std::time::Duration;

use tokio::sync::Semaphore;

use crate::core::error::{Error, Result};

/// How many deliveries one route accepts per window.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use hodoflow_retry::limit::RouteLimit;
///
/// let tighter = RouteLimit::new(20, Duration::from_secs(60))?;
/// # let _ = tighter;
/// # Ok::<(), hodoflow_retry::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RouteLimit {
    requests: u32,
    per: Duration,
}

impl RouteLimit {
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
                "a route limit needs at least one request per positive window",
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

/// Where the limit a route is paced at came from (see [`RoutePacing`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PacingSource {
    /// The caller set it, on a vendor's client or an outbox's workers. It wins over the
    /// server's figures.
    Caller,
    /// The server's own figures: the `q` and `w` of the `RateLimit-Policy` the vendor names
    /// for its routes.
    Server,
    /// The vendor's documented default: the server has not stated its figures (yet).
    Documented,
}

/// The limit a route is paced at, and where it came from.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use hodoflow_retry::limit::{PacingSource, RouteLimit, RoutePacing};
///
/// let documented = RouteLimit::new(100, Duration::from_secs(60))?;
/// let pacing = RoutePacing::new(documented, PacingSource::Documented);
/// assert_eq!(pacing.limit.requests(), 100);
/// # Ok::<(), hodoflow_retry::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct RoutePacing {
    /// The requests per window.
    pub limit: RouteLimit,
    /// Where it came from.
    pub source: PacingSource,
}

impl RoutePacing {
    /// `limit`, from `source`.
    pub const fn new(limit: RouteLimit, source: PacingSource) -> Self {
        Self { limit, source }
    }
}
