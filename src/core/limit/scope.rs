//! Whom a limit holds: the scopes of the limiter model, and what a server's answer says of them.
//!
//! A client sends for one credential at one base URL (its endpoint). Within it, a limit holds
//! one of these [`Scope`]s, and a server's signal closes exactly the scope it belongs to, never
//! more:
//!
//! | scope | what it holds | closed by (the vendor's profile says which signal) |
//! |---|---|---|
//! | [`Scope::Credential`] | every call of the credential that sits in its rate budget | a 429 the vendor documents as credential-wide; an exhausted `RateLimit` policy that is not a route's |
//! | [`Scope::Route`] | the calls to one route with a window of its own (a webhook route) | that route's 429; its `RateLimit` policy with nothing remaining |
//! | a service ([`ServiceKey`]) | one service behind the endpoint (webhook ingestion, the JSON:API): the retry budget's down-detection | the ratio of its own answers, by time |
//! | [`Scope::Call`] | this call alone | a 503's `Retry-After`, a 409 in progress: the call waits, nothing is shared |
//!
//! A surface's attempts sit in one shared scope (a webhook delivery in its route's route, a
//! JSON:API call in the credential) and one service; [`signal`] reads an answer against the
//! surface's [`Scopes`] (the vendor's data) and says which scope it closes, for how long and why.
//! Across processes the outbox's store holds the same scopes under the same names (`shared.rs`).

use std::collections::hash_map::DefaultHasher;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::time::Duration;

use http::StatusCode;

use crate::core::answer::{Answer, Fields};
use crate::core::rate_limit_field::{self, PolicyMemo, RouteWindow};

/// A route with a window of its own, by the vendor's noun for it and a hash of its key: the
/// key itself (often a secret, as a URL token is) is never kept.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct RouteKey {
    hash: u64,
    /// What the vendor calls such a route, for people: the scope's label says it.
    noun: &'static str,
}

impl RouteKey {
    /// The key of the route `noun` named by `key`.
    pub(crate) fn named(noun: &'static str, key: &str) -> Self {
        let mut hasher = DefaultHasher::new();
        key.hash(&mut hasher);
        Self {
            hash: hasher.finish(),
            noun,
        }
    }

    /// A route the tests name by `key` alone.
    #[cfg(test)]
    pub(crate) fn of(key: &str) -> Self {
        Self::named("route", key)
    }

    /// A short name to show: eight hex digits of the hash, never the key.
    pub(crate) fn short(self) -> String {
        format!("{:08x}", self.hash >> 32)
    }
}

impl fmt::Debug for RouteKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RouteKey({} {})", self.noun, self.short())
    }
}

/// One service behind an endpoint, whose health the retry budget tells from its own answers:
/// the endpoint (a hash of the client's base URL and credential) and the service's name in the
/// vendor's profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ServiceKey {
    pub(crate) endpoint: u64,
    pub(crate) name: &'static str,
}

/// Whom a limit holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Scope {
    /// Every call of the client's credential that sits in its rate budget.
    Credential,
    /// The calls to one route with a window of its own.
    Route(RouteKey),
    /// One call alone.
    Call,
}

impl Scope {
    /// How the scope is named to a person: never a secret.
    pub(crate) fn label(self) -> String {
        match self {
            Scope::Credential => "the credential".to_owned(),
            Scope::Route(route) => format!("{} {}", route.noun, route.short()),
            Scope::Call => "this call".to_owned(),
        }
    }
}

/// Whom a server's signal holds, as a vendor's [`Profile`](crate::Profile) names it: the scope
/// a status closes ([`ProfileBuilder::closes`](crate::profile::ProfileBuilder::closes)) and the
/// one a profile's calls sit in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reach {
    /// The credential: every call of the client that sits in its rate budget waits.
    Credential,
    /// The request's route, where the vendor gives a route a window of its own (a Hodoflow
    /// webhook route); a request with no route of its own sits in the credential.
    Route,
    /// This call alone: it waits, nothing is shared.
    Call,
}

/// What a vendor's profile fixes of one surface's scopes: which scope its calls sit in, which
/// scope each signal closes, and which service its answers speak for.
#[derive(Debug)]
pub(crate) struct Scopes {
    /// The shared scope the surface's attempts sit in: its closures hold them.
    pub(crate) sits_in: Reach,
    /// Per status, the scope its `Retry-After` closes for that long (and a 429 without one
    /// slows, by the send-rate limiter). A status not listed closes nothing.
    pub(crate) closes: &'static [(u16, Reach)],
    /// The `RateLimit` policy that speaks for the route's window: its `q`/`w` pace the route,
    /// its `r=0` closes the route. Any other policy with nothing remaining closes the credential.
    pub(crate) route_policy: Option<&'static str>,
    /// The service whose health the surface's answers tell the retry budget.
    pub(crate) service: &'static str,
}

