//! The retry budget: what the calls of a client may send while a service fails, shared by them.
//!
//! # Why a budget and not only max attempts
//!
//! Max attempts bounds one call; it does nothing for a fleet. When the server degrades, every
//! call retries up to its limit at once, so 500 calls with 5 attempts each send 2,500 requests to
//! a server that is already failing (a retry storm). Hodoflow's "Idempotency and retries" asks
//! a sender to cap attempts *and* to respect the credential's budget.
//!
//! # Why not a plain bucket
//!
//! AWS standard mode, gRPC's retry throttling, Finagle's and tower's budgets and reqwest's
//! `TpsBudget` keep a fixed bucket of retry tokens and refuse a retry at once when it is empty.
//! That stops a storm, but it cannot tell a storm from a blip: 1,000 calls that meet one 503
//! together drain a 500-token bucket after 100 retries, and 883 of them failed in this crate's
//! `herd` bench although every retry would have succeeded. A plain bucket also never throttles
//! first attempts, so in an outage senders that loop send at full speed. This budget keeps the
//! bucket (`bucket.rs`) and adds a throttle per service (`throttle.rs`):
//!
//! 1. **The bucket** (AWS standard mode's: [`RetryBudget::DEFAULT_CAPACITY`] tokens,
//!    [`RetryBudget::RETRY_COST`] a retry, [`RetryBudget::TIMEOUT_RETRY_COST`] after a timeout; a
//!    success after retries refunds them, a first-attempt success adds
//!    [`RetryBudget::SUCCESS_REWARD`]). A retry that finds it empty **waits** for tokens within
//!    its own deadline while any attempt is in flight whose success would bring tokens back; it
//!    is refused at once only when none is. A **floor** of retries
//!    ([`RetryBudget::MIN_RETRIES_PER_SEC`], Finagle's `minRetriesPerSec`) still goes when the
//!    bucket is empty, so a client is never refused a lone retry after a blip drained its
//!    bucket. One bucket for every service of every client the budget is given to.
//!
//!    **Both are a share of the client's own calls**, not a constant per client: a client
//!    spends no more tokens in 10 to 20 seconds than its calls of that time earn, one each (at
//!    least one retry's worth, and three in a new client's first 10 seconds, so its first calls
//!    each keep a retry; retries that succeed give theirs back), **and no faster than it earns
//!    them**: in any second, no more than an average second of its calls earns (at least one
//!    retry's worth). The floor is at most a tenth of those calls a second, and under one
//!    retry a second (a client of fewer than ten calls a second) it pays no retry after a
//!    timeout, which waits for the share to renew: a floor retry banked by each of a thousand
//!    small clients went at the same instant when their attempts began to time out together.
//!    A client
//!    sending a hundred calls a second keeps AWS's full bucket and Finagle's floor; a thousand
//!    clients sending a call a second each retry together what that one client would, where a
//!    full bucket and a floor each would let them send fifty times as many retries. (Measured
//!    in the fleet simulator: a thousand small open-loop senders with a 3 s attempt timeout
//!    were metastable after a 10 s drop with a bucket and a floor each, and recover with
//!    these shares. Without the pace a second, a thousand senders of 13 calls a second whose
//!    attempts began to time out together spent 10 to 20 seconds of retries in two, and took
//!    7 s to recover instead of 1; ten thousand senders of a call a second, each sending the
//!    floor retry it had banked, sent 1.115 attempts per event during the drop, 1.083 when the
//!    floor pays none after a timeout.)
//! 2. **Retries the server paced are free.** A retry that follows a `Retry-After` of at least
//!    [`RetryBudget::FREE_AFTER_RETRY_AFTER`] costs no token and is never held: the server said
//!    when to come back (Hodoflow's webhook sender guide: "For 429, the server's Retry-After is
//!    authoritative"). It still counts against its call's `Budget::max_attempts`, like every
//!    attempt.
//! 3. **"Down" is decided per service, from the ratio of its requests to its accepts** (the SRE
//!    book's client-side adaptive throttling), over [`RetryBudget::HISTORY`] in one-second
//!    buckets and over the last [`RetryBudget::SHORT_HISTORY`]: `max(0, (requests - K * accepts)
//!    / (requests + 1))` with [`RetryBudget::K`] = 2. An accept is any answer but a 429 or a 5xx.
//!    At [`RetryBudget::DOWN_AT`] or more the service is down, and every attempt **to that
//!    service**, first attempts included, holds instead of sending. A service is one vendor
//!    endpoint's surface (webhook ingestion apart from the JSON:API, one vendor apart from
//!    another, as the vendor's profile names it): one service's outage never holds another's
//!    calls. An outage is measured from its **onset**, the first refused answer of the run that
//!    took the service down. **A hold is decided by time, not by a count of refused probes**:
//!    - a held attempt keeps holding, sending nothing, until it is the probe (below), the ramp
//!      releases it, or its time runs out: it is refused with `retry_budget_exhausted`, nothing
//!      sent, once less than half an attempt's time is left, so it rides out any blip its
//!      budget could;
//!    - or sooner, once the service has been down for longer than the call's **whole budget**
//!      and the newest probe was refused: no blip this call could ride out is going on, so a
//!      sender's backlog ends as "send later" instead of holding wave after wave;
//!    - one attempt at a time goes as a probe, when nothing else of the service is in flight,
//!      **at a pace that slows as the outage lasts**: each probe waits
//!      [`RetryBudget::PROBE_AGE_SHARE`] (three quarters) of the outage's age so far, from
//!      [`RetryBudget::PROBE_INTERVAL`] (100 ms) up to [`RetryBudget::PROBE_INTERVAL_MAX`]
//!      (10 s): at about 0.1, 0.2, 0.35, 0.6, 1.1, 1.9, 3.3, 5.7, 10 and 17.6 s of it, then
//!      every 10 s. A heal is seen within three quarters of the time the service was down, and an
//!      outage of a minute costs a client about 14 probes, not one a second. A probe is an
//!      attempt of its call like any other and counts against its `max_attempts`; a call's
//!      **final** retry is not spent as a probe while its hold lasts (a sequential sender
//!      keeps it for after the outage, or for its hold's end, and does not lose the event to
//!      a blip);
//!    - **a call whose hold is over has last chances of its own**: due (half an attempt's time
//!      left), it may go as the probe off the schedule, a sixth of an attempt's time after the
//!      newest probe. The calls whose holds end together get up to three last chances in all,
//!      not one each, and a heal the slowed schedule would see only after their time ran out
//!      is seen before it does;
//!    - the first accepted probe starts the ramp: an eighth of the held attempts goes at once, a
//!      quarter and a half at the next steps, then all, when the service is declared up and the
//!      outage's history is forgotten. A step comes a probe interval after the last, and not
//!      before every attempt the last step released was answered, so a client whose answers are
//!      slow ramps no faster than they come back. A held attempt whose hold is over does not
//!      wait for the steps: the ramp lets it go at once, as its time would run out before they
//!      came (a wave whose holds end as the service heals would otherwise lose most of its
//!      calls). A refusal of an attempt sent during the ramp ends it, back to holding;
//!    - **evidence goes stale**: once the service has not answered for
//!      [`RetryBudget::SHORT_HISTORY`] (and, while it is down, no sooner than its next probe is
//!      due: the wait between probes is no quiet spell), the next attempt goes as a probe at
//!      once instead of being held or refused on what it said before the quiet spell.
//!
//!    Why time: a client cannot tell a 300 ms-old blip from an outage. At the default budget an
//!    operation may use its budget, as long as the server's load stays bounded; a caller who
//!    wants to fail fast sets a short budget.
//!
//!    Why the probes slow down and calls keep last chances: a probe is worth its request while
//!    a held call could still use what it finds. Probing at a fixed pace, 200 calls held for
//!    their 60 s budget sent 56 probes (a tenth of the age, up to 3.2 s) besides their 200
//!    first attempts; at three quarters of the age with last chances, they send 17. A heal
//!    comes later to light in a long outage (after a 5 s outage, 95 % of calls succeed again
//!    1.5 s after the heal instead of 0.4 s, in the workspace's `recovery` bench), but a held
//!    call's last chances come before its time runs out.
//!
//! Local rejections are not counted as requests in the ratio (the SRE book counts them): a sender
//! that loops on an instant local refusal would otherwise fill the window with its own
//! rejections, and the ratio could not recover within the two minutes.
//!
//! **A held call sleeps until its own standing can change**: one held attempt that may go as
//! the probe times the next probe; the others wake at the ramp's steps, their hold's end, or
//! when the outage outlives their call's budget and a probe is refused; no held attempt looks
//! again on a timer. [`RetryBudget::admissions`] counts the attempts by the rule that let each
//! go, and the passes that ended in waiting again.
//!
//! `RetryBudget::builder().adaptive(false)` keeps the plain bucket, refusing a retry as soon as
//! the bucket is short. (A 429 without `Retry-After` slows its scope's send rate: that is the
//! send-rate limiter's, `cubic.rs`, not the budget's.)
//!
//! # Limits
//!
//! Each client decides alone what its own answers say. Processes that share a store share what
//! they found: given a [`Fleet`](crate::limit::Fleet) (an outbox's workers give theirs to every
//! call), a service one process finds down is held down for all within the fleet's staleness,
//! and one probe of the whole fleet goes at a time, on [`RetryBudget::probe_interval`]. The
//! retry tokens and the floor are not shared: each is a share of its process's own calls, so
//! the processes of a fleet together retry what one client of their summed calls would.

mod bucket;
mod history;
mod throttle;

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::StatusCode;
use rand::Rng;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::core::error::{Error, ErrorKind, Result};
use crate::core::limit::scope::{ServiceKey, Signal};
use crate::core::limit::{Ask, Limiter, Refusal as Refused};
use crate::core::map::Map;
use crate::core::runtime::{self, Clock, TokioClock};

use bucket::{Bucket, Floor, Share};
use history::Counts;
use throttle::{Ramp, Service, Throttle, probe_interval};

/// The retries a new client may pay for in its first 10 seconds, before its calls have earned
/// any: its first calls that meet a slow server each keep a retry. After that the least is one
/// retry's worth in 10 to 20 seconds, however few its calls.
const FIRST_RETRIES: u32 = 3;
/// How long a client counts as new.
const FIRST_WINDOW: Duration = Duration::from_secs(10);
/// The shortest wait: the timer's resolution.
const SHORTEST_WAIT: Duration = Duration::from_millis(1);
/// Services kept at most per budget; past this, calm ones with nothing in flight are forgotten.
const KEEP_SERVICES: usize = 1024;

/// The attempts a [`RetryBudget`] let go since it was built, by the rule that let each go, and
/// how often a held or waiting attempt woke only to wait again. Read with
/// [`RetryBudget::admissions`]; a sender's extra load in an outage is the sum of all but
/// `first`, and these tell which rule sent it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Admissions {
    /// First attempts, and the attempt after a token re-exchange, sent while their service was
    /// not held down.
    pub first: u64,
    /// Retries paid from the bucket.
    pub paid: u64,
    /// Retries sent on the floor ([`RetryBudget::MIN_RETRIES_PER_SEC`]) with the bucket short.
    pub floor: u64,
    /// Retries the server paced with a `Retry-After` of at least
    /// [`RetryBudget::FREE_AFTER_RETRY_AFTER`]: free.
    pub paced: u64,
    /// Attempts sent as the probe of a service held down.
    pub probes: u64,
    /// Held attempts the ramp released after an accepted probe.
    pub released: u64,
    /// Passes of a held or waiting attempt that ended in waiting again.
    pub wakeups: u64,
}

/// The counters behind [`Admissions`].
#[derive(Debug, Default)]
struct Counters {
    first: AtomicU64,
    paid: AtomicU64,
    floor: AtomicU64,
    paced: AtomicU64,
    probes: AtomicU64,
    released: AtomicU64,
    wakeups: AtomicU64,
}

