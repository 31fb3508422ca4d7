//! What an outbox job addresses: one variant per kind of request a vendor takes, its checks
//! before anything is stored, and how it is stored and shown. The outbox stores and schedules
//! jobs of any target; which vendor's client delivers one is the vendor's [`Deliver`]
//! (`deliver/<vendor>.rs`).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use http::Method;

use hodoflow_retry::IdempotencyKey;
use hodoflow_retry::RetryingClient;
use hodoflow_retry::Secret;
use hodoflow_retry::limit::Fleet;
use hodoflow_retry::profile::{Profile, Request};
use hodoflow_retry::{Error, Result};
use hodoflow_retry::{HodoflowClient, ModulifyClient};

/// A webhook job's trigger: its reference, derived from its token and never the token, and
/// the token where this process knows it.
///
/// A job stores the reference only (`trigger:<UUID>`, the UUIDv5 of the token in the OID
/// namespace: the name the fleet's shared pauses and windows give the trigger too), so no
/// outbox database holds a trigger token. The workers that deliver the job resolve the token
/// from what their [`Outbox`](crate::Outbox) was told: each token it enqueued jobs for,
/// and each given to [`Outbox::add_trigger_token`](crate::Outbox::add_trigger_token).
#[derive(Clone)]
pub struct Trigger {
    reference: uuid::Uuid,
    token: Option<Secret>,
}

impl Trigger {
    /// The trigger with `token`.
    pub fn new(token: impl Into<Secret>) -> Self {
        let token = token.into();
        Self {
            reference: Self::reference_of(token.expose()),
            token: Some(token),
        }
    }

    /// The reference of the trigger with `token`: the UUIDv5 of the token in the OID namespace.
    pub(crate) fn reference_of(token: &str) -> uuid::Uuid {
        uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, token.as_bytes())
    }

    /// The reference a job stores: not a secret.
    pub fn reference(&self) -> uuid::Uuid {
        self.reference
    }

    /// The token, when this process knows it; `None` for a job read from the store before its
    /// worker resolved it.
    pub fn token(&self) -> Option<&Secret> {
        self.token.as_ref()
    }

    /// This trigger with its token, known now.
    pub(crate) fn resolved(&self, token: Secret) -> Self {
        Self {
            reference: self.reference,
            token: Some(token),
        }
    }
}

impl fmt::Debug for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Trigger({})", self.reference)
    }
}

/// The error of a webhook job whose trigger's token no worker was given: nothing was sent.
pub(crate) fn unresolved(trigger: &Trigger) -> Error {
    Error::invalid_input(format!(
        "no token is known here for the job's trigger {}: give it to the workers \
         (Outbox::add_trigger_token; hodoflow-send outbox worker --trigger-token); nothing was sent",
        trigger.reference
    ))
}

/// The stored route of a webhook job: `trigger:` and the trigger's reference.
const TRIGGER_ROUTE: &str = "trigger:";

/// Where a job is delivered.
///
/// Webhook deliveries, JSON:API writes and Modulify calls share one job shape: an event ID, a
/// target, the body bytes, and the identity derived from the event ID
/// ([`IdempotencyKey::from_operation_id`]), sent as the delivery ID or the `Idempotency-Key`.
#[derive(Clone)]
#[non_exhaustive]
pub enum Target {
    /// `POST /api/v1/webhooks/<trigger_token>`. The token is a secret: the job stores its
    /// trigger's reference, never the token, and the workers resolve it ([`Trigger`]).
    Webhook {
        /// The trigger.
        trigger: Trigger,
    },
    /// A JSON:API unsafe write: `POST`, `PUT`, `PATCH` or `DELETE` of `path` under `/api/json/`.
    Write {
        /// The method.
        method: Method,
        /// The path, such as `/api/json/v1/projects`.
        path: String,
    },
    /// A Modulify method call, `POST /v1/<method>` (its catalogue decides whether a key is sent).
    Modulify {
        /// The method, such as `send_message`.
        method: String,
    },
    /// `method` on `path` of a vendor of your own, by its name: delivered by the workers'
    /// client and [`Profile`](hodoflow_retry::Profile) registered under that name
    /// ([`WorkerBuilder::vendor`](crate::WorkerBuilder::vendor)), its identity sent as
    /// the profile's key.
    Route {
        /// The vendor's name, as registered with the workers.
        vendor: String,
        /// The method.
        method: Method,
        /// The path under the vendor client's base URL, such as `/orders`.
        path: String,
    },
}

impl PartialEq for Target {
    fn eq(&self, other: &Self) -> bool {
        self.kind() == other.kind() && self.to_row() == other.to_row()
    }
}

impl Eq for Target {}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Webhook { trigger } => {
                f.debug_struct("Webhook").field("trigger", trigger).finish()
            }
            Self::Write { method, path } => f
                .debug_struct("Write")
                .field("method", method)
                .field("path", &strip_query(path))
                .finish(),
            Self::Modulify { method } => {
                f.debug_struct("Modulify").field("method", method).finish()
            }
            Self::Route {
                vendor,
                method,
                path,
            } => f
                .debug_struct("Route")
                .field("vendor", vendor)
                .field("method", method)
                .field("path", &strip_query(path))
                .finish(),
        }
    }
}