impl Scopes {
    /// The scope `reach` names for a request to `route`.
    pub(crate) fn scope(&self, reach: Reach, route: Option<RouteKey>) -> Scope {
        match (reach, route) {
            (Reach::Credential, _) => Scope::Credential,
            (Reach::Route, Some(route)) => Scope::Route(route),
            // A request with no route of its own sits in the credential.
            (Reach::Route, None) => Scope::Credential,
            (Reach::Call, _) => Scope::Call,
        }
    }

    /// The scope the attempts of a request to `route` sit in.
    pub(crate) fn sits_in(&self, route: Option<RouteKey>) -> Scope {
        self.scope(self.sits_in, route)
    }

    /// The scope a `status` closes for a request to `route`, if the profile names one.
    fn closed_by(&self, status: StatusCode, route: Option<RouteKey>) -> Option<Scope> {
        self.closes
            .iter()
            .find(|(listed, _)| *listed == status.as_u16())
            .map(|(_, reach)| self.scope(*reach, route))
    }
}

/// Why a scope was closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Why {
    /// An answer of this status with `Retry-After`.
    RetryAfter(u16),
    /// A `RateLimit` field with nothing remaining until its reset.
    Spent,
}

impl Why {
    /// The reason in a few words, for messages and the status page.
    pub(crate) fn describe(self) -> String {
        match self {
            Why::RetryAfter(status) => format!("the server's {status} with Retry-After"),
            Why::Spent => "a RateLimit field with nothing remaining".to_owned(),
        }
    }
}

/// A scope a server closed, as a client reports it
/// ([`RetryingClient::closed_scopes`](crate::RetryingClient::closed_scopes)).
///
/// # Examples
///
/// ```
/// use hodoflow_retry::HodoflowClient;
///
/// let client = HodoflowClient::builder("https://hodoflow.example")
///     .client_credentials("sender-1", "s3cr3t")
///     .build()?;
/// assert!(client.closed_scopes().is_empty(), "nothing closed yet");
/// # Ok::<(), hodoflow_retry::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClosedScope {
    /// Whom it holds: `the credential`, or `route 1a2b3c4d` (a hash of its token, never the
    /// token).
    pub scope: String,
    /// How long it stays closed from now.
    pub remaining: Duration,
    /// Why: `the server's 429 with Retry-After`, or `a RateLimit field with nothing remaining`.
    pub why: String,
}

/// A scope closed by an answer: for how long, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Closing {
    pub(crate) scope: Scope,
    pub(crate) pause: Duration,
    pub(crate) why: Why,
}

/// What one attempt's answer says of the scopes, for the limiters.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Signal<'a> {
    pub(crate) answer: &'a Answer,
    /// The shared scope the answer closes, if any (a `Call` scope is the call's own wait and
    /// is never shared).
    pub(crate) closes: Option<Closing>,
    /// A 429 without `Retry-After`: the scope whose send rate it slows.
    pub(crate) throttles: Option<Scope>,
    /// What the answer said of its route's window (its figures, a spent window).
    pub(crate) window: RouteWindow,
}

/// Reads `answer` (with its `retry_after`) for a request to `route` of a surface with
/// `scopes`: the scope it closes, the scope it throttles, what it says of the route's window
/// (its policy through the client's `memo`), from its header `fields`.
pub(crate) fn signal<'a>(
    scopes: &Scopes,
    route: Option<RouteKey>,
    answer: &'a Answer,
    fields: Option<&Fields<'_>>,
    retry_after: Option<Duration>,
    memo: &PolicyMemo,
) -> Signal<'a> {
    let mut signal = Signal {
        answer,
        closes: None,
        throttles: None,
        window: RouteWindow::default(),
    };
    let (Some(status), Some(fields)) = (answer.status(), fields) else {
        return signal;
    };
    let named = scopes.closed_by(status, route);
    let (window, credential_spent) =
        rate_limit_field::read_with(fields, scopes.route_policy, route.is_some(), Some(memo));
    signal.window = window;
    let route_spent = signal.window.spent_for.zip(route);
    signal.closes = match (named, retry_after) {
        // `Retry-After` wins over a `RateLimit` field.
        (Some(Scope::Call), Some(_)) | (None, Some(_)) => None,
        (Some(scope), Some(pause)) => Some(Closing {
            scope,
            pause,
            why: Why::RetryAfter(status.as_u16()),
        }),
        (_, None) => None,
    }
    .or_else(|| {
        let (scope, pause) = match (route_spent, credential_spent) {
            (Some((pause, route)), _) => (Scope::Route(route), pause),
            (None, Some(pause)) => (Scope::Credential, pause),
            (None, None) => return None,
        };
        Some(Closing {
            scope,
            pause,
            why: Why::Spent,
        })
    })
    .filter(|closing| !closing.pause.is_zero() && closing.scope != Scope::Call);
    if status == StatusCode::TOO_MANY_REQUESTS && retry_after.is_none() {
        signal.throttles = named
            .filter(|scope| *scope != Scope::Call)
            .or(Some(scopes.sits_in(route)));
    }
    signal
}