impl Counters {
    fn add(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn read(&self) -> Admissions {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        Admissions {
            first: read(&self.first),
            paid: read(&self.paid),
            floor: read(&self.floor),
            paced: read(&self.paced),
            probes: read(&self.probes),
            released: read(&self.released),
            wakeups: read(&self.wakeups),
        }
    }
}

/// What the calls of a client may send while a service fails: a retry bucket, and per service
/// an SRE throttle that holds every attempt while that service is down. The design, each
/// constant and the figures measured are in the module docs of
/// `src/core/limit/retry_budget/mod.rs`.
///
/// Cheap to clone: clones share one state. A client and its clones share one; give the same
/// budget to several clients with
/// [`ClientBuilder::retry_budget`](crate::ClientBuilder::retry_budget) to hold them together.
///
/// # Examples
///
/// ```
/// use hodoflow_retry::{HodoflowClient, limit::RetryBudget};
///
/// let shared = RetryBudget::builder().capacity(200).build()?;
/// let orders = HodoflowClient::builder("https://hodoflow.example")
///     .client_credentials("sender-1", "s3cr3t")
///     .retry_budget(shared.clone())
///     .build()?;
/// assert_eq!(shared.tokens(), Some(200));
/// assert_eq!(shared.throttle_ratio(), Some(0.0));
/// # let _ = orders;
/// # Ok::<(), hodoflow_retry::Error>(())
/// ```
#[derive(Clone)]
pub struct RetryBudget {
    bucket: Option<Arc<BudgetState>>,
}

impl RetryBudget {
    /// The default number of tokens when full: 500 (AWS standard mode).
    pub const DEFAULT_CAPACITY: u32 = 500;
    /// The default cost of a retry: 5 tokens.
    pub const RETRY_COST: u32 = 5;
    /// The default cost of a retry after a timeout: 10 tokens.
    pub const TIMEOUT_RETRY_COST: u32 = 10;
    /// The default tokens put back by a success at the first attempt: 1.
    pub const SUCCESS_REWARD: u32 = 1;
    /// A retry that follows a `Retry-After` of at least this is free: the server paced it.
    pub const FREE_AFTER_RETRY_AFTER: Duration = Duration::from_secs(1);
    /// SRE's K: the client sends up to K times what the server accepts before it holds back.
    pub const K: f64 = history::K;
    /// The history of the ratio of requests to accepts: two minutes, in one-second buckets.
    pub const HISTORY: Duration = Duration::from_secs(history::BUCKETS as u64);
    /// The short horizon of the same ratio: the last five seconds. Also how old a service's
    /// newest answer may be and still hold an attempt: past it, the attempt goes as a probe.
    pub const SHORT_HISTORY: Duration = Duration::from_secs(history::SHORT as u64);
    /// The ratio at which a service is down: 0.5, at most a quarter of the answers accepted.
    pub const DOWN_AT: f64 = 0.5;
    /// While a service is down, one attempt goes as a probe at most this often: 100 ms, the
    /// wait after the outage's onset, so a held call learns within about 100 ms that a blip
    /// ended.
    pub const PROBE_INTERVAL: Duration = Duration::from_millis(100);
    /// The share of the outage's age each probe waits: 0.75, so the probes space out as the
    /// outage lasts (each at 1.75 times the age of the one before: at about 0.1, 0.2, 0.35,
    /// 0.6, 1.1, 1.9, 3.3, 5.7 and 10 s), and a heal is seen within three quarters of the time
    /// the service was down. A held call whose time runs out does not wait for them: it is due
    /// for a last chance of its own (see the module docs).
    pub const PROBE_AGE_SHARE: f64 = 0.75;
    /// The longest time between probes in a long outage: 10 s, so an outage of any length sees
    /// at most about one request every 10 s from a client, besides the last chances of calls
    /// whose time runs out, and a heal is seen within it.
    pub const PROBE_INTERVAL_MAX: Duration = Duration::from_secs(10);
    /// The share of held attempts an accepted probe releases at once: an eighth, then a quarter
    /// and a half at the next steps, then all of them, when the service is up again. A step
    /// comes [`RetryBudget::PROBE_INTERVAL`] after the last, once every attempt the last step
    /// released was answered. A refused answer during the ramp ends it.
    pub const RAMP_FIRST_SHARE: f64 = 0.125;
    /// Retries a second that go even when the bucket is empty (Finagle's `minRetriesPerSec`,
    /// reqwest's retry floor): 10, and no more than a tenth of the client's own calls a second,
    /// so a client is never refused a lone retry after a blip that emptied its bucket, and a
    /// fleet of small clients does not add up to many floors. Under one retry a second (a
    /// client of fewer than ten calls a second), it pays no retry after a timeout: that one
    /// waits for the client's share to renew.
    pub const MIN_RETRIES_PER_SEC: u32 = 10;

    /// The default budget: adaptive, with a full bucket of the default size.
    pub fn new() -> Self {
        Self::builder()
            .build()
            .expect("the default retry budget is valid")
    }

    /// A builder for a budget with other costs, a refill, an injected clock, or the plain bucket.
    pub fn builder() -> RetryBudgetBuilder {
        RetryBudgetBuilder::new()
    }

    /// How long a client waits between probes of a service down for `down_for`:
    /// [`RetryBudget::PROBE_AGE_SHARE`] of the outage's age, from
    /// [`RetryBudget::PROBE_INTERVAL`] up to [`RetryBudget::PROBE_INTERVAL_MAX`]. A
    /// [`Fleet`](crate::limit::Fleet) that shares a service's outage lets one probe of the
    /// whole fleet go on the same schedule.
    ///
    /// ```
    /// use std::time::Duration;
    /// use hodoflow_retry::limit::RetryBudget;
    ///
    /// assert_eq!(RetryBudget::probe_interval(Duration::from_millis(50)), Duration::from_millis(100));
    /// assert_eq!(RetryBudget::probe_interval(Duration::from_secs(4)), Duration::from_secs(3));
    /// assert_eq!(RetryBudget::probe_interval(Duration::from_secs(600)), Duration::from_secs(10));
    /// ```
    pub fn probe_interval(down_for: Duration) -> Duration {
        probe_interval(down_for)
    }

    /// No budget: retries are capped only by each call's [`Budget`](crate::Budget), and nothing
    /// is ever held or refused.
    pub fn disabled() -> Self {
        Self { bucket: None }
    }

    /// Whether a budget is in force.
    pub fn is_enabled(&self) -> bool {
        self.bucket.is_some()
    }

    /// The retry tokens left now, or `None` when disabled. (In the adaptive budget a client
    /// spends no more of them in 10 to 20 seconds than its own calls of that time earn, nor in
    /// a second than an average second of them earns; see [`RetryBudgetBuilder::capacity`].)
    pub fn tokens(&self) -> Option<u32> {
        self.bucket.as_ref().map(|shared| shared.bucket().tokens)
    }

    /// The SRE throttling ratio now, the largest of its services' and of their two horizons,
    /// between 0 and 1; a service is down from [`RetryBudget::DOWN_AT`]. `None` when disabled.
    pub fn throttle_ratio(&self) -> Option<f64> {
        let shared = self.bucket.as_ref()?;
        let now = shared.clock.now();
        Some(
            shared
                .each_service(|throttle| throttle.history.ratio(now))
                .into_iter()
                .fold(0.0, f64::max),
        )
    }

    /// Calls waiting now for a retry token or a probe.
    pub fn waiting(&self) -> u64 {
        self.bucket
            .as_ref()
            .map_or(0, |shared| shared.waiting.load(Ordering::Relaxed))
    }

    /// Attempts refused without being sent, first attempts and retries, since the budget was
    /// built.
    pub fn local_rejections(&self) -> u64 {
        self.bucket
            .as_ref()
            .map_or(0, |shared| shared.local_rejections.load(Ordering::Relaxed))
    }

    /// The attempts this budget let go so far, by the rule that let each go. All zero when
    /// disabled.
    pub fn admissions(&self) -> Admissions {
        self.bucket
            .as_ref()
            .map_or_else(Admissions::default, |shared| shared.counters.read())
    }

    /// How long the service down the longest has been down, from the onset of its outage, as
    /// this budget's answers tell: `None` while every service is up or the budget is disabled.
    /// [`RetryingClient::service_down_for`](crate::RetryingClient::service_down_for) asks for
    /// one surface's service.
    pub fn down_for(&self) -> Option<Duration> {
        let shared = self.bucket.as_ref()?;
        let now = shared.clock.now();
        shared
            .each_service(|throttle| down_for(throttle, now))
            .into_iter()
            .flatten()
            .max()
    }

    /// How long `service` has been down, from its outage's onset; `None` while it is up.
    pub(crate) fn service_down_for(&self, service: ServiceKey) -> Option<Duration> {
        self.service_health(service).0
    }

    /// How long `service` has been down (`None` while it is up), and how many of its attempts
    /// failed (a 5xx, or no answer) since the newest accepted one.
    pub(crate) fn service_health(&self, service: ServiceKey) -> (Option<Duration>, u32) {
        let Some(shared) = self.bucket.as_ref() else {
            return (None, 0);
        };
        let now = shared.clock.now();
        let Some(known) = shared.services().get(&service).cloned() else {
            return (None, 0);
        };
        let mut throttle = known.lock();
        (down_for(&mut throttle, now), throttle.failed_in_a_row)
    }

    /// Admits one attempt to `service`: at once, after a wait within `limits`, or not at all.
    #[cfg(test)]
    pub(crate) async fn admit_to(
        &self,
        service: ServiceKey,
        admission: Admission,
        attempts_left: u32,
        limits: Limits,
    ) -> std::result::Result<Ticket, Refusal> {
        self.admit_within(service, admission, attempts_left, move || limits)
            .await
    }

    /// Admits one attempt to `service`: at once, after a wait within `limits`, or not at all;
    /// the call's `limits` are read only when the attempt may have to wait (a first attempt
    /// to a calm service never does).
    async fn admit_within(
        &self,
        service: ServiceKey,
        admission: Admission,
        attempts_left: u32,
        limits: impl FnOnce() -> Limits,
    ) -> std::result::Result<Ticket, Refusal> {
        let Some(shared) = &self.bucket else {
            return Ok(Ticket { admitted: None });
        };
        let cost = match admission {
            Admission::Retry {
                after_timeout,
                paced: false,
            } => {
                if after_timeout {
                    shared.config.timeout_retry_cost
                } else {
                    shared.config.retry_cost
                }
            }
            _ => 0,
        };
        let service = shared.service(service);
        if admission == Admission::First {
            shared.calls.fetch_add(1, Ordering::Relaxed);
        }
        let paced = matches!(admission, Admission::Retry { paced: true, .. });
        let calm = service.calm.load(Ordering::Acquire);
        if !shared.config.adaptive || paced || (cost == 0 && calm) {
            if cost > 0 {
                let mut bucket = shared.bucket();
                if bucket.tokens < cost {
                    let left = bucket.tokens;
                    drop(bucket);
                    shared.local_rejections.fetch_add(1, Ordering::Relaxed);
                    return Err(Refusal::Tokens { left, cost });
                }
                bucket.tokens -= cost;
                shared.full.store(false, Ordering::Release);
            }
            let counters = &shared.counters;
            Counters::add(match (paced, cost) {
                (true, _) => &counters.paced,
                (false, 0) => &counters.first,
                (false, _) => &counters.paid,
            });
            return Ok(shared.ticket(service, cost, None, None));
        }
        let ask = Asked {
            cost,
            first: admission == Admission::First,
            after_timeout: matches!(
                admission,
                Admission::Retry {
                    after_timeout: true,
                    ..
                }
            ),
            final_retry: admission != Admission::First && attempts_left <= 1,
            limits: limits(),
        };
        // The slow path (a retry, or a service not calm) from an allocation of its own, so
        // that a calm call's admission, and the engine's future around it, stay small.
        Box::pin(shared.admit_slow(service, ask)).await
    }

    /// The answer (`status`, `None` when none came back) to the attempt of `ticket`.
    pub(crate) fn answered(&self, ticket: Ticket, status: Option<StatusCode>) {
        if let Some(shared) = &self.bucket {
            shared.answered(ticket, status);
        }
    }

    /// A call succeeded after its retries took `spent` tokens: refunds them, or rewards a
    /// first-attempt success.
    pub(crate) fn succeeded(&self, spent: u32) {
        let Some(shared) = &self.bucket else {
            return;
        };
        if spent == 0 && shared.full.load(Ordering::Acquire) {
            return;
        }
        let back = if spent == 0 {
            shared.config.success_reward
        } else {
            spent
        };
        let mut bucket = shared.bucket();
        bucket.tokens = bucket
            .tokens
            .saturating_add(back)
            .min(shared.config.capacity);
        if spent > 0 {
            // The retries succeeded: what they spent no longer counts against the share.
            bucket.refund(spent);
        }
        let tokens = bucket.tokens;
        shared
            .full
            .store(tokens == shared.config.capacity, Ordering::Release);
        drop(bucket);
        if shared.waiting.load(Ordering::Relaxed) > 0 {
            // Wake as many token waiters as the tokens now pay for, and no more.
            let retries =
                (tokens / shared.config.retry_cost).min(back / shared.config.retry_cost + 1);
            for _ in 0..retries {
                shared.tokens_back.notify_one();
            }
        }
    }
}

/// How long the service of `throttle` has been down at `now`; `None` while it is up.
fn down_for(throttle: &mut Throttle, now: Instant) -> Option<Duration> {
    throttle.down(now).then(|| throttle.down_for(now))
}

impl Default for RetryBudget {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for RetryBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.bucket {
            Some(shared) => f
                .debug_struct("RetryBudget")
                .field("tokens", &shared.bucket().tokens)
                .field("waiting", &shared.waiting.load(Ordering::Relaxed))
                .field("config", &shared.config)
                .finish(),
            None => f.write_str("RetryBudget(disabled)"),
        }
    }
}