/// The names a job's kind already has: a vendor of your own takes another.
const BUILT_IN_KINDS: [&str; 3] = ["webhook", "write", "modulify"];

/// `path` without its query and fragment, which may hold anything: how a route is shown (a
/// write's path is under `/api/json/`, never a trigger's).
fn strip_query(path: &str) -> &str {
    path.split(['?', '#']).next().unwrap_or_default()
}

/// An `invalid_input` error unless `vendor` is a name a job may store as its kind: 1 to 40
/// lowercase ASCII letters, digits, `-` or `_`, starting with a letter, and none of the
/// built-in kinds.
fn check_vendor(vendor: &str) -> Result<()> {
    let fits = (1..=40).contains(&vendor.len())
        && vendor.starts_with(|c: char| c.is_ascii_lowercase())
        && vendor
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if !fits {
        return Err(Error::invalid_input(
            "a vendor's name is 1 to 40 lowercase ASCII letters, digits, '-' or '_', starting with a letter",
        ));
    }
    if BUILT_IN_KINDS.contains(&vendor) {
        return Err(Error::invalid_input(format!(
            "{vendor:?} is a built-in kind of job: name your vendor otherwise"
        )));
    }
    Ok(())
}

impl Target {
    /// A webhook delivery to the trigger with `trigger_token`.
    pub fn webhook(trigger_token: impl Into<Secret>) -> Self {
        Self::Webhook {
            trigger: Trigger::new(trigger_token),
        }
    }

    /// `POST path`: create a JSON:API resource.
    pub fn create(path: impl Into<String>) -> Self {
        Self::Write {
            method: Method::POST,
            path: path.into(),
        }
    }

    /// A call of a Modulify method.
    pub fn modulify(method: impl Into<String>) -> Self {
        Self::Modulify {
            method: method.into(),
        }
    }

    /// `method` on `path` of the vendor registered with the workers as `vendor`
    /// ([`WorkerBuilder::vendor`](crate::WorkerBuilder::vendor)).
    pub fn route(vendor: impl Into<String>, method: Method, path: impl Into<String>) -> Self {
        Self::Route {
            vendor: vendor.into(),
            method,
            path: path.into(),
        }
    }

    /// `"webhook"`, `"write"`, `"modulify"`, or the name of a vendor of your own.
    pub fn kind(&self) -> &str {
        match self {
            Self::Webhook { .. } => "webhook",
            Self::Write { .. } => "write",
            Self::Modulify { .. } => "modulify",
            Self::Route { vendor, .. } => vendor,
        }
    }

    /// The method and route as stored: the trigger's reference (never its token), the path,
    /// or the Modulify method.
    pub(crate) fn to_row(&self) -> (String, String) {
        match self {
            Self::Webhook { trigger } => (
                "POST".to_owned(),
                format!("{TRIGGER_ROUTE}{}", trigger.reference),
            ),
            Self::Write { method, path } => (method.as_str().to_owned(), path.clone()),
            Self::Modulify { method } => ("POST".to_owned(), method.clone()),
            Self::Route { method, path, .. } => (method.as_str().to_owned(), path.clone()),
        }
    }

    /// The target of a stored row.
    #[cfg_attr(
        not(any(feature = "sqlite", feature = "postgres")),
        allow(dead_code, reason = "read by a store backend")
    )]
    pub(crate) fn from_row(kind: &str, method: &str, route: &str) -> Result<Self> {
        match kind {
            "webhook" => match route.strip_prefix(TRIGGER_ROUTE) {
                Some(reference) => match reference.parse::<uuid::Uuid>() {
                    // Only the form it is stored in: a row reads back as it was stored.
                    Ok(parsed) if parsed.hyphenated().to_string() == reference => {
                        Ok(Self::Webhook {
                            trigger: Trigger {
                                reference: parsed,
                                token: None,
                            },
                        })
                    }
                    _ => Err(Error::invalid_input(
                        "a stored webhook job has an invalid trigger reference",
                    )),
                },
                // A row stored before jobs named their trigger by reference: its token.
                None => Ok(Self::webhook(route)),
            },
            "write" => Ok(Self::Write {
                method: Method::from_bytes(method.as_bytes())
                    .map_err(|_| Error::invalid_input("a stored job has an invalid method"))?,
                path: route.to_owned(),
            }),
            "modulify" => Ok(Self::modulify(route)),
            vendor if check_vendor(vendor).is_ok() => Ok(Self::Route {
                vendor: vendor.to_owned(),
                method: Method::from_bytes(method.as_bytes())
                    .map_err(|_| Error::invalid_input("a stored job has an invalid method"))?,
                path: route.to_owned(),
            }),
            _ => Err(Error::invalid_input(format!(
                "a stored job has an unknown kind {kind:?}"
            ))),
        }
    }

    /// The route as it may be shown: the trigger token redacted.
    pub fn shown(&self) -> String {
        match self {
            Self::Webhook { .. } => "POST /api/v1/webhooks/<redacted>".to_owned(),
            Self::Write { method, path } => {
                format!("{method} {}", strip_query(path))
            }
            Self::Modulify { method } => format!("POST /v1/{method}"),
            Self::Route {
                vendor,
                method,
                path,
            } => format!("{vendor} {method} {}", strip_query(path)),
        }
    }
}

