//! [`WorkerBuilder`]: what a worker pool is configured with, and how it starts.
//!
//! Its setters are its own, not the client's and the middleware's shared ones
//! (`src/core/engine_options.rs`): it configures workers around a client already built. Three share
//! a name with a [`ClientBuilder`](hodoflow_retry::ClientBuilder) setter but not its meaning or signature:
//! `poll_interval` is how often a worker claims jobs (the client's, how often `follow_run` polls a
//! run), `schedule` takes the [`LongSchedule`] of waits between a job's calls (the client's, a
//! [`Schedule`](hodoflow_retry::schedule::Schedule) of waits between attempts), and `trigger_limit` takes an `Option`
//! (`None`: no shared window) for a window every worker of the store shares.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use crate::deliver::profile::ProfileJobs;
use hodoflow_retry::Profile;
use hodoflow_retry::RetryingClient;
use hodoflow_retry::limit::Fleet;
use hodoflow_retry::limit::RouteLimit;
use hodoflow_retry::{Error, Result};

use crate::target::Deliver;

use crate::Outbox;
use crate::job::JobState;
use crate::schedule::LongSchedule;

use super::*;

/// Configures the workers of an [`Outbox`]; start them with [`spawn`](Self::spawn) or
/// [`run_until_idle`](Self::run_until_idle).
#[derive(Debug)]
#[must_use]
pub struct WorkerBuilder {
    pub(super) outbox: Outbox,
    /// The client whose limits, stats and budget the workers share: the first deliverer's.
    pub(super) client: RetryingClient,
    /// The deliverers: the one the workers were made with, then those given with `deliver`
    /// and `vendor`, in order.
    pub(super) deliverers: Vec<Arc<dyn Deliver>>,
    pub(super) name: String,
    pub(super) concurrency: usize,
    pub(super) lease: Duration,
    pub(super) poll: Duration,
    pub(super) safety_poll: Duration,
    /// The longest a job waits for its trigger's window before its call starts; `None`: what
    /// its lease leaves after a whole call.
    pub(super) queue: Option<Duration>,
    pub(super) schedule: LongSchedule,
    pub(super) webhook_horizon: Duration,
    pub(super) key_horizon: Duration,
    /// The caller's limit (`Some(None)`: no shared window); `None`: the server's figures,
    /// the documented default until known.
    pub(super) trigger_limit: Option<Option<RouteLimit>>,
    /// The caller's name for the client's endpoint in the store; `None`: its base URL.
    pub(super) credential: Option<String>,
    pub(super) on_finished: Option<OnFinished>,
}

/// A callback for every job a pool finished and recorded.
#[derive(Clone)]
pub(super) struct OnFinished(pub(super) Arc<dyn Fn(&JobDone) + Send + Sync>);

impl std::fmt::Debug for OnFinished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnFinished(..)")
    }
}

/// A job a pool delivered and recorded: its event ID and what it came to.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobDone {
    /// The job's event ID.
    pub event_id: String,
    /// Its new state: final, or pending when rescheduled.
    pub state: JobState,
    /// Requests this call sent.
    pub attempts: u32,
}

impl WorkerBuilder {
    pub(crate) fn new(outbox: Outbox, client: RetryingClient, first: Arc<dyn Deliver>) -> Self {
        let name = format!(
            "worker-{}-{}",
            std::process::id(),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        Self {
            outbox,
            client,
            deliverers: vec![first],
            name,
            concurrency: DEFAULT_CONCURRENCY,
            lease: DEFAULT_LEASE,
            poll: DEFAULT_POLL,
            safety_poll: DEFAULT_SAFETY_POLL,
            queue: None,
            schedule: LongSchedule::default(),
            webhook_horizon: WEBHOOK_HORIZON,
            key_horizon: KEY_HORIZON,
            trigger_limit: None,
            credential: None,
            on_finished: None,
        }
    }

    /// Calls `callback` for every job this pool delivered, once its result is recorded (not for
    /// a record refused because the claim was lost). It runs on the recorder's task: keep it
    /// short.
    ///
    /// Default: none.
    pub fn on_finished(mut self, callback: impl Fn(&JobDone) + Send + Sync + 'static) -> Self {
        self.on_finished = Some(OnFinished(Arc::new(callback)));
        self
    }

    /// The worker's name in the store's leases.
    ///
    /// Default: `worker-<pid>-<random>`.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// How many deliveries run at once.
    ///
    /// Default: [`DEFAULT_CONCURRENCY`].
    pub fn concurrency(mut self, deliveries: usize) -> Self {
        self.concurrency = deliveries;
        self
    }

    /// How long a claim holds; after it another worker reclaims the job. It must outlast one
    /// call: at least the client's `max_elapsed` plus one second; at most [`MAX_LEASE`].
    ///
    /// Default: [`DEFAULT_LEASE`].
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// How long an idle worker waits before claiming again when its store cannot wake it for
    /// another process's jobs (SQLite: a job enqueued through the same store wakes it at once),
    /// or its clock does not move by itself ([`Clock::moves_by_itself`]). Also the wait
    /// after the store failed, growing with each failure.
    ///
    /// Default: [`DEFAULT_POLL`].
    ///
    /// [`Clock::moves_by_itself`]: hodoflow_retry::clock::Clock::moves_by_itself
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll = interval;
        self
    }