impl Limiter for RetryBudget {
    type Permit = Ticket;

    /// Admits the attempt to its service: a retry's tokens, and the service's throttle.
    async fn admit(&self, ask: &Ask<'_>) -> std::result::Result<Ticket, Refused> {
        let limits = || {
            let now = runtime::now();
            Limits {
                max_wait: ask.max_wait(),
                hold: ask.deadline.hold(now),
                due: ask.deadline.due(now),
                rides_out: ask.deadline.max_elapsed(),
                free_probes: ask.paced_left,
                attempt: ask.deadline.attempt_time(),
            }
        };
        self.admit_within(ask.service, ask.admission, ask.attempts_left, limits)
            .await
            .map_err(|refusal| {
                ask.counters.retry_refused();
                tracing::debug!("the retry budget refused to send this attempt");
                Refused {
                    kind: ErrorKind::RetryBudgetExhausted,
                    message: format!(
                        "{}: {}",
                        ErrorKind::RetryBudgetExhausted.describe(),
                        refusal.message()
                    ),
                    retry_after: None,
                }
            })
    }

    /// Counts the answer in its service's ratio; a probe's answer may start the ramp.
    fn heard(&self, ticket: Ticket, _: &Ask<'_>, signal: &Signal<'_>) {
        self.answered(ticket, signal.answer.status());
    }
}

/// What an attempt asks the budget for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    /// The call's first attempt.
    First,
    /// The attempt after a token re-exchange: free.
    Reexchange,
    /// A retry. `paced` when it follows a `Retry-After` of at least
    /// [`RetryBudget::FREE_AFTER_RETRY_AFTER`].
    Retry { after_timeout: bool, paced: bool },
}

/// An admitted attempt; answer it with [`RetryBudget::answered`]. Dropped unanswered (the call
/// stopped before sending), it leaves the count of attempts in flight.
pub(crate) struct Ticket {
    admitted: Option<Admitted>,
}

struct Admitted {
    shared: Arc<BudgetState>,
    service: Arc<Service>,
    cost: u32,
    probe: Option<u64>,
    /// The ramp that released it, if one did: its answer lets the ramp's next step begin.
    ramp: Option<Instant>,
    at: Instant,
}

impl Ticket {
    /// The tokens this attempt took.
    pub(crate) fn cost(&self) -> u32 {
        self.admitted.as_ref().map_or(0, |admitted| admitted.cost)
    }

    /// Whether this attempt goes as the probe of a service the budget holds down.
    pub(crate) fn is_probe(&self) -> bool {
        self.admitted
            .as_ref()
            .is_some_and(|admitted| admitted.probe.is_some())
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let Some(admitted) = self.admitted.take() {
            admitted.shared.left_flight(&admitted.service);
            if let Some(from) = admitted.ramp {
                // Dropped unanswered: the ramp's step waits for no answer of it.
                let last = admitted.service.lock().ramp_answered(from);
                if last {
                    admitted.service.news.notify_waiters();
                }
            }
        }
    }
}

impl fmt::Debug for Ticket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ticket")
            .field("cost", &self.cost())
            .field(
                "probe",
                &self.admitted.as_ref().and_then(|admitted| admitted.probe),
            )
            .finish()
    }
}

/// What bounds one admission's waits, from its call's deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// The longest wait for a token: what is left of the call, less the least time an attempt
    /// needs.
    pub(crate) max_wait: Duration,
    /// The longest hold while the service is down: what is left of the call, less one attempt's
    /// time, so a held attempt that is released still has time to be answered.
    pub(crate) hold: Duration,
    /// The longest wait, held and then due for a probe slot: what is left of the call, less
    /// half an attempt's time, so the attempt that goes is still answered in time.
    pub(crate) due: Duration,
    /// The call's whole budget: the longest outage it could ride out. Once the service has been
    /// down longer, the attempt is refused on the newest probe's refusal.
    pub(crate) rides_out: Duration,
    /// Probes the call's final retry may send on its allowance of paced retries, spaced so
    /// they span its hold: each goes once the hold has lasted its share.
    pub(crate) free_probes: u32,
    /// One attempt's time: what `due` leaves after `hold` is half of it.
    pub(crate) attempt: Duration,
}

impl Limits {
    /// Limits for waits of at most `wait`, holding as long, riding out as long.
    #[cfg(test)]
    pub(crate) fn of(wait: Duration) -> Self {
        Self {
            max_wait: wait,
            hold: wait,
            due: wait,
            rides_out: wait,
            free_probes: 0,
            attempt: wait,
        }
    }
}

/// Why an attempt was refused without being sent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Refusal {
    /// Too few tokens, and no attempt in flight whose success would bring some back (the plain
    /// bucket only; the adaptive budget has a floor).
    Tokens { left: u32, cost: u32 },
    /// The service stayed down while this attempt held, and its call's time ran out before a
    /// probe slot came free for its last chance.
    Down { down_for: Duration, held: Duration },
    /// The service has been down for longer than the call's whole budget, and the newest probe
    /// was refused: no blip this call could ride out is going on.
    Outlived {
        down_for: Duration,
        budget: Duration,
    },
    /// The call's time ran out while it waited for tokens or a probe.
    NoTime { waited: Duration },
}

impl Refusal {
    /// The error message after `client retry budget exhausted: `.
    pub(crate) fn message(&self) -> String {
        match self {
            Refusal::Tokens { left, cost } => format!(
                "a retry costs {cost} tokens and {left} are left, with no attempt in flight that could bring tokens back; most calls are failing, so this one stops instead of adding load"
            ),
            Refusal::Down { down_for, held } => format!(
                "the service has been down for {:.1}s; this attempt held {:.1}s for it to come back, and its time ran out before a probe slot came free for its last chance; nothing was sent for this attempt, send it again later",
                down_for.as_secs_f64(),
                held.as_secs_f64()
            ),
            Refusal::Outlived { down_for, budget } => format!(
                "the service has been down for {:.1}s, longer than this call's budget of {:.1}s, and the latest probe was refused; nothing was sent for this attempt, send it again later",
                down_for.as_secs_f64(),
                budget.as_secs_f64()
            ),
            Refusal::NoTime { waited } => format!(
                "the call's time ran out after waiting {:.1}s for a retry token or a probe; nothing was sent for this attempt",
                waited.as_secs_f64()
            ),
        }
    }
}

/// Builds a [`RetryBudget`].
#[must_use]
#[derive(Debug)]
pub struct RetryBudgetBuilder {
    config: Config,
    clock: Arc<dyn Clock>,
}

#[derive(Debug, Clone, Copy)]
struct Config {
    capacity: u32,
    retry_cost: u32,
    timeout_retry_cost: u32,
    success_reward: u32,
    refill_every: Option<Duration>,
    adaptive: bool,
    min_retries_per_sec: u32,
    seed: Option<u64>,
}

impl RetryBudgetBuilder {
    /// The defaults: 500 tokens, 5 a retry, 10 after a timeout, 1 back per first-attempt
    /// success, no refill over time, adaptive, the runtime's clock.
    pub fn new() -> Self {
        Self {
            config: Config {
                capacity: RetryBudget::DEFAULT_CAPACITY,
                retry_cost: RetryBudget::RETRY_COST,
                timeout_retry_cost: RetryBudget::TIMEOUT_RETRY_COST,
                success_reward: RetryBudget::SUCCESS_REWARD,
                refill_every: None,
                adaptive: true,
                min_retries_per_sec: RetryBudget::MIN_RETRIES_PER_SEC,
                seed: None,
            },
            clock: Arc::new(TokioClock),
        }
    }

    /// The tokens of a full bucket, and the tokens it starts with. In the adaptive budget a
    /// client spends no more of them in 10 to 20 seconds than its own calls of that time earn,
    /// one token each, at least one retry's worth (three in its first 10 seconds), nor in any
    /// second more than an average second of its calls earns (at least one retry's worth); a
    /// retry held back by that pace goes in the next second.
    ///
    /// Default: 500. At least the cost of one retry.
    pub fn capacity(mut self, tokens: u32) -> Self {
        self.config.capacity = tokens;
        self
    }

    /// The tokens a retry takes.
    ///
    /// Default: 5. At least 1.
    pub fn retry_cost(mut self, tokens: u32) -> Self {
        self.config.retry_cost = tokens;
        self
    }

    /// The tokens a retry after a timeout takes.
    ///
    /// Default: 10. At least 1.
    pub fn timeout_retry_cost(mut self, tokens: u32) -> Self {
        self.config.timeout_retry_cost = tokens;
        self
    }

    /// The tokens a success at the first attempt puts back.
    ///
    /// Default: 1.
    pub fn success_reward(mut self, tokens: u32) -> Self {
        self.config.success_reward = tokens;
        self
    }

    /// Puts one token back every `interval`, so a bucket drained by an outage refills even
    /// when no call succeeds, such as after a quiet night.
    ///
    /// Default: none (AWS standard mode refills only on success).
    pub fn refill_every(mut self, interval: Duration) -> Self {
        self.config.refill_every = Some(interval);
        self
    }

    /// Whether the budget adapts (retries wait for tokens, free retries after `Retry-After`,
    /// attempts held while their service is down), or is the plain bucket that refuses a retry
    /// at once when empty and never holds an attempt.
    ///
    /// Default: `true`.
    pub fn adaptive(mut self, adaptive: bool) -> Self {
        self.config.adaptive = adaptive;
        self
    }

    /// Retries a second that go when the bucket is empty, in the adaptive budget, and no more
    /// than a tenth of the client's own calls a second (under one, it pays no retry after a
    /// timeout, which waits for the share to renew, every 10 s); 0 turns the floor off. While a service is down, the hold decides before the bucket does, so the
    /// floor adds no load to an outage.
    ///
    /// Default: [`RetryBudget::MIN_RETRIES_PER_SEC`] (10).
    pub fn min_retries_per_sec(mut self, retries: u32) -> Self {
        self.config.min_retries_per_sec = retries;
        self
    }

    /// Seeds the budget's draws (which held attempts the ramp releases), for tests and
    /// simulations that must repeat exactly.
    ///
    /// Default: seeded from the operating system.
    pub fn seed(mut self, seed: u64) -> Self {
        self.config.seed = Some(seed);
        self
    }

    /// Reads the time for the refill and the ratio's history from `clock`. Waits sleep on the
    /// runtime's timer.
    ///
    /// Default: [`TokioClock`].
    pub fn clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Builds a budget with a full bucket.
    ///
    /// # Errors
    ///
    /// `invalid_input` when a cost is zero, the capacity is below a cost, or the refill
    /// interval is zero.
    pub fn build(self) -> Result<RetryBudget> {
        let config = self.config;
        if config.retry_cost == 0 || config.timeout_retry_cost == 0 {
            return Err(Error::invalid_input("a retry must cost at least one token"));
        }
        if config.capacity < config.retry_cost.max(config.timeout_retry_cost) {
            return Err(Error::invalid_input(
                "the retry budget's capacity must pay for at least one retry",
            ));
        }
        if config.refill_every.is_some_and(|every| every.is_zero()) {
            return Err(Error::invalid_input(
                "the retry budget's refill interval must be positive",
            ));
        }
        let now = self.clock.now();
        Ok(RetryBudget {
            bucket: Some(Arc::new(BudgetState {
                config,
                clock: self.clock,
                bucket: Mutex::new(Bucket::full(
                    config.capacity,
                    config.min_retries_per_sec,
                    now,
                )),
                services: Mutex::new(Map::default()),
                full: AtomicBool::new(true),
                in_flight: AtomicU64::new(0),
                waiting: AtomicU64::new(0),
                local_rejections: AtomicU64::new(0),
                calls: AtomicU64::new(0),
                born: now,
                counters: Counters::default(),
                tokens_back: Notify::new(),
            })),
        })
    }
}

impl Default for RetryBudgetBuilder {
    fn default() -> Self {
        Self::new()
    }
}