impl Target {
    /// An `invalid_input` error when this target could never be sent: checked before a job is
    /// stored.
    pub(crate) fn check(&self) -> Result<()> {
        match self {
            Self::Webhook { trigger } => match &trigger.token {
                Some(token) => HodoflowClient::check_trigger_token(token.expose()),
                None => Err(Error::invalid_input(
                    "a webhook job needs its trigger's token when it is stored",
                )),
            },
            Self::Write { method, path } => HodoflowClient::check_write(method, path),
            Self::Modulify { method } => ModulifyClient::check_method(method),
            Self::Route { vendor, path, .. } => {
                check_vendor(vendor)?;
                RetryingClient::check_path(path)
            }
        }
    }
}

/// How one call of a job ended, in the vendor's terms the outbox records.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Delivered {
    /// A webhook delivery started a workflow run (its ID, when the answer named one).
    Accepted {
        /// The run's ID.
        run_id: Option<String>,
    },
    /// A webhook delivery the trigger had already accepted.
    Duplicate,
    /// Any other call that succeeded.
    Done,
}

/// What one call of a job ended with, and the requests it sent.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Sent {
    /// How it ended.
    pub outcome: Delivered,
    /// The requests the call sent (its attempts).
    pub attempts: u32,
}

impl Sent {
    /// A call that ended `outcome` after `attempts` requests.
    pub fn new(outcome: Delivered, attempts: u32) -> Self {
        Self { outcome, attempts }
    }
}

/// The future of a [`Deliver::deliver`]: the call's end, or its error (whose
/// [`may_have_run`](Error::may_have_run) the job keeps).
pub type DeliverFuture<'a> = Pin<Box<dyn Future<Output = Result<Sent>> + Send + 'a>>;

/// One call of one job, handed to a [`Deliver`]: where it goes, its identity and body, and what
/// the workers share (their closed scopes and windows, through the store).
pub struct JobCall<'a> {
    pub(crate) target: &'a Target,
    pub(crate) identity: &'a IdempotencyKey,
    pub(crate) body: &'a Bytes,
    pub(crate) fleet: Arc<dyn Fleet>,
    pub(crate) queue: std::time::Duration,
}

impl fmt::Debug for JobCall<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobCall")
            .field("target", self.target)
            .field("identity", self.identity)
            .field("body", &BodyLen(self.body.len()))
            .finish_non_exhaustive()
    }
}

impl<'a> JobCall<'a> {
    /// Where the job goes.
    pub fn target(&self) -> &'a Target {
        self.target
    }

    /// The job's identity: send it as the delivery ID or key of every attempt.
    pub fn identity(&self) -> &'a IdempotencyKey {
        self.identity
    }

    /// The job's body, byte for byte.
    pub fn body(&self) -> &'a Bytes {
        self.body
    }

    /// How long the call may queue for its route's window before it starts: what the job's
    /// lease leaves after one call's budget.
    pub fn queue(&self) -> std::time::Duration {
        self.queue
    }

    /// `method` on `path` through `client` with `profile`, ready to send: the job's body, its
    /// identity as the key (when the profile sends keys), and the workers' shared closed scopes.
    /// What a [`Deliver`] of a vendor of your own sends.
    pub fn request<'c>(
        &self,
        client: &'c RetryingClient,
        profile: impl Into<Profile>,
        method: Method,
        path: &str,
    ) -> Request<'c> {
        let profile = profile.into();
        let request = client
            .request(profile, method, path)
            .body(self.body.clone())
            .fleet(Arc::clone(&self.fleet));
        if profile.sends_key() {
            request.idempotency_key(self.identity.clone())
        } else {
            request
        }
    }
}

/// A vendor's client, delivering the outbox's jobs of its targets; the outbox worker calls it
/// and never names a vendor. Hodoflow's and Modulify's clients are two; register your own with
/// [`WorkerBuilder::deliver`](crate::WorkerBuilder::deliver).
pub trait Deliver: Send + Sync + fmt::Debug {
    /// Whether this client delivers the jobs of `target`.
    fn delivers(&self, target: &Target) -> bool;

    /// How long the service that takes the jobs of `target` has been down, as this client's
    /// retry budget tells (see [`RetryingClient::service_down_for`]); `None` while it is up.
    /// The workers start no job of that service while it is down longer than a call's budget.
    ///
    /// Default: `None`, never down.
    fn down_for(&self, target: &Target) -> Option<std::time::Duration> {
        let _ = target;
        None
    }

    /// One call of `job` (one whose target this client [`delivers`](Self::delivers)).
    fn deliver<'a>(&'a self, job: JobCall<'a>) -> DeliverFuture<'a>;
}

/// A body in a `Debug` view: its length, never its bytes.
pub(crate) struct BodyLen(pub(crate) usize);

impl fmt::Debug for BodyLen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{} bytes>", self.0)
    }
}