    /// The longest an idle worker sleeps when its store wakes it whoever enqueues (PostgreSQL,
    /// through `LISTEN`/`NOTIFY`): it sleeps until the next job is due, a wake-up, or this,
    /// whichever comes first. Only a lost notification waits this long; nothing else queries
    /// the store while nothing is due. At least the poll interval.
    ///
    /// Default: [`DEFAULT_SAFETY_POLL`], 30 s.
    pub fn safety_poll(mut self, interval: Duration) -> Self {
        self.safety_poll = interval;
        self
    }

    /// The longest a webhook job waits for a slot of its trigger's window (the one every worker
    /// of the store shares) before its call starts: jobs queue, not calls, so a call starts with
    /// its whole budget. A job that gets no slot in time is put off to when one frees, nothing
    /// sent.
    ///
    /// Default: what the job's lease leaves after a whole call (the lease less `max_elapsed`
    /// and a second).
    pub fn queue(mut self, max: Duration) -> Self {
        self.queue = Some(max);
        self
    }

    /// The waits between the calls of a job.
    ///
    /// Default: [`LongSchedule::default`].
    pub fn schedule(mut self, schedule: LongSchedule) -> Self {
        self.schedule = schedule;
        self
    }

    /// How long after its first send a webhook delivery ID may still be sent; at most
    /// [`MAX_LEASE`].
    ///
    /// Default: [`WEBHOOK_HORIZON`], 7 days.
    pub fn webhook_horizon(mut self, horizon: Duration) -> Self {
        self.webhook_horizon = horizon;
        self
    }

    /// How long after its first send a JSON:API or Modulify key may still be sent; at most
    /// [`MAX_LEASE`].
    ///
    /// Default: [`KEY_HORIZON`], 24 hours.
    pub fn key_horizon(mut self, horizon: Duration) -> Self {
        self.key_horizon = horizon;
        self
    }

    /// Delivers the jobs `deliver` [delivers](Deliver::delivers) through it: Modulify's jobs
    /// through a [`ModulifyClient`](hodoflow_retry::ModulifyClient), a vendor of your own, or your own
    /// way of sending a built-in kind. The workers ask their deliverers in order (the client
    /// they were made with, then these in the order given) and the first that delivers a job's
    /// target sends it.
    ///
    /// Default: none.
    pub fn deliver(mut self, deliver: impl Deliver + 'static) -> Self {
        self.deliverers.push(Arc::new(deliver));
        self
    }

    /// Delivers the jobs of `vendor`, a vendor of your own
    /// ([`Target::route`](crate::Target::route)), through `client` with `profile`:
    /// each call is `client.request(profile, method, path)` with the job's body and, when the
    /// profile sends keys, the job's identity as its key (as [`JobCall::request`](crate::JobCall::request) makes it).
    /// Registered twice under one name, the first delivers.
    ///
    /// Default: none; a job of a vendor not registered fails with `invalid_input`, nothing
    /// sent.
    pub fn vendor(
        self,
        vendor: impl Into<String>,
        client: RetryingClient,
        profile: impl Into<Profile>,
    ) -> Self {
        self.deliver(ProfileJobs {
            vendor: vendor.into(),
            client,
            profile: profile.into(),
        })
    }