struct BudgetState {
    config: Config,
    clock: Arc<dyn Clock>,
    bucket: Mutex<Bucket>,
    services: Mutex<Map<ServiceKey, Arc<Service>>>,
    /// Whether the bucket is full, so a first-attempt success (the common case) need not lock.
    full: AtomicBool,
    /// Attempts admitted and not yet answered, of every service: their successes may bring
    /// tokens back.
    in_flight: AtomicU64,
    /// Calls waiting for a token or a probe.
    waiting: AtomicU64,
    local_rejections: AtomicU64,
    /// Calls that asked for a first attempt: the client's own traffic.
    calls: AtomicU64,
    /// When the budget was built.
    born: Instant,
    counters: Counters,
    /// Tokens came back, or no attempt is left in flight.
    tokens_back: Notify,
}

/// The ramp's steps before every held attempt goes: an eighth, a quarter, a half, then all.
const RAMP_STEPS: u32 = 3;

/// What one admission asks, for its passes.
#[derive(Debug, Clone, Copy)]
struct Asked {
    cost: u32,
    first: bool,
    /// A retry after an attempt that timed out.
    after_timeout: bool,
    /// A retry with no attempt left after it: not spent as a probe while its hold lasts, but
    /// for those its allowance of paced retries pays (`Limits::free_probes`).
    final_retry: bool,
    limits: Limits,
}

/// One pass of an admission: go, refuse, or wait at most this long.
enum Step {
    Go(Ticket),
    Refuse(Refusal),
    Wait(Duration),
}

/// Counts a call as waiting while it lives.
struct Waiting<'a>(&'a AtomicU64);

impl<'a> Waiting<'a> {
    fn new(count: &'a AtomicU64) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Self(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl BudgetState {
    /// The bucket, with the refill due by now already added.
    fn bucket(&self) -> std::sync::MutexGuard<'_, Bucket> {
        let mut bucket = self
            .bucket
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(every) = self.config.refill_every {
            bucket.refill(every, self.config.capacity, self.clock.now());
        }
        bucket
    }

    /// The least share of tokens a client may spend in a window, however few its calls: one
    /// retry's worth, whatever it follows, and [`FIRST_RETRIES`] in the client's first 10
    /// seconds.
    fn least_share(&self, now: Instant) -> u32 {
        let most = self.config.retry_cost.max(self.config.timeout_retry_cost);
        if now.saturating_duration_since(self.born) < FIRST_WINDOW {
            most.saturating_mul(FIRST_RETRIES)
        } else {
            most
        }
    }

    fn services(&self) -> std::sync::MutexGuard<'_, Map<ServiceKey, Arc<Service>>> {
        self.services
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The throttle of `key`, made on first use.
    fn service(&self, key: ServiceKey) -> Arc<Service> {
        let mut services = self.services();
        if let Some(service) = services.get(&key) {
            return Arc::clone(service);
        }
        if services.len() >= KEEP_SERVICES {
            services.retain(|_, service| {
                Arc::strong_count(service) > 1 || !service.calm.load(Ordering::Acquire)
            });
        }
        let service = Arc::new(Service::new(key, self.clock.now(), self.config.seed));
        services.insert(key, Arc::clone(&service));
        service
    }

    /// `read` of every service's throttle.
    fn each_service<T>(&self, mut read: impl FnMut(&mut Throttle) -> T) -> Vec<T> {
        let services: Vec<Arc<Service>> = self.services().values().cloned().collect();
        services
            .iter()
            .map(|service| read(&mut service.lock()))
            .collect()
    }

    fn ticket(
        self: &Arc<Self>,
        service: Arc<Service>,
        cost: u32,
        probe: Option<u64>,
        ramp: Option<Instant>,
    ) -> Ticket {
        service.in_flight.fetch_add(1, Ordering::AcqRel);
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        Ticket {
            admitted: Some(Admitted {
                shared: Arc::clone(self),
                service,
                cost,
                probe,
                ramp,
                at: self.clock.now(),
            }),
        }
    }

    /// An admitted attempt of `service` was answered or dropped.
    fn left_flight(&self, service: &Service) {
        let waiting = self.waiting.load(Ordering::Relaxed) > 0;
        if self.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 && waiting {
            // Token waiters wait only while an attempt in flight may bring tokens back.
            self.tokens_back.notify_waiters();
        }
        service.left_flight(waiting);
    }

    async fn admit_slow(
        self: &Arc<Self>,
        service: Arc<Service>,
        ask: Asked,
    ) -> std::result::Result<Ticket, Refusal> {
        let started = self.clock.now();
        let mut hold = Holding {
            service: &service,
            hold: Hold::default(),
        };
        let mut waiting = None;
        loop {
            let news = service.news.notified();
            let back = self.tokens_back.notified();
            tokio::pin!(news, back);
            news.as_mut().enable();
            back.as_mut().enable();
            let waiting_too = self
                .waiting
                .load(Ordering::Relaxed)
                .saturating_sub(u64::from(waiting.is_some()));
            let wait = match self.step(&service, ask, started, &mut hold.hold, waiting_too) {
                Step::Go(ticket) => return Ok(ticket),
                Step::Refuse(refusal) => {
                    self.local_rejections.fetch_add(1, Ordering::Relaxed);
                    // Pass on a wake-up this waiter may have taken from another.
                    self.tokens_back.notify_one();
                    return Err(refusal);
                }
                Step::Wait(wait) => wait,
            };
            if waiting.is_some() {
                Counters::add(&self.counters.wakeups);
            }
            waiting.get_or_insert_with(|| Waiting::new(&self.waiting));
            // Only an attempt that may go as the probe listens for the probe's turn; a turn
            // given while none listened is kept for the next that does.
            let turn = hold.hold.turn.then(|| service.turn.notified());
            tokio::pin!(turn);
            let turn = async {
                match turn.as_mut().as_pin_mut() {
                    Some(turn) => turn.await,
                    None => std::future::pending().await,
                }
            };
            // Biased, so a seeded run takes the same branch every time. No timer of its own:
            // a wait ends at the next time this attempt's standing can change, or at news.
            tokio::select! {
                biased;
                () = &mut news => {}
                () = &mut back => {}
                () = turn => {}
                () = runtime::sleep(wait) => {}
            }
        }
    }

    /// Decides one pass of an admission, under the service's lock (and the bucket's after it).
    fn step(
        self: &Arc<Self>,
        service: &Arc<Service>,
        ask: Asked,
        started: Instant,
        hold: &mut Hold,
        // Other calls waiting here besides this one.
        waiting_too: u64,
    ) -> Step {
        hold.turn = false;
        let mut throttle = service.lock();
        let now = self.clock.now();
        let waited = now.saturating_duration_since(started);
        let left = ask.limits.max_wait.saturating_sub(waited);
        // What is admissible now goes now; only a wait needs time left.
        let wait = |wait: Duration| {
            if left.is_zero() {
                Step::Refuse(Refusal::NoTime { waited })
            } else {
                // Never a wait of nothing, which would look again at the same instant (and
                // under paused time, never let the clock move).
                Step::Wait(wait.max(SHORTEST_WAIT).min(left))
            }
        };
        // First attempts that arrive in the first probe interval of an outage still go: they
        // left with the burst whose answers declared it, and a blip counted in requests is
        // then met by them, not by the probes.
        let young = throttle
            .declared_at
            .is_none_or(|at| now.saturating_duration_since(at) < RetryBudget::PROBE_INTERVAL);
        if ask.first && young && !hold.holding {
            hold.released = true;
        }
        if !hold.released && throttle.down(now) {
            match self.hold(service, &mut throttle, now, waited, ask, hold) {
                Held::Released => {}
                Held::Probe => {
                    throttle.probes.sent += 1;
                    let interval = probe_interval(throttle.down_for(now));
                    throttle.probes.next_at = now.checked_add(interval).unwrap_or(now);
                    throttle.probes.sent_at = Some(now);
                    let probe = throttle.probes.sent;
                    drop(throttle);
                    Counters::add(&self.counters.probes);
                    return Step::Go(self.ticket(Arc::clone(service), 0, Some(probe), None));
                }
                Held::Refuse(refusal) => return Step::Refuse(refusal),
                Held::Wait(until) => return wait(until),
            }
        }
        // Let through: the next probe's timing passes on to an attempt still held.
        let pass_turn = std::mem::take(&mut hold.prober);
        if pass_turn {
            throttle.prober = false;
        }
        drop(throttle);
        if pass_turn {
            service.turn.notify_one();
        }
        let mut cost = ask.cost;
        let mut on_floor = false;
        let calls = self.calls.load(Ordering::Relaxed);
        let mut bucket = self.bucket();
        // The share of the client's own calls this retry may still spend (the adaptive
        // budget's; the plain bucket is AWS's, unchanged).
        let share = match self.config.adaptive {
            true => bucket.share_left(now, calls, self.least_share(now)),
            false => Share {
                left: u64::MAX,
                next_second: None,
                renews_in: Duration::MAX,
            },
        };
        // A retry held back by the second's pace alone looks again when the next one starts.
        let next_second = share.next_second.unwrap_or(Duration::MAX);
        let tokens = u64::from(bucket.tokens).min(share.left);
        let tokens = u32::try_from(tokens).unwrap_or(u32::MAX);
        if cost > 0 && tokens < cost {
            // The floor: a few retries a second go whatever the bucket holds, so a client is
            // not refused the lone retry a blip left it; at most a share of its own calls a
            // second, so small clients together retry no more than one large one.
            let floor = match self.config.adaptive {
                true => {
                    let share = Floor::SHARE * bucket.pace.rate(now, calls);
                    let per_sec = f64::from(self.config.min_retries_per_sec).min(share);
                    // Under one retry a second, the floor keeps the lone retry of a blip or of
                    // a key still in progress, but pays none after a timeout: a thousand small
                    // clients each sending the retry it banked while calm, at the instant their
                    // attempts began to time out together, kept a queue past the timeout.
                    if ask.after_timeout && per_sec < 1.0 {
                        Err(Duration::MAX)
                    } else {
                        bucket.floor.take(now, per_sec)
                    }
                }
                false => Err(Duration::MAX),
            };
            let in_flight = self.in_flight.load(Ordering::Acquire) != 0;
            match floor {
                Ok(()) => {
                    cost = 0;
                    on_floor = true;
                }
                // An answer in flight may bring tokens back (its success wakes one waiter),
                // and the floor or the refill may give one by time.
                Err(refill) if in_flight => {
                    let refill_every = self.config.refill_every.unwrap_or(Duration::MAX);
                    return wait(refill.min(refill_every).min(next_second));
                }
                // Held by the second's pace, not by what it may spend: the next second pays.
                Err(_) if share.next_second.is_some() => return wait(next_second),
                Err(_) if !self.config.adaptive => {
                    return Step::Refuse(Refusal::Tokens { left: tokens, cost });
                }
                Err(refill) if refill != Duration::MAX => return wait(refill.min(next_second)),
                // A retry after a timeout that a floor under one retry a second does not pay
                // waits for the share to renew.
                Err(_) if self.config.min_retries_per_sec > 0 && share.left < u64::from(cost) => {
                    return wait(share.renews_in);
                }
                // No floor: nothing in flight can bring tokens back. Alone, a retry is refused;
                // when other retries wait here too (every call of a worker pool such a retry),
                // one goes for what is left and the others wait for its answer.
                Err(_) if waiting_too == 0 => {
                    return Step::Refuse(Refusal::Tokens { left: tokens, cost });
                }
                Err(_) => cost = tokens,
            }
        }
        if cost > 0 {
            bucket.spend(cost);
            self.full.store(false, Ordering::Release);
        }
        drop(bucket);
        let counters = &self.counters;
        Counters::add(if on_floor {
            &counters.floor
        } else if hold.holding {
            &counters.released
        } else if ask.cost > 0 {
            &counters.paid
        } else {
            &counters.first
        });
        Step::Go(self.ticket(Arc::clone(service), cost, None, hold.ramp.take()))
    }

    /// One pass of an attempt held while its service is down: released by the ramp, sent as the
    /// probe, refused by time, or held until the next news.
    fn hold(
        &self,
        service: &Service,
        throttle: &mut Throttle,
        now: Instant,
        waited: Duration,
        ask: Asked,
        hold: &mut Hold,
    ) -> Held {
        hold.holding = true;
        let limits = ask.limits;
        let held_left = limits.hold.saturating_sub(waited);
        // An accepted probe started the ramp: each step releases a larger share of the held
        // attempts, each drawing once a step, and after the last step the service is up. An
        // attempt whose hold is over goes at once: its time would run out before the steps.
        if let Some(step) = throttle.ramp_step(now) {
            if step >= RAMP_STEPS {
                throttle.declare_up(now);
                service.calm.store(true, Ordering::Release);
                service.news.notify_waiters();
                hold.released = true;
                return Held::Released;
            }
            if held_left.is_zero() || hold.drawn.is_none_or(|drawn| drawn < step) {
                hold.drawn = Some(step);
                let share = RetryBudget::RAMP_FIRST_SHARE * f64::from(1u32 << step);
                if held_left.is_zero() || throttle.rng.random_bool(share.clamp(0.0, 1.0)) {
                    hold.released = true;
                    if let Some(ramp) = throttle.ramp.as_mut() {
                        ramp.pending += 1;
                        hold.ramp = Some(ramp.from);
                    }
                    return Held::Released;
                }
            }
        }
        // Once the outage has outlived this call's whole budget, and the newest probe (a recent
        // one: evidence goes stale) was refused, no blip the call could ride out is going on:
        // it is refused. A retry is refused at once, before it could go as a probe, so a
        // sender's backlog ends as "send later" instead of a call the outage outlived coming
        // back as the next probe; a new call may still be the probe when one is due, so a
        // heal is seen at the probes' pace.
        let down_for = throttle.down_for(now);
        let outlived = down_for >= limits.rides_out
            && throttle.newest_probe_refused(now)
            && throttle.ramp.is_none();
        let refuse = || {
            Held::Refuse(Refusal::Outlived {
                down_for,
                budget: limits.rides_out,
            })
        };
        if outlived && !ask.first {
            return refuse();
        }
        let nothing_in_flight = service.in_flight.load(Ordering::Acquire) == 0;
        // A probe goes only when nothing else of the service is in flight: answers still on
        // their way are evidence too, and a probe sent among them would meet the same blip. A
        // call's final retry keeps its attempt for after the outage while its hold lasts; any
        // other held attempt may be the probe. The final one may too on its allowance of paced
        // retries, each once the hold has lasted its share, so a heal is seen within a share
        // of the hold and the allowance spans it. After a quiet spell the evidence is stale,
        // and the next attempt probes at once.
        let free_probe_at = (limits.free_probes > 0)
            .then(|| limits.hold / (limits.free_probes + 1))
            .filter(|_| ask.final_retry);
        let may_probe =
            !ask.final_retry || held_left.is_zero() || free_probe_at.is_some_and(|at| waited >= at);
        // Its hold over, it is due: it may also go as the probe off the schedule, as one of the
        // last chances of the calls whose holds end with its own, so a heal the schedule would
        // see only later is seen before their time runs out.
        let due_probe_at = held_left
            .is_zero()
            .then(|| throttle.due_probe_at(limits.attempt, now));
        let probe_due = now >= throttle.probes.next_at
            || throttle.stale(now)
            || due_probe_at.is_some_and(|at| now >= at);
        if may_probe && nothing_in_flight && probe_due {
            if hold.prober {
                // The next probe's timing passes to another held attempt, woken by this
                // probe's answer (the last attempt in flight answered).
                throttle.prober = false;
                hold.prober = false;
            }
            return Held::Probe;
        }
        if outlived {
            return refuse();
        }
        // Its hold is over, with half an attempt's time left: it is due. It goes as the probe
        // when its turn comes (above), on the schedule or as a last chance, and is refused
        // only when its time runs out first: a wave that began holding together spends at most
        // a few last chances, not one each.
        let mut until = if held_left.is_zero() {
            let due_left = limits.due.saturating_sub(waited);
            if due_left.is_zero() {
                return Held::Refuse(Refusal::Down {
                    down_for,
                    held: waited,
                });
            }
            due_left
        } else {
            held_left
        };
        // Each held attempt sleeps until the next time its own standing can change, so a wave
        // held together is woken once per release, not on a timer:
        // - one attempt that may go as the probe times the next probe (and the evidence going
        //   stale); the others that may listen for the probe's turn, given when it leaves
        //   without probing or when the last attempt in flight is answered;
        let mut soonest = |at: Instant| {
            let after = at.saturating_duration_since(now);
            if !after.is_zero() {
                until = until.min(after);
            }
        };
        hold.turn = may_probe;
        if may_probe && !throttle.prober {
            throttle.prober = true;
            hold.prober = true;
        }
        if hold.prober {
            soonest(throttle.probes.next_at);
            if let Some(at) = throttle.stale_at(now) {
                soonest(at);
            }
        }
        // - a due attempt's next last chance;
        if let Some(at) = due_probe_at {
            soonest(at);
        }
        // - the ramp's next step, when every held attempt draws again (woken by the accepted
        //   probe that starts the ramp, and by the last answer of a step that came late);
        if let Some(ramp) = throttle.ramp {
            soonest(ramp.step_at + RetryBudget::PROBE_INTERVAL);
        }
        // - a final retry's next paced probe;
        if let Some(at) = free_probe_at.filter(|at| waited < *at) {
            soonest(now + (at - waited));
        }
        // - the moment the outage outlives this call's budget, after which a refused probe
        //   wakes it to be refused.
        if let Some(since) = throttle.down_since {
            let outlive_at = since + limits.rides_out;
            soonest(outlive_at);
            throttle.outlive_at = Some(
                throttle
                    .outlive_at
                    .map_or(outlive_at, |at| at.min(outlive_at)),
            );
        }
        Held::Wait(until)
    }

    /// The answer to the attempt of `ticket`: counted in its service's ratio; a probe's result,
    /// which may start the ramp.
    fn answered(&self, mut ticket: Ticket, status: Option<StatusCode>) {
        let Some(admitted) = ticket.admitted.take() else {
            return;
        };
        let service = &admitted.service;
        self.left_flight(service);
        if !self.config.adaptive {
            return;
        }
        let accepted = accepted(status);
        let mut throttle = service.lock();
        let now = self.clock.now();
        let was_down = throttle.down(now);
        let failed = status.is_none_or(|status| status.is_server_error());
        throttle.record(now, accepted, failed);
        let mut news = false;
        if let Some(number) = admitted.probe
            && throttle
                .probes
                .result
                .is_none_or(|(newest, _, _)| newest < number)
        {
            throttle.probes.result = Some((number, accepted, now));
            // A refusal concerns the held attempts only once the outage may have outlived one
            // of their budgets; an acceptance starts the ramp (below), which wakes them all.
            news |= !accepted && throttle.outlive_at.is_some_and(|at| now >= at);
        }
        let down = throttle.down(now);
        news |= down != was_down;
        throttle.declared_at = match (down, throttle.declared_at) {
            (true, Some(at)) => Some(at),
            (true, None) => Some(now),
            (false, _) => None,
        };
        throttle.down_since = match (down, throttle.down_since) {
            (true, Some(since)) => Some(since),
            // The outage began with the first refusal of the run that took it down.
            (true, None) => Some(throttle.refusing_since.unwrap_or(now)),
            (false, _) => None,
        };
        if let Some(from) = admitted.ramp
            && throttle.ramp_answered(from)
        {
            // The step's last answer: if it came after the step's interval, the held attempts
            // draw again now, not at a timer.
            news |= throttle.ramp.is_some_and(|ramp| {
                now.saturating_duration_since(ramp.step_at) >= RetryBudget::PROBE_INTERVAL
            });
        }
        match throttle.ramp {
            // An accepted probe while down starts the ramp.
            None if down && accepted && admitted.probe.is_some() => {
                throttle.ramp = Some(Ramp::new(now));
                throttle.ramp_counts = Counts::default();
                news = true;
            }
            // The attempts sent during the ramp found the service down again: back to holding.
            // One refusal among them is not that: calls whose own first attempt fails (a herd
            // of them, each retry accepted) would end every ramp and hold the rest for good.
            Some(ramp) if admitted.at >= ramp.from => {
                throttle.ramp_counts.count(accepted);
                if throttle.ramp_counts.ratio() >= RetryBudget::DOWN_AT {
                    throttle.ramp = None;
                    news = true;
                }
            }
            Some(_) if !down => throttle.ramp = None,
            _ => {}
        }
        drop(throttle);
        service.calm.store(!down, Ordering::Release);
        if news {
            service.news.notify_waiters();
        }
    }
}

/// Whether the budget counts an answer of `status` (`None`: no answer) as accepted: any answer
/// but a 429 or a 5xx.
pub(crate) fn accepted(status: Option<StatusCode>) -> bool {
    status
        .is_some_and(|status| status != StatusCode::TOO_MANY_REQUESTS && !status.is_server_error())
}

/// What a held attempt does next.
enum Held {
    /// The ramp let it through.
    Released,
    /// It goes as the probe.
    Probe,
    Refuse(Refusal),
    /// It holds this long at most, or until news.
    Wait(Duration),
}

/// Where a held attempt stands while its service is down.
#[derive(Debug, Default)]
struct Hold {
    /// It has begun holding.
    holding: bool,
    /// It was let through: by the ramp, or as a first attempt of the outage's first moment.
    released: bool,
    /// The ramp step at which it last drew.
    drawn: Option<u32>,
    /// It times the service's next probe.
    prober: bool,
    /// It may go as the probe, so it listens for the probe's turn.
    turn: bool,
    /// The ramp that released it, until its attempt is sent.
    ramp: Option<Instant>,
}

/// An admission's [`Hold`], which gives up the timing of the next probe when the admission
/// ends, however it ends (sent, refused, released, or its call dropped).
struct Holding<'a> {
    service: &'a Service,
    hold: Hold,
}