    /// The per-trigger window every worker of the store shares, or `None` for none. A limit
    /// set here wins over the server's figures.
    ///
    /// Default: the trigger's own limit, as the server states it on every answer
    /// (`RateLimit-Policy: "trigger";q=…;w=…`), and Hodoflow's documented
    /// [`TRIGGER_LIMIT`](hodoflow_retry::hodoflow::TRIGGER_LIMIT), 100 per 60 s, until it has: the rule of
    /// [`HodoflowBuilder::pace_triggers`](hodoflow_retry::hodoflow::HodoflowBuilder::pace_triggers).
    pub fn trigger_limit(mut self, limit: Option<RouteLimit>) -> Self {
        self.trigger_limit = Some(limit);
        self
    }

    /// The name under which the workers of the client's credential share what the server
    /// closed and the triggers' windows, in place of its base URL: for two credentials on one
    /// base URL. Never put a secret in it: the status page shows it.
    ///
    /// Default: the client's base URL.
    pub fn credential(mut self, name: impl Into<String>) -> Self {
        self.credential = Some(name.into());
        self
    }

    pub(super) fn build(self) -> Result<Arc<WorkerPool>> {
        let budget = self.client.budget();
        if self.concurrency == 0 {
            return Err(Error::invalid_input(
                "a worker needs a concurrency of at least 1",
            ));
        }
        if self.lease < budget.call_time().saturating_add(Duration::from_secs(1)) {
            return Err(Error::invalid_input(format!(
                "the lease of {:?} does not outlast a call of up to {:?}: another worker would send the job again while it runs",
                self.lease,
                budget.call_time()
            )));
        }
        if self.poll.is_zero() {
            return Err(Error::invalid_input("the poll interval must be positive"));
        }
        if self.safety_poll < self.poll {
            return Err(Error::invalid_input(
                "the safety poll must be at least the poll interval",
            ));
        }
        for (what, value) in [
            ("lease", self.lease),
            ("webhook horizon", self.webhook_horizon),
            ("key horizon", self.key_horizon),
        ] {
            if value > MAX_LEASE {
                return Err(Error::invalid_input(format!(
                    "the {what} of {value:?} is over the 7-day maximum"
                )));
            }
        }
        let fleet: Arc<dyn Fleet> = Arc::new(StoreFleet {
            store: Arc::clone(&self.outbox.store),
            clock: Arc::clone(&self.outbox.clock),
            credential: self.credential,
            trigger_limit: self.trigger_limit,
            endpoint: self.client.endpoint().to_owned(),
            attempt_timeout: budget.attempt_time(),
            paused: Mutex::new(std::collections::HashMap::new()),
            windows: Mutex::new(std::collections::HashMap::new()),
            outages: super::outage::Outages::default(),
        });
        Ok(Arc::new(WorkerPool {
            store: Arc::clone(&self.outbox.store),
            clock: Arc::clone(&self.outbox.clock),
            deliverers: { self.deliverers },
            name: self.name,
            concurrency: self.concurrency,
            lease: self.lease,
            poll: self.poll,
            safety_poll: self.safety_poll,
            queue: self.queue,
            schedule: self.schedule,
            webhook_horizon: self.webhook_horizon,
            key_horizon: self.key_horizon,
            budget,
            fleet,
            triggers: Arc::clone(&self.outbox.triggers),
            on_finished: self.on_finished,
            report: Mutex::new(RunReport::default()),
            #[cfg(feature = "metrics")]
            meter: Arc::clone(&self.outbox.meter),
        }))
    }

    /// Starts the workers in the background; they run until [`Workers::stop`].
    ///
    /// # Errors
    ///
    /// `invalid_input` for a zero concurrency or poll interval, or a lease shorter than a call.
    pub fn spawn(self) -> Result<Workers> {
        let pool = self.build()?;
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(Arc::clone(&pool).run(stopped, false));
        Ok(Workers { pool, stop, task })
    }

    /// Delivers every job due now, and those that come due while it runs, and returns when
    /// none is due and none is in flight here. Jobs rescheduled for later stay pending.
    ///
    /// # Errors
    ///
    /// As for [`spawn`](Self::spawn), and the store's error.
    pub async fn run_until_idle(self) -> Result<RunReport> {
        let pool = self.build()?;
        let (_stop, stopped) = watch::channel(false);
        pool.run(stopped, true).await
    }
}