impl Drop for Holding<'_> {
    fn drop(&mut self) {
        if let Some(from) = self.hold.ramp.take() {
            // Released and never sent: the ramp's step waits for no answer of it.
            let last = self.service.lock().ramp_answered(from);
            if last {
                self.service.news.notify_waiters();
            }
        }
        if self.hold.prober {
            self.service.lock().prober = false;
            // Another held attempt that may probe takes the timing over.
            self.service.turn.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::runtime::ManualClock;

    const RETRY: Admission = Admission::Retry {
        after_timeout: false,
        paced: false,
    };
    const TIMEOUT_RETRY: Admission = Admission::Retry {
        after_timeout: true,
        paced: false,
    };
    const LONG: Duration = Duration::from_secs(30);
    const OK: Option<StatusCode> = Some(StatusCode::ACCEPTED);
    const DOWN: Option<StatusCode> = Some(StatusCode::SERVICE_UNAVAILABLE);

    /// The service every test's attempts go to.
    const SERVICE: ServiceKey = ServiceKey {
        endpoint: 1,
        name: "test",
    };

    impl RetryBudget {
        /// An attempt to the test's service, with attempts to spare.
        async fn admit(
            &self,
            admission: Admission,
            limits: Limits,
        ) -> std::result::Result<Ticket, Refusal> {
            self.admit_to(SERVICE, admission, u32::MAX, limits).await
        }
    }

    fn manual_clock() -> ManualClock {
        ManualClock::new(std::time::SystemTime::UNIX_EPOCH)
    }

    /// Takes a retry's tokens without waiting, as a plain bucket would.
    async fn take(budget: &RetryBudget, admission: Admission) -> Result<u32, Refusal> {
        budget
            .admit(admission, Limits::of(Duration::ZERO))
            .await
            .map(|ticket| ticket.cost())
    }

    /// `count` calls whose first attempts were accepted: the client's own traffic, which the
    /// bucket's tokens and the floor are a share of.
    async fn calls(budget: &RetryBudget, count: usize) {
        for _ in 0..count {
            let ticket = budget
                .admit(Admission::First, Limits::of(LONG))
                .await
                .unwrap();
            budget.answered(ticket, OK);
        }
    }

    /// `count` attempts answered `status` (admitted as free retries, so never held).
    async fn answer(budget: &RetryBudget, count: usize, status: Option<StatusCode>) {
        let free = Admission::Retry {
            after_timeout: false,
            paced: true,
        };
        for _ in 0..count {
            let ticket = budget.admit(free, Limits::of(LONG)).await.unwrap();
            budget.answered(ticket, status);
        }
    }

    #[tokio::test]
    async fn starts_full_with_the_aws_standard_defaults() {
        let budget = RetryBudget::new();
        assert_eq!(budget.tokens(), Some(500));
        calls(&budget, 500).await;
        assert_eq!(take(&budget, RETRY).await, Ok(5));
        assert_eq!(take(&budget, TIMEOUT_RETRY).await, Ok(10));
        assert_eq!(budget.tokens(), Some(485));
        assert_eq!(budget.throttle_ratio(), Some(0.0));
    }

    #[tokio::test(start_paused = true)]
    async fn with_nothing_in_flight_one_retry_goes_for_what_is_left_and_the_others_wait_for_it() {
        let budget = no_floor().capacity(12).build().unwrap();
        calls(&budget, 12).await;
        assert_eq!(take(&budget, RETRY).await, Ok(5));
        let in_flight = budget
            .admit(RETRY, Limits::of(LONG))
            .await
            .expect("5 of the 7 left");
        // Two retries wait for the answer of the one in flight; the bucket holds 2 tokens.
        let (a, b) = (budget.clone(), budget.clone());
        let first =
            tokio::spawn(async move { a.admit(RETRY, Limits::of(LONG)).await.map(|t| t.cost()) });
        let second =
            tokio::spawn(async move { b.admit(RETRY, Limits::of(LONG)).await.map(|t| t.cost()) });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(budget.waiting(), 2);
        drop(in_flight);
        // Nothing in flight, two waiting: one goes for the 2 tokens left. Once it is answered
        // (its ticket dropped at once here) the other is alone with nothing in flight, and is
        // refused, as a lone retry always was.
        let mut ended = vec![first.await.unwrap(), second.await.unwrap()];
        ended.sort_by_key(Result::is_err);
        assert_eq!(ended, [Ok(2), Err(Refusal::Tokens { left: 0, cost: 5 })]);
        assert_eq!(budget.tokens(), Some(0));
        assert_eq!(
            take(&budget, RETRY).await,
            Err(Refusal::Tokens { left: 0, cost: 5 }),
            "alone, with nothing in flight, a retry is refused at once"
        );
    }

    #[tokio::test]
    async fn without_a_floor_refuses_at_once_when_no_attempt_in_flight_could_bring_tokens_back() {
        let budget = no_floor().capacity(12).build().unwrap();
        calls(&budget, 12).await;
        assert_eq!(take(&budget, RETRY).await, Ok(5));
        assert_eq!(
            take(&budget, TIMEOUT_RETRY).await,
            Err(Refusal::Tokens { left: 7, cost: 10 }),
            "a timeout retry costs 10"
        );
        assert_eq!(budget.tokens(), Some(7), "a refusal takes nothing");
        assert_eq!(take(&budget, RETRY).await, Ok(5));
        assert_eq!(
            take(&budget, RETRY).await,
            Err(Refusal::Tokens { left: 2, cost: 5 })
        );
        assert_eq!(budget.local_rejections(), 2);
    }

    #[tokio::test]
    async fn the_plain_bucket_drains_after_capacity_over_cost_retries() {
        let budget = RetryBudget::builder().adaptive(false).build().unwrap();
        let mut granted = 0;
        while take(&budget, RETRY).await.is_ok() {
            granted += 1;
        }
        assert_eq!(granted, 100, "500 tokens at 5 a retry");
        assert_eq!(budget.tokens(), Some(0));
    }

    #[tokio::test]
    async fn a_success_after_retries_refunds_what_they_took() {
        let budget = RetryBudget::new();
        calls(&budget, 500).await;
        let spent =
            take(&budget, RETRY).await.unwrap() + take(&budget, TIMEOUT_RETRY).await.unwrap();
        assert_eq!(budget.tokens(), Some(485));
        budget.succeeded(spent);
        assert_eq!(budget.tokens(), Some(500));
    }

    #[tokio::test]
    async fn a_first_attempt_success_adds_one_up_to_the_capacity() {
        let budget = RetryBudget::new();
        calls(&budget, 500).await;
        take(&budget, RETRY).await.unwrap();
        budget.succeeded(0);
        assert_eq!(budget.tokens(), Some(496));
        for _ in 0..10 {
            budget.succeeded(0);
        }
        assert_eq!(budget.tokens(), Some(500), "never above the capacity");
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_that_finds_the_bucket_empty_waits_for_a_refund_and_gets_one() {
        let budget = no_floor()
            .capacity(10)
            .timeout_retry_cost(5)
            .build()
            .unwrap();
        calls(&budget, 10).await;
        let _other = budget.admit(RETRY, Limits::of(LONG)).await.unwrap();
        let first = budget.admit(RETRY, Limits::of(LONG)).await.unwrap();
        let waiter = {
            let budget = budget.clone();
            tokio::spawn(async move {
                budget
                    .admit(RETRY, Limits::of(LONG))
                    .await
                    .map(|t| t.cost())
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !waiter.is_finished(),
            "held while the first retry is in flight"
        );
        assert_eq!(budget.waiting(), 1);
        let spent = first.cost();
        budget.answered(first, OK);
        budget.succeeded(spent);
        assert_eq!(waiter.await.unwrap(), Ok(5), "the refund paid for it");
        assert_eq!(budget.waiting(), 0);
        assert_eq!(budget.local_rejections(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_whose_deadline_ends_while_waiting_is_refused_having_sent_nothing() {
        let budget = no_floor()
            .capacity(10)
            .timeout_retry_cost(5)
            .build()
            .unwrap();
        calls(&budget, 10).await;
        let _in_flight = budget.admit(RETRY, Limits::of(LONG)).await.unwrap();
        let _also = budget.admit(RETRY, Limits::of(LONG)).await.unwrap();
        let started = Instant::now();
        let refused = budget
            .admit(RETRY, Limits::of(Duration::from_millis(300)))
            .await;
        let waited = started.elapsed();
        assert!(
            matches!(refused, Err(Refusal::NoTime { .. })),
            "{refused:?}"
        );
        assert!(waited >= Duration::from_millis(300), "{waited:?}");
        assert!(waited < Duration::from_millis(400), "{waited:?}");
        assert_eq!(budget.local_rejections(), 1);
        assert_eq!(budget.tokens(), Some(0));
    }

    #[tokio::test]
    async fn a_blip_with_plenty_of_recent_accepts_is_never_held() {
        let budget = RetryBudget::new();
        calls(&budget, 1000).await;
        answer(&budget, 1000, DOWN).await;
        assert_eq!(
            budget.throttle_ratio(),
            Some(0.0),
            "2,000 requests, 1,000 accepted"
        );
        for _ in 0..100 {
            assert_eq!(take(&budget, RETRY).await, Ok(5), "no wait at all");
        }
    }

    /// A budget without the retry floor, to test what the bucket alone does.
    fn no_floor() -> RetryBudgetBuilder {
        RetryBudget::builder().min_retries_per_sec(0)
    }

    /// Holds of up to `hold` in a call whose budget is `budget`.
    fn limits(hold: Duration, budget: Duration) -> Limits {
        Limits {
            max_wait: budget,
            hold,
            due: budget,
            rides_out: budget,
            free_probes: 0,
            attempt: budget.saturating_sub(hold) * 2,
        }
    }

    /// Holds of `hold` in a long call of `attempt`s, due for half an attempt's time after.
    fn due_after(hold: Duration, attempt: Duration) -> Limits {
        Limits {
            max_wait: hold + attempt / 2,
            hold,
            due: hold + attempt / 2,
            rides_out: LONG,
            free_probes: 0,
            attempt,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_outage_holds_first_attempts_by_time_sending_one_probe_at_a_time() {
        let budget = RetryBudget::new();
        answer(&budget, 30, DOWN).await;
        assert!(budget.throttle_ratio().unwrap() >= RetryBudget::DOWN_AT);
        tokio::time::sleep(RetryBudget::PROBE_INTERVAL).await;
        let started = Instant::now();
        let hold = Duration::from_secs(20);
        // Held up to 20 s, then due for 2 s more, in a call of 60 s.
        let call = Limits {
            max_wait: hold + Duration::from_secs(3),
            hold,
            due: hold + Duration::from_secs(2),
            rides_out: LONG * 2,
            free_probes: 0,
            attempt: Duration::from_secs(4),
        };
        let mut held: Vec<_> = (0..80)
            .map(|_| {
                let budget = budget.clone();
                tokio::spawn(async move { budget.admit(Admission::First, call).await })
            })
            .collect();
        let mut probes = 0;
        let mut refused = Vec::new();
        // Every probe is refused: the held calls wait, none is refused until its 20 s hold ends,
        // however many probes fail (the old rule refused them all after three, about 300 ms).
        // Then one goes as the probe and the others are refused, having sent nothing.
        let mut due_probes = 0;
        while started.elapsed() < Duration::from_secs(23) {
            tokio::time::sleep(Duration::from_millis(5)).await;
            let (done, still): (Vec<_>, Vec<_>) =
                held.into_iter().partition(|call| call.is_finished());
            held = still;
            let mut tickets = Vec::new();
            for call in done {
                match call.await.unwrap() {
                    Ok(ticket) => {
                        assert!(ticket.is_probe());
                        probes += 1;
                        if started.elapsed() >= hold {
                            due_probes += 1;
                        }
                        tickets.push(ticket);
                    }
                    Err(refusal) => refused.push((started.elapsed(), refusal)),
                }
            }
            for ticket in tickets {
                budget.answered(ticket, DOWN);
            }
            if started.elapsed() == Duration::from_secs(15) {
                assert!(refused.is_empty(), "{refused:?}");
                // Each waits three quarters of the outage's age: at about 0.1, 0.2, 0.35,
                // 0.6, 1.1, 1.9, 3.3, 5.7 and 10 s of it (17.6 is the next).
                assert!((8..=10).contains(&probes), "{probes} probes in 15 s");
                let down_for = budget.down_for().expect("down");
                assert!(down_for >= Duration::from_secs(15), "{down_for:?}");
            }
        }
        assert!(held.is_empty(), "{} still held", held.len());
        assert_eq!(probes + refused.len(), 80);
        // Due, their holds ended together: they get three last chances, a third of the 2 s
        // due window apart (the schedule's next probe is 10 s away), never one each.
        assert_eq!(due_probes, 3, "in the 2 s due");
        assert!(refused.len() >= 10, "{}", refused.len());
        for (at, refusal) in refused {
            assert!(at >= call.due, "refused at {at:?}");
            assert!(
                matches!(refusal, Refusal::Down { held, .. } if held >= hold),
                "{refusal:?}"
            );
        }
        assert_eq!(budget.local_rejections(), 80 - probes as u64);
    }

    /// A wave of calls whose holds end together, in an outage that heals between the
    /// schedule's probes: the schedule's next probe would come after their time ran out, but
    /// their last chances see the heal, and the ramp releases every one of them in time.
    #[tokio::test(start_paused = true)]
    async fn a_wave_s_last_chances_see_a_heal_the_schedule_would_see_too_late() {
        let budget = RetryBudget::new();
        answer(&budget, 30, DOWN).await;
        tokio::time::sleep(RetryBudget::PROBE_INTERVAL).await;
        let started = Instant::now();
        // Held up to 10 s, then due for 2 s (a 4 s attempt's half), in a call of 14 s.
        let hold = Duration::from_secs(10);
        let call = due_after(hold, Duration::from_secs(4));
        let heal = hold + Duration::from_millis(300);
        let mut held: Vec<_> = (0..40)
            .map(|_| {
                let budget = budget.clone();
                tokio::spawn(async move { budget.admit(Admission::First, call).await })
            })
            .collect();
        let (mut probes_in_due, mut released) = (0, 0);
        while !held.is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
            let (done, still): (Vec<_>, Vec<_>) =
                held.into_iter().partition(|call| call.is_finished());
            held = still;
            for call in done {
                let ticket = call.await.unwrap().expect("none is refused");
                let at = started.elapsed();
                if ticket.is_probe() && at >= hold {
                    probes_in_due += 1;
                }
                if !ticket.is_probe() {
                    released += 1;
                }
                budget.answered(ticket, if at >= heal { OK } else { DOWN });
            }
        }
        assert!(
            started.elapsed() < call.due,
            "released in time: {:?}",
            started.elapsed()
        );
        // The schedule's probes went at about 0.1, 0.2, 0.35, 0.6, 1.1, 1.9, 3.3, 5.8 and 10 s
        // of the outage; its next would wait three quarters of that, past the calls' 12 s.
        assert!(probe_interval(Duration::from_secs(10)) > Duration::from_secs(2));
        assert_eq!(
            probes_in_due, 1,
            "one last chance, a third of the due window later"
        );
        assert!(released >= 30, "{released} released by the ramp");
    }

    #[tokio::test(start_paused = true)]
    async fn a_ramp_lets_due_calls_go_at_once_as_they_have_no_time_for_its_steps() {
        let budget = RetryBudget::new();
        answer(&budget, 30, DOWN).await;
        tokio::time::sleep(RetryBudget::PROBE_INTERVAL).await;
        let started = Instant::now();
        // Calls of 6 s with 1 s attempts: held 4.5 s, then due for half a second.
        let hold = Duration::from_millis(4500);
        let call = due_after(hold, Duration::from_secs(1));
        // The service heals just as their holds end, and answers in 150 ms: the ramp's four
        // steps, each waiting for the answers of the last, would outlast the due window.
        let heal = hold + Duration::from_millis(50);
        let latency = Duration::from_millis(150);
        let calls: Vec<_> = (0..40)
            .map(|_| {
                let budget = budget.clone();
                tokio::spawn(async move {
                    let ticket = budget.admit(Admission::First, call).await?;
                    let sent = started.elapsed();
                    tokio::time::sleep(latency).await;
                    let probe = ticket.is_probe();
                    budget.answered(ticket, if sent >= heal { OK } else { DOWN });
                    Ok::<_, Refusal>((sent, probe))
                })
            })
            .collect();
        let (mut refused, mut probes, mut last) = (0, 0, Duration::ZERO);
        for call in calls {
            match call.await.unwrap() {
                Ok((sent, probe)) => {
                    probes += usize::from(probe && sent >= hold);
                    last = last.max(sent);
                }
                Err(_) => refused += 1,
            }
        }
        assert_eq!(
            refused, 0,
            "a due call is refused only when its time runs out"
        );
        assert!(
            last < call.due,
            "every call went in its due window: {last:?}"
        );
        assert!(
            (1..=3).contains(&probes),
            "{probes} probes in the due window: the wave's last chances, no more"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_held_retry_goes_as_the_probe_when_one_is_due_and_waits_otherwise() {
        let budget = RetryBudget::new();
        answer(&budget, 30, DOWN).await;
        tokio::time::sleep(RetryBudget::PROBE_INTERVAL).await;
        let retry = Admission::Retry {
            after_timeout: false,
            paced: false,
        };
        let call = limits(Duration::from_secs(10), Duration::from_secs(40));
        let started = Instant::now();
        // Any held attempt may be the probe, a call's final one included: the engine does not
        // count a refused probe against the call's attempts.
        let probe = budget.admit(retry, call).await.expect("the probe");
        assert_eq!(started.elapsed(), Duration::ZERO, "a probe was due");
        assert!(probe.is_probe());
        budget.answered(probe, DOWN);
        let next = budget.admit(retry, call).await.expect("the next probe");
        assert_eq!(
            started.elapsed(),
            RetryBudget::PROBE_INTERVAL,
            "held, sending nothing, until the next probe was due"
        );
        assert!(next.is_probe());
    }

    #[tokio::test(start_paused = true)]
    async fn probes_space_out_to_the_cap_in_a_long_outage() {
        assert_eq!(probe_interval(Duration::ZERO), RetryBudget::PROBE_INTERVAL);
        assert_eq!(
            probe_interval(Duration::from_millis(120)),
            RetryBudget::PROBE_INTERVAL
        );
        assert_eq!(
            probe_interval(Duration::from_secs(2)),
            Duration::from_millis(1500)
        );
        assert_eq!(
            probe_interval(Duration::from_secs(14)),
            RetryBudget::PROBE_INTERVAL_MAX
        );
        assert_eq!(
            probe_interval(Duration::from_secs(3600)),
            RetryBudget::PROBE_INTERVAL_MAX
        );
    }

    #[tokio::test(start_paused = true)]
    async fn once_the_outage_outlives_the_call_budget_a_call_is_refused_on_the_newest_probe() {
        let budget = RetryBudget::new();
        let call = Duration::from_secs(3);
        // The outage is measured from its first refusal.
        let outage = Instant::now();
        answer(&budget, 30, DOWN).await;
        tokio::time::sleep(RetryBudget::PROBE_INTERVAL).await;
        // Probes keep failing for longer than the call's budget; then a call that cannot go
        // as the probe is refused at once.
        let refused = loop {
            let asked = Instant::now();
            match budget.admit(Admission::First, limits(call, call)).await {
                Ok(probe) => budget.answered(probe, DOWN),
                Err(refusal) => break (asked.elapsed(), refusal),
            }
        };
        assert!(
            outage.elapsed() >= call,
            "{:?} {refused:?}",
            outage.elapsed()
        );
        assert!(
            matches!(refused.1, Refusal::Outlived { down_for, budget } if down_for >= call && budget == call),
            "{refused:?}"
        );
        let asked = Instant::now();
        let again = budget.admit(Admission::First, limits(call, call)).await;
        assert!(matches!(again, Err(Refusal::Outlived { .. })), "{again:?}");
        assert_eq!(asked.elapsed(), Duration::ZERO, "refused without holding");
        // Probes still go at their pace, so a heal is seen.
        tokio::time::sleep(RetryBudget::PROBE_INTERVAL_MAX).await;
        let probe = budget
            .admit(Admission::First, limits(call, call))
            .await
            .expect("the next probe goes");
        // A call with a longer budget than the outage so far still holds.
        let patient = {
            let budget = budget.clone();
            tokio::spawn(async move {
                let long = Duration::from_secs(60);
                budget.admit(Admission::First, limits(long, long)).await
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!patient.is_finished());
        // The server healed: the next probe is accepted and the patient call goes.
        budget.answered(probe, OK);
        let released = patient
            .await
            .unwrap()
            .expect("released by the ramp or as the probe");
        budget.answered(released, OK);
    }

    /// A client spends no more tokens in 10 to 20 seconds than its own calls of that time earn,
    /// one each, at least one retry's worth; retries that succeed give their share back.
    #[tokio::test(start_paused = true)]
    async fn a_client_spends_no_more_tokens_than_its_own_recent_calls_earn() {
        let budget = no_floor().build().unwrap();
        calls(&budget, 60).await;
        for _ in 0..6 {
            assert_eq!(take(&budget, TIMEOUT_RETRY).await, Ok(10));
        }
        assert_eq!(
            take(&budget, TIMEOUT_RETRY).await,
            Err(Refusal::Tokens { left: 0, cost: 10 }),
            "60 calls earn 6 retries after a timeout, not the 50 a full bucket pays for"
        );
        assert_eq!(budget.tokens(), Some(440), "the bucket itself is AWS's");
        budget.succeeded(60);
        for _ in 0..6 {
            assert_eq!(take(&budget, TIMEOUT_RETRY).await, Ok(10));
        }
        assert!(take(&budget, TIMEOUT_RETRY).await.is_err());
        // Twenty seconds on, with no call since: the least share, one retry's worth.
        tokio::time::sleep(Duration::from_secs(11)).await;
        assert!(
            take(&budget, TIMEOUT_RETRY).await.is_err(),
            "60 calls, 60 spent"
        );
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(
            take(&budget, TIMEOUT_RETRY).await,
            Ok(10),
            "the least share"
        );
        assert!(take(&budget, TIMEOUT_RETRY).await.is_err());
    }

    /// A client spends its share no faster than its calls earn it: in a second, what an
    /// average second of them earns. A retry held back by that pace alone goes in the next
    /// second, even without a floor, and is not refused.
    #[tokio::test(start_paused = true)]
    async fn a_client_spends_its_share_no_faster_than_its_calls_earn_it() {
        let budget = no_floor().build().unwrap();
        for _ in 0..10 {
            calls(&budget, 35).await;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        // 350 calls in 10 s: 35 retries after a timeout in the window, but 3 in a second
        // (35 tokens an average second, 10 a retry).
        for _ in 0..3 {
            assert_eq!(take(&budget, TIMEOUT_RETRY).await, Ok(10));
        }
        assert!(
            matches!(
                take(&budget, TIMEOUT_RETRY).await,
                Err(Refusal::NoTime { .. })
            ),
            "a fourth in the same second waits for the next"
        );
        let started = Instant::now();
        let mut went = Vec::new();
        for _ in 0..3 {
            let ticket = budget.admit(TIMEOUT_RETRY, Limits::of(LONG)).await.unwrap();
            assert_eq!(ticket.cost(), 10);
            went.push(started.elapsed());
        }
        let second = Duration::from_secs(1);
        assert_eq!(went, [second; 3], "the next second pays for the next three");
    }

    /// A new client's first calls each keep a retry before they have earned any: three
    /// retries' worth in its first 10 seconds, one after.
    #[tokio::test(start_paused = true)]
    async fn a_new_client_s_first_calls_each_keep_a_retry() {
        let budget = no_floor().build().unwrap();
        calls(&budget, 3).await;
        for _ in 0..3 {
            assert_eq!(take(&budget, TIMEOUT_RETRY).await, Ok(10));
        }
        assert!(take(&budget, TIMEOUT_RETRY).await.is_err());
        let older = no_floor().build().unwrap();
        tokio::time::sleep(Duration::from_secs(10)).await;
        calls(&older, 3).await;
        assert_eq!(take(&older, TIMEOUT_RETRY).await, Ok(10));
        assert!(
            take(&older, TIMEOUT_RETRY).await.is_err(),
            "one retry's worth once the client is not new"
        );
    }

    /// Ten clients of forty calls each pay together for the retries one client of their four
    /// hundred calls would: each one's tokens are a share of its own calls. (Each with the 500
    /// tokens of a full bucket, the ten would pay for ten times as many.)
    #[tokio::test(start_paused = true)]
    async fn small_clients_together_pay_for_what_one_client_of_their_summed_traffic_would() {
        let small: Vec<RetryBudget> = (0..10).map(|_| no_floor().build().unwrap()).collect();
        for budget in &small {
            calls(budget, 40).await;
        }
        let large = no_floor().build().unwrap();
        calls(&large, 400).await;
        let (mut by_small, mut by_large) = (0u32, 0u32);
        for budget in &small {
            while take(budget, TIMEOUT_RETRY).await.is_ok() {
                by_small += 1;
            }
        }
        while take(&large, TIMEOUT_RETRY).await.is_ok() {
            by_large += 1;
        }
        assert_eq!((by_small, by_large), (40, 40));
    }

    /// The floor of a client with little traffic is a tenth of its calls a second.
    #[tokio::test(start_paused = true)]
    async fn a_small_client_s_floor_is_a_tenth_of_its_calls_a_second() {
        let budget = RetryBudget::builder().capacity(10).build().unwrap();
        calls(&budget, 20).await;
        assert_eq!(take(&budget, RETRY).await, Ok(5));
        assert_eq!(take(&budget, RETRY).await, Ok(5));
        // 20 calls in the first second: a floor of 2 retries a second, not 10.
        assert_eq!(take(&budget, RETRY).await, Ok(0));
        assert_eq!(take(&budget, RETRY).await, Ok(0));
        let started = Instant::now();
        let ticket = budget.admit(RETRY, Limits::of(LONG)).await.unwrap();
        assert_eq!(ticket.cost(), 0);
        assert_eq!(started.elapsed(), Duration::from_millis(500));
    }

    /// A client of fewer than ten calls a second (a floor under one retry a second) keeps its
    /// floor retry for a blip's lone retry, but not for a retry after a timeout: that one
    /// waits for the share to renew, instead of going on a floor retry banked while the client
    /// was calm, which a thousand such clients would all send the instant their attempts began
    /// to time out.
    #[tokio::test(start_paused = true)]
    async fn a_small_client_s_floor_pays_no_retry_after_a_timeout() {
        let budget = RetryBudget::new();
        for _ in 0..10 {
            calls(&budget, 5).await;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        // 50 calls in 10 s: five retries after a timeout, one a second (its least share).
        let started = Instant::now();
        let mut went = Vec::new();
        for n in 0..6 {
            if n == 5 {
                assert_eq!(
                    take(&budget, RETRY).await,
                    Ok(0),
                    "the share spent, a blip's retry goes on the floor"
                );
            }
            let ticket = budget.admit(TIMEOUT_RETRY, Limits::of(LONG)).await.unwrap();
            assert_eq!(ticket.cost(), 10, "paid from the share, not the floor");
            went.push(started.elapsed().as_secs());
        }
        // The sixth: the window that began at 10 s holds the five, so the share renews with
        // the least of one retry at 30 s.
        assert_eq!(went, [0, 1, 2, 3, 4, 20]);
        assert_eq!(budget.admissions().floor, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_lone_retry_goes_on_the_floor_when_the_bucket_is_empty() {
        let budget = RetryBudget::builder().capacity(10).build().unwrap();
        calls(&budget, 1000).await;
        assert_eq!(take(&budget, RETRY).await, Ok(5));
        assert_eq!(take(&budget, RETRY).await, Ok(5));
        // Empty, nothing in flight: ten retries a second still go, for free.
        for _ in 0..RetryBudget::MIN_RETRIES_PER_SEC {
            assert_eq!(take(&budget, RETRY).await, Ok(0));
        }
        // The eleventh waits for the floor's refill, within its own time.
        let started = Instant::now();
        let ticket = budget.admit(RETRY, Limits::of(LONG)).await.unwrap();
        assert_eq!(ticket.cost(), 0);
        assert_eq!(started.elapsed(), Duration::from_millis(100));
        assert_eq!(budget.local_rejections(), 0);
    }

    /// Calls held by a service found down (30 refusals), then the probe's acceptance that
    /// starts the ramp: the held calls' admissions, to be released by it.
    async fn held_after_an_accepted_probe(
        budget: &RetryBudget,
        calls: usize,
    ) -> Vec<tokio::task::JoinHandle<Result<Ticket, Refusal>>> {
        answer(budget, 30, DOWN).await;
        tokio::time::sleep(RetryBudget::PROBE_INTERVAL).await;
        let probe = budget
            .admit(Admission::First, Limits::of(LONG))
            .await
            .unwrap();
        let held = (0..calls)
            .map(|_| {
                let budget = budget.clone();
                tokio::spawn(async move { budget.admit(Admission::First, Limits::of(LONG)).await })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(10)).await;
        budget.answered(probe, OK);
        held
    }

    #[tokio::test(start_paused = true)]
    async fn after_an_outage_held_calls_ramp_back_as_probes_succeed_and_none_is_refused() {
        let budget = RetryBudget::new();
        let mut held = held_after_an_accepted_probe(&budget, 50).await;
        let mut released_per_probe = Vec::new();
        while !held.is_empty() {
            tokio::time::sleep(RetryBudget::PROBE_INTERVAL).await;
            let (done, still): (Vec<_>, Vec<_>) =
                held.into_iter().partition(|call| call.is_finished());
            held = still;
            released_per_probe.push(done.len());
            for call in done {
                let ticket = call
                    .await
                    .unwrap()
                    .expect("never refused: the server healed");
                budget.answered(ticket, OK);
            }
        }
        println!("released per probe interval: {released_per_probe:?}");
        assert!(released_per_probe.len() >= 2, "a ramp, not all at once");
        assert!(released_per_probe[0] < 50);
        assert!(budget.throttle_ratio().unwrap() < RetryBudget::DOWN_AT);
        assert_eq!(budget.local_rejections(), 0);
    }

    /// A herd whose calls each fail once and then succeed: half the attempts the ramp releases
    /// are refused (first attempts), half accepted (retries). The service is not down by the
    /// ratio, so the ramp goes on and every held call is released; ending the ramp on one
    /// refusal held them until their budgets ran out.
    #[tokio::test(start_paused = true)]
    async fn a_ramp_whose_attempts_are_half_refused_still_releases_every_held_call() {
        let budget = RetryBudget::new();
        let mut held = held_after_an_accepted_probe(&budget, 50).await;
        let mut answered = 0;
        for _ in 0..20 {
            if held.is_empty() {
                break;
            }
            tokio::time::sleep(RetryBudget::PROBE_INTERVAL).await;
            let (done, still): (Vec<_>, Vec<_>) =
                held.into_iter().partition(|call| call.is_finished());
            held = still;
            for call in done {
                let ticket = call.await.unwrap().expect("never refused");
                answered += 1;
                budget.answered(ticket, if answered % 2 == 0 { OK } else { DOWN });
            }
        }
        assert!(held.is_empty(), "{} calls still held", held.len());
        assert_eq!(budget.local_rejections(), 0);
    }

    /// The attempts a ramp releases are mostly refused: the service is down again and the ramp
    /// ends, the rest held.
    #[tokio::test(start_paused = true)]
    async fn a_ramp_whose_attempts_are_mostly_refused_goes_back_to_holding() {
        let budget = RetryBudget::new();
        let mut held = held_after_an_accepted_probe(&budget, 50).await;
        let mut released = 0;
        for _ in 0..3 {
            tokio::time::sleep(RetryBudget::PROBE_INTERVAL).await;
            let (done, still): (Vec<_>, Vec<_>) =
                held.into_iter().partition(|call| call.is_finished());
            held = still;
            for call in done {
                released += 1;
                budget.answered(call.await.unwrap().expect("released"), DOWN);
            }
        }
        assert!(released >= 4, "the ramp released {released}");
        assert!(!held.is_empty(), "the ramp ended: the rest are held");
        assert!(budget.throttle_ratio().unwrap() >= RetryBudget::DOWN_AT);
    }

    #[tokio::test]
    async fn a_retry_paced_by_a_retry_after_is_free_even_when_down_and_empty() {
        let budget = RetryBudget::builder()
            .capacity(10)
            .timeout_retry_cost(5)
            .build()
            .unwrap();
        answer(&budget, 30, DOWN).await;
        take(&budget, RETRY).await.unwrap();
        let paced = Admission::Retry {
            after_timeout: false,
            paced: true,
        };
        for _ in 0..10 {
            assert_eq!(take(&budget, paced).await, Ok(0));
        }
    }

    #[tokio::test]
    async fn refills_one_token_per_interval_on_the_injected_clock() {
        let clock = manual_clock();
        let budget = RetryBudget::builder()
            .capacity(10)
            .refill_every(Duration::from_secs(2))
            .clock(clock.clone())
            .build()
            .unwrap();
        calls(&budget, 20).await;
        take(&budget, RETRY).await.unwrap();
        take(&budget, RETRY).await.unwrap();
        assert_eq!(budget.tokens(), Some(0));
        clock.advance(Duration::from_secs(3));
        assert_eq!(budget.tokens(), Some(1), "one whole interval");
        clock.advance(Duration::from_secs(1));
        assert_eq!(budget.tokens(), Some(2), "the odd second was carried over");
        clock.advance(Duration::from_secs(3600));
        assert_eq!(budget.tokens(), Some(10), "capped at the capacity");
        take(&budget, RETRY).await.unwrap();
        clock.advance(Duration::from_secs(1));
        assert_eq!(
            budget.tokens(),
            Some(5),
            "time spent full is not banked for later"
        );
    }

    #[tokio::test]
    async fn the_ratio_runs_on_the_injected_clock_and_forgets_an_outage_after_two_minutes() {
        let clock = manual_clock();
        let budget = RetryBudget::builder().clock(clock.clone()).build().unwrap();
        answer(&budget, 30, DOWN).await;
        assert!(budget.throttle_ratio().unwrap() > 0.9);
        clock.advance(RetryBudget::SHORT_HISTORY);
        assert!(
            budget.throttle_ratio().unwrap() > 0.9,
            "still in the long horizon"
        );
        clock.advance(RetryBudget::HISTORY);
        assert_eq!(budget.throttle_ratio(), Some(0.0));
    }

    #[tokio::test]
    async fn never_refills_without_a_refill_interval() {
        let clock = manual_clock();
        let budget = RetryBudget::builder().clock(clock.clone()).build().unwrap();
        calls(&budget, 500).await;
        take(&budget, RETRY).await.unwrap();
        clock.advance(Duration::from_secs(86_400));
        assert_eq!(budget.tokens(), Some(495));
    }

    #[tokio::test]
    async fn clones_share_one_bucket() {
        let budget = RetryBudget::new();
        calls(&budget, 500).await;
        let clone = budget.clone();
        take(&clone, RETRY).await.unwrap();
        assert_eq!(budget.tokens(), Some(495));
    }

    #[tokio::test]
    async fn a_disabled_budget_grants_every_attempt_for_free() {
        let budget = RetryBudget::disabled();
        for _ in 0..1000 {
            assert_eq!(take(&budget, TIMEOUT_RETRY).await, Ok(0));
        }
        assert_eq!(budget.tokens(), None);
        assert_eq!(budget.throttle_ratio(), None);
        assert!(!budget.is_enabled());
    }

    #[test]
    fn refuses_a_budget_that_cannot_pay_for_one_retry() {
        for builder in [
            RetryBudget::builder().retry_cost(0),
            RetryBudget::builder().timeout_retry_cost(0),
            RetryBudget::builder().capacity(9),
            RetryBudget::builder().refill_every(Duration::ZERO),
        ] {
            let error = builder.build().expect_err("invalid");
            assert_eq!(error.kind(), crate::core::error::ErrorKind::InvalidInput);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn one_service_down_never_holds_another() {
        let budget = RetryBudget::new();
        answer(&budget, 30, DOWN).await;
        assert!(budget.service_down_for(SERVICE).is_some());
        let api = ServiceKey {
            endpoint: 1,
            name: "api",
        };
        let started = Instant::now();
        let ticket = budget
            .admit_to(api, Admission::First, 5, Limits::of(LONG))
            .await
            .expect("the API is not down");
        assert!(!ticket.is_probe());
        assert_eq!(started.elapsed(), Duration::ZERO, "not held");
        assert_eq!(budget.service_down_for(api), None);
    }

    #[tokio::test(start_paused = true)]
    async fn failures_in_a_row_count_5xx_and_lost_answers_but_not_429s() {
        let budget = RetryBudget::new();
        answer(&budget, 3, OK).await;
        assert_eq!(budget.service_health(SERVICE), (None, 0));
        answer(&budget, 2, DOWN).await;
        answer(&budget, 1, None).await;
        answer(&budget, 1, Some(StatusCode::TOO_MANY_REQUESTS)).await;
        assert_eq!(
            budget.service_health(SERVICE),
            (None, 3),
            "a 429 neither counts nor ends the run, and the ratio is not down yet"
        );
        answer(&budget, 1, OK).await;
        assert_eq!(
            budget.service_health(SERVICE),
            (None, 0),
            "an accept ends it"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_outage_is_measured_from_its_first_refusal() {
        let budget = RetryBudget::new();
        answer(&budget, 1, DOWN).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        answer(&budget, 5, DOWN).await;
        let down_for = budget.service_down_for(SERVICE).expect("down");
        assert_eq!(down_for, Duration::from_secs(2), "from the first refusal");
    }

    #[tokio::test(start_paused = true)]
    async fn after_a_quiet_spell_the_next_attempt_probes_instead_of_being_refused() {
        let budget = RetryBudget::new();
        let call = Duration::from_secs(3);
        answer(&budget, 30, DOWN).await;
        tokio::time::sleep(RetryBudget::PROBE_INTERVAL).await;
        // Down for longer than a call's budget, the newest probe refused: refused at once.
        let refused = loop {
            match budget.admit(Admission::First, limits(call, call)).await {
                Ok(probe) => budget.answered(probe, DOWN),
                Err(refusal) => break refusal,
            }
        };
        assert!(matches!(refused, Refusal::Outlived { .. }), "{refused:?}");
        // A minute of silence: what the service said is stale, and the next call probes.
        tokio::time::sleep(Duration::from_secs(60)).await;
        let asked = Instant::now();
        let probe = budget
            .admit(Admission::First, limits(call, call))
            .await
            .expect("sent as a probe, not refused on old evidence");
        assert!(probe.is_probe());
        assert_eq!(asked.elapsed(), Duration::ZERO);
        budget.answered(probe, OK);
    }

    #[tokio::test(start_paused = true)]
    async fn a_final_retry_probes_on_its_paced_allowance_once_its_hold_has_lasted_its_share() {
        let budget = RetryBudget::new();
        answer(&budget, 30, DOWN).await;
        tokio::time::sleep(RetryBudget::PROBE_INTERVAL).await;
        let hold = Duration::from_secs(10);
        let started = Instant::now();
        let call = Limits {
            free_probes: 9,
            ..limits(hold, Duration::from_secs(40))
        };
        let last = budget
            .admit_to(SERVICE, RETRY, 1, call)
            .await
            .expect("a probe on the allowance");
        assert!(last.is_probe());
        assert_eq!(started.elapsed(), hold / 10, "its share of the hold");
        budget.answered(last, DOWN);
    }

    #[tokio::test(start_paused = true)]
    async fn a_final_retry_is_not_spent_as_a_probe_while_its_hold_lasts() {
        let budget = RetryBudget::new();
        answer(&budget, 30, DOWN).await;
        tokio::time::sleep(RetryBudget::PROBE_INTERVAL).await;
        let hold = Duration::from_secs(10);
        let started = Instant::now();
        let last = budget
            .admit_to(SERVICE, RETRY, 1, limits(hold, Duration::from_secs(40)))
            .await
            .expect("due once its hold is over");
        assert!(last.is_probe());
        assert!(started.elapsed() >= hold, "{:?}", started.elapsed());
        // A call with attempts to spare probes at once.
        budget.answered(last, DOWN);
        tokio::time::sleep(RetryBudget::PROBE_INTERVAL_MAX).await;
        let started = Instant::now();
        let spare = budget
            .admit_to(SERVICE, RETRY, 3, limits(hold, Duration::from_secs(40)))
            .await
            .unwrap();
        assert!(spare.is_probe());
        assert_eq!(started.elapsed(), Duration::ZERO);
    }
}
